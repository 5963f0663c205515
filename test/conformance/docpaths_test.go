package conformance

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// TestDocPathsExist checks that every repository path a doc cites exists:
// README.md, docs/**/*.md and charts/snapkeeper/README.md, next to
// TestCompatibilityDoc, which checks docs/compatibility.md's content. Two
// kinds of citation are checked:
//
//   - paths from the repository root that start with cmd/, pkg/, test/,
//     docs/, charts/, hack/, examples/ or .ci/ (optionally after ./),
//     in backticks, in link text and targets, in code blocks or in prose;
//   - relative markdown link targets, [text](target), resolved against the
//     doc's directory.
//
// Placeholders and globs (a path holding *, <, >, {, $ or ...) are
// skipped, and so is bin/, where built artefacts go, and the few paths of
// other projects the docs name (foreignPaths). A Go symbol after a
// package path (pkg/csi.MayBeInProgress, pkg/csi/csitest.Mock) names the
// package's directory; an anchor (#section) or a line number (:42) is not
// part of the path. A path from the root may also name a path next to the
// doc (the chart's README cites examples/driver-chart inside the chart).
func TestDocPathsExist(t *testing.T) {
	root := framework.RepoRoot()
	docs, err := citingDocs(root)
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	total := 0
	for _, doc := range docs {
		cites, err := docCitations(root, doc)
		if err != nil {
			t.Fatal(err)
		}
		total += len(cites)
		for _, c := range cites {
			if !pathExists(root, c.path) && (c.relative || !pathExists(root, filepath.ToSlash(filepath.Join(filepath.Dir(doc), c.path)))) {
				missing = append(missing, fmt.Sprintf("%s:%d: %s (%s)", doc, c.line, c.cited, c.path))
			}
		}
	}
	t.Logf("%d docs cite %d paths", len(docs), total)
	if len(missing) > 0 {
		t.Errorf("%d cited paths do not exist (doc:line: as cited (resolved from the repository root)); fix the doc or the path:\n  %s",
			len(missing), strings.Join(missing, "\n  "))
	}
}

// citingDocs returns the docs to check, relative to root, sorted.
func citingDocs(root string) ([]string, error) {
	docs := []string{"README.md", filepath.Join("charts", "snapkeeper", "README.md")}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			docs = append(docs, rel)
		}
		return nil
	})
	sort.Strings(docs[2:])
	return docs, err
}

// citation is one path a doc cites: as written, and resolved to a path
// from the repository root.
type citation struct {
	line  int
	cited string
	path  string
	// relative is set for a markdown link target, already resolved against
	// the doc's directory. A path written from the root may also name a
	// path next to the doc (the chart's README cites examples/driver-chart
	// in the chart).
	relative bool
}

// foreignPaths are paths of other projects that look like ours, each with
// the name that must be on the same line or the line before for it to be
// theirs.
var foreignPaths = map[string]string{
	"pkg/registry":   "go-containerregistry", // docs/releases.md: the in-process registry
	"pkg/controller": "cert-manager",         // docs/testing.md: cert-manager's controllers
}

var (
	// rootPath is a path from the repository root: a top directory of the
	// repository, after the start of the line or a character that cannot be
	// part of a path (so github.com/x/pkg/y and ../pkg/y do not match).
	rootPath = regexp.MustCompile("(?:^|[\\s(\\[`\"'=,;|])(?:\\./)?((?:cmd|pkg|test|docs|charts|hack|examples|\\.ci)/[^\\s`()\\[\\]\"',;|]*)")
	// mdLink is a markdown link target (no title, no spaces).
	mdLink = regexp.MustCompile(`\]\(([^()\s]+)\)`)
	// lineSuffix is a :line or :line:column after a file name.
	lineSuffix = regexp.MustCompile(`(:\d+)+$`)
)

// docCitations returns the paths doc cites, in order.
func docCitations(root, doc string) ([]citation, error) {
	f, err := os.Open(filepath.Join(root, doc))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []citation
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	prev := ""
	for n := 1; sc.Scan(); n++ {
		text := sc.Text()
		near := prev + "\n" + text
		prev = text
		seen := map[string]bool{}
		add := func(cited, p string, relative bool) {
			if !seen[p] {
				seen[p] = true
				out = append(out, citation{line: n, cited: cited, path: p, relative: relative})
			}
		}
		for _, m := range rootPath.FindAllStringSubmatch(text, -1) {
			p, ok := cleanPath(m[1])
			if owner, foreign := foreignPaths[p]; !ok || (foreign && strings.Contains(near, owner)) {
				continue
			}
			add(m[1], p, false)
		}
		for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			p, ok := cleanPath(target)
			if !ok {
				continue
			}
			p = filepath.ToSlash(filepath.Join(filepath.Dir(doc), p))
			if p == "." || strings.HasPrefix(p, "../") || isBuilt(p) {
				continue
			}
			add(target, p, true)
		}
	}
	return out, sc.Err()
}

// cleanPath drops an anchor, a line number and trailing punctuation, and
// reports false for placeholders, globs and built artefacts.
func cleanPath(p string) (string, bool) {
	if i := strings.IndexByte(p, '#'); i >= 0 {
		p = p[:i]
	}
	if strings.ContainsAny(p, "*<>{}$") || strings.Contains(p, "...") {
		return "", false
	}
	p = lineSuffix.ReplaceAllString(p, "")
	p = strings.TrimRight(p, ".:")
	p = strings.TrimPrefix(p, "./")
	if p == "" || isBuilt(p) {
		return "", false
	}
	return p, true
}

// isBuilt reports whether p is under bin/, where the Makefile builds to.
func isBuilt(p string) bool { return p == "bin" || strings.HasPrefix(p, "bin/") }

// goSymbol is a Go identifier after a package path: pkg/csi.MayBeInProgress.
var goSymbol = regexp.MustCompile(`\.[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)

// fileExt is the extension of a file kind the docs cite, never a Go symbol.
var fileExt = regexp.MustCompile(`\.(go|md|ya?ml|sh|json|txt|tpl|mk|mod|sum)$`)

// pathExists reports whether p (from root) exists, or names a Go package
// directory followed by one of its symbols.
func pathExists(root, p string) bool {
	if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(p))); err == nil {
		return true
	}
	if fileExt.MatchString(p) {
		return false
	}
	dir := goSymbol.ReplaceAllString(p, "")
	if dir == p {
		return false
	}
	fi, err := os.Stat(filepath.Join(root, filepath.FromSlash(dir)))
	return err == nil && fi.IsDir()
}
