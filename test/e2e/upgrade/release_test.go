package upgrade

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// previousReleaseFile points at the release this suite upgrades from
// (docs/releases.md, "Upgrades"): a CI clone may carry no tags, so the
// release is found by its commit.
const previousReleaseFile = "hack/previous-release"

// requireEnv=1 turns "the previous release's commit is not in this clone"
// from a skip into a failure.
const requireEnv = "SNAPKEEPER_REQUIRE_UPGRADE"

// release is hack/previous-release.
type release struct {
	Version string // the tag, "v0.1.0"
	Commit  string // the full commit the tag points at
}

var (
	versionRe = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`)
	commitRe  = regexp.MustCompile(`^[0-9a-f]{40}$`)
)

// parseRelease reads "key=value" lines (# comments and blank lines
// ignored); version and commit are required, nothing else is allowed.
func parseRelease(b []byte) (release, error) {
	var r release
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		switch {
		case !ok:
			return r, fmt.Errorf("%s line %d: %q is not key=value", previousReleaseFile, n, line)
		case k == "version" && versionRe.MatchString(v):
			r.Version = v
		case k == "version":
			return r, fmt.Errorf("%s line %d: version %q is not a release tag such as v1.2.0", previousReleaseFile, n, v)
		case k == "commit" && commitRe.MatchString(v):
			r.Commit = v
		case k == "commit":
			return r, fmt.Errorf("%s line %d: commit %q is not a full 40-digit lower-case commit (git rev-parse TAG^{commit})", previousReleaseFile, n, v)
		default:
			return r, fmt.Errorf("%s line %d: unknown key %q (want version or commit)", previousReleaseFile, n, k)
		}
	}
	if r.Version == "" || r.Commit == "" {
		return r, fmt.Errorf("%s: needs both version=vX.Y.Z and commit=<40 hex digits>", previousReleaseFile)
	}
	return r, sc.Err()
}

func git(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = framework.RepoRoot()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// previousRelease loads the pointer and checks that this clone has the
// commit (skipping, or failing with SNAPKEEPER_REQUIRE_UPGRADE=1, when a
// shallow clone lacks it) and that the tag, where the clone has it, points
// at the same commit.
func previousRelease(t *testing.T) release {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(framework.RepoRoot(), previousReleaseFile))
	if err != nil {
		t.Fatal(err)
	}
	rel, err := parseRelease(b)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := git(ctx, "cat-file", "-e", rel.Commit+"^{commit}"); err != nil {
		fix := "run `git fetch --unshallow` (a shallow clone)"
		if shallow, _ := git(ctx, "rev-parse", "--is-shallow-repository"); shallow != "true" {
			fix = "run `git fetch --tags origin` (or `git fetch origin " + rel.Commit + "`)"
		}
		msg := fmt.Sprintf("the previous release %s (commit %s, %s) is not in this clone's history: %s to run the upgrade test; %v",
			rel.Version, rel.Commit, previousReleaseFile, fix, err)
		if os.Getenv(requireEnv) == "1" {
			t.Fatalf("%s (%s=1)", msg, requireEnv)
		}
		t.Skipf("skipping: %s (set %s=1 to fail instead)", msg, requireEnv)
	}
	if tagged, err := git(ctx, "rev-parse", "-q", "--verify", "refs/tags/"+rel.Version+"^{commit}"); err == nil && tagged != rel.Commit {
		t.Fatalf("%s says %s is commit %s, but the tag %s points at %s: fix %s", previousReleaseFile, rel.Version,
			rel.Commit, rel.Version, tagged, previousReleaseFile)
	}
	return rel
}

// build is one version's binaries and charts.
type build struct {
	Version     string
	Controller  string // snapkeeper-controller
	Webhook     string // snapkeeper-webhook
	Chart       string // the packaged chart (.tgz), as `make chart` makes it
	DriverChart string // the example driver chart with Chart as its dependency
	BuildTime   time.Duration
}

// buildTree builds the controller and the webhook of the source tree in
// dir stamped with version and revision (as `make build` does; without
// -trimpath, so the dependencies come from the build cache the other
// suites and `go vet` filled: only the tree's own packages compile), packages its
// chart with version and appVersion set as `make chart` does, and the
// example driver chart around it.
func buildTree(ctx context.Context, h *framework.Helm, dir, out, version, revision string) (*build, error) {
	b := &build{Version: version}
	ldflags := "-X github.com/snapkeeper/snapkeeper/pkg/version.Version=" + version +
		" -X github.com/snapkeeper/snapkeeper/pkg/version.Revision=" + revision
	binDir := filepath.Join(out, "bin")
	start := time.Now()
	cmd := exec.CommandContext(ctx, "go", "build", "-buildvcs=false", "-ldflags", ldflags, "-o", binDir+"/", "./cmd/controller", "./cmd/webhook")
	cmd.Dir = dir
	if o, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build in %s: %w\n%s", dir, err, o)
	}
	b.BuildTime = time.Since(start)
	b.Controller, b.Webhook = filepath.Join(binDir, "controller"), filepath.Join(binDir, "webhook")
	var err error
	chartVersion := strings.TrimPrefix(version, "v")
	if b.Chart, err = h.Package(ctx, filepath.Join(dir, "charts", "snapkeeper"), chartVersion, strings.ReplaceAll(version, "+", "_"), out); err != nil {
		return nil, err
	}
	b.DriverChart = filepath.Join(out, "driver-chart")
	if err := os.CopyFS(b.DriverChart, os.DirFS(filepath.Join(dir, "charts", "snapkeeper", "examples", "driver-chart"))); err != nil {
		return nil, fmt.Errorf("the example driver chart of %s: %w", version, err)
	}
	if err := os.MkdirAll(filepath.Join(b.DriverChart, "charts"), 0o755); err != nil {
		return nil, err
	}
	chart, err := os.ReadFile(b.Chart)
	if err != nil {
		return nil, err
	}
	return b, os.WriteFile(filepath.Join(b.DriverChart, "charts", filepath.Base(b.Chart)), chart, 0o644)
}

// buildPrevious exports the release's tree (git archive) and builds it
// with the module cache and build cache of this one.
func buildPrevious(t *testing.T, h *framework.Helm, rel release) *build {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	tmp := t.TempDir()
	tree := filepath.Join(tmp, "tree")
	if err := os.MkdirAll(tree, 0o755); err != nil {
		t.Fatal(err)
	}
	tar := filepath.Join(tmp, "tree.tar")
	if _, err := git(ctx, "archive", "--format=tar", "-o", tar, rel.Commit); err != nil {
		t.Fatal(err)
	}
	if o, err := exec.CommandContext(ctx, "tar", "-xf", tar, "-C", tree).CombinedOutput(); err != nil {
		t.Fatalf("tar -xf %s: %v\n%s", tar, err, o)
	}
	b, err := buildTree(ctx, h, tree, filepath.Join(tmp, "out"), rel.Version, rel.Commit)
	if err != nil {
		t.Fatal(err)
	}
	checkVersion(t, b.Controller, rel.Version)
	return b
}

// buildCurrent builds the working tree with the version `make version`
// prints.
func buildCurrent(t *testing.T, h *framework.Helm) *build {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	root := framework.RepoRoot()
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "version.sh"))
	cmd.Dir = root
	v, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/version.sh: %v", err)
	}
	rev, err := git(ctx, "rev-parse", "HEAD")
	if err != nil {
		rev = "unknown"
	}
	b, err := buildTree(ctx, h, root, t.TempDir(), strings.TrimSpace(string(v)), rev)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkVersion: the binary says it is the release it was built as.
func checkVersion(t *testing.T, bin, version string) {
	t.Helper()
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), version) {
		t.Fatalf("%s --version: %v %q, want %s", bin, err, out, version)
	}
}
