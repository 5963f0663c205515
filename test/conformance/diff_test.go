package conformance

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// Kinds of difference between a pairing's outcome and the reference's.
const (
	changeMissing = "missing" // the reference has the path, the pairing not
	changeExtra   = "extra"   // the pairing has the path, the reference not
	changeValue   = "changed" // both have it with different values
	changeAny     = "any"
)

// difference is one path that differs from the reference.
type difference struct {
	Path     string
	Ref, Got string // "" when absent
	Change   string
	// Allowed is the id of the documented difference that accepts it ("" if
	// none).
	Allowed string
}

func (d difference) String() string {
	switch d.Change {
	case changeMissing:
		return fmt.Sprintf("- %s = %s   (only community/community)", d.Path, d.Ref)
	case changeExtra:
		return fmt.Sprintf("+ %s = %s   (only this pairing)", d.Path, d.Got)
	}
	return fmt.Sprintf("~ %s: community/community %q, this pairing %q", d.Path, d.Ref, d.Got)
}

// diff compares got with ref, path by path, sorted.
func diff(ref, got outcome) []difference {
	paths := map[string]bool{}
	for p := range ref {
		paths[p] = true
	}
	for p := range got {
		paths[p] = true
	}
	var out []difference
	for p := range paths {
		r, inRef := ref[p]
		g, inGot := got[p]
		switch {
		case inRef && !inGot:
			out = append(out, difference{Path: p, Ref: r, Change: changeMissing})
		case !inRef && inGot:
			out = append(out, difference{Path: p, Got: g, Change: changeExtra})
		case r != g:
			out = append(out, difference{Path: p, Ref: r, Got: g, Change: changeValue})
		}
	}
	sort.Slice(out, func(i, j int) bool { return pathLess(out[i].Path, out[j].Path) })
	return out
}

var stepPrefix = regexp.MustCompile(`^s(\d+):`)

// pathLess orders step paths by step number, then the rest by name.
func pathLess(a, b string) bool {
	ma, mb := stepPrefix.FindStringSubmatch(a), stepPrefix.FindStringSubmatch(b)
	switch {
	case ma != nil && mb != nil && ma[1] != mb[1]:
		return len(ma[1]) < len(mb[1]) || len(ma[1]) == len(mb[1]) && ma[1] < mb[1]
	case ma != nil && mb == nil:
		return true
	case ma == nil && mb != nil:
		return false
	}
	return a < b
}

// allowEntry is one rule of the machine-readable allow-list in
// docs/compatibility.md: differences of the listed change kind on paths
// matching one of Paths, in matching scenarios and pairings, are the
// documented difference ID.
type allowEntry struct {
	ID        string   `json:"id"`
	Scenarios []string `json:"scenarios"`
	Pairings  []string `json:"pairings"`
	Paths     []string `json:"paths"`
	Change    string   `json:"change,omitempty"`
}

// reasons a difference may be accepted for (docs/compatibility.md).
// "community race" is a difference that comes from a race inside a
// community binary: it shows or not depending on timing.
var reasons = []string{"fewer writes", "fewer events", "better message", "safer choice", "community race"}

// compatDoc is docs/compatibility.md, parsed.
type compatDoc struct {
	path  string
	text  string
	allow []allowEntry
	// sections maps a documented difference id to its reason.
	sections map[string]string
	// table maps scenario -> pairing id -> cell text.
	table map[string]map[string]string
}

const (
	allowBegin = "<!-- conformance:allow -->"
	allowEnd   = "<!-- /conformance:allow -->"
	tableBegin = "<!-- conformance:table -->"
	tableEnd   = "<!-- /conformance:table -->"
)

func docPath() string { return filepath.Join(framework.RepoRoot(), "docs", "compatibility.md") }

// sectionRE matches "### `id`: title" headings; reasonRE a section's
// "Reason: ..." line.
var (
	sectionRE = regexp.MustCompile("(?m)^### `([a-z0-9-]+)`")
	reasonRE  = regexp.MustCompile(`(?m)^\*\*Reason:\*\* ([a-z ]+)\.`)
)

func loadDoc() (*compatDoc, error) {
	p := docPath()
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	d := &compatDoc{path: p, text: string(b), sections: map[string]string{}, table: map[string]map[string]string{}}
	block, err := between(d.text, allowBegin, allowEnd)
	if err != nil {
		return nil, err
	}
	block = strings.TrimSpace(block)
	block = strings.TrimPrefix(block, "```yaml")
	block = strings.TrimSuffix(block, "```")
	if err := yaml.UnmarshalStrict([]byte(block), &d.allow); err != nil {
		return nil, fmt.Errorf("%s: allow-list: %w", p, err)
	}
	// Sections: each heading up to the next one.
	locs := sectionRE.FindAllStringSubmatchIndex(d.text, -1)
	for i, l := range locs {
		end := len(d.text)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		id := d.text[l[2]:l[3]]
		body := d.text[l[1]:end]
		m := reasonRE.FindStringSubmatch(body)
		if m == nil {
			return nil, fmt.Errorf("%s: section %s has no \"**Reason:** ...\" line", p, id)
		}
		d.sections[id] = m[1]
	}
	tbl, err := between(d.text, tableBegin, tableEnd)
	if err != nil {
		return nil, err
	}
	var header []string
	for _, line := range strings.Split(tbl, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") || strings.HasPrefix(line, "|---") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if header == nil {
			header = cells
			continue
		}
		row := map[string]string{}
		for i := 2; i < len(cells) && i < len(header); i++ {
			row[strings.Trim(header[i], "`")] = cells[i]
		}
		d.table[strings.Trim(cells[0], "`")] = row
	}
	return d, nil
}

func between(s, begin, end string) (string, error) {
	i := strings.Index(s, begin)
	j := strings.Index(s, end)
	if i < 0 || j < i {
		return "", fmt.Errorf("docs/compatibility.md: no %s ... %s block", begin, end)
	}
	return s[i+len(begin) : j], nil
}

// races returns the ids whose reason is a community race.
func (d *compatDoc) races() map[string]bool {
	out := map[string]bool{}
	for id, r := range d.sections {
		if r == raceReason {
			out[id] = true
		}
	}
	return out
}

// validate checks the document against itself and the catalogue.
func (d *compatDoc) validate(cat []*scenario) error {
	var errs []error
	names := map[string]bool{}
	for _, sc := range cat {
		names[sc.Name] = true
	}
	pairs := map[string]bool{}
	for _, p := range allPairings[1:] {
		pairs[p.ID()] = true
	}
	for id, reason := range d.sections {
		ok := false
		for _, r := range reasons {
			ok = ok || r == reason
		}
		if !ok {
			errs = append(errs, fmt.Errorf("section %s: reason %q is none of %q", id, reason, reasons))
		}
	}
	for i, a := range d.allow {
		if _, ok := d.sections[a.ID]; !ok {
			errs = append(errs, fmt.Errorf("allow[%d]: id %q has no \"### `%s`\" section", i, a.ID, a.ID))
		}
		switch a.Change {
		case "", changeMissing, changeExtra, changeValue, changeAny:
		default:
			errs = append(errs, fmt.Errorf("allow[%d] %s: change %q is none of missing, extra, changed, any", i, a.ID, a.Change))
		}
		if len(a.Scenarios) == 0 || len(a.Pairings) == 0 || len(a.Paths) == 0 {
			errs = append(errs, fmt.Errorf("allow[%d] %s: scenarios, pairings and paths are required", i, a.ID))
		}
		for _, s := range a.Scenarios {
			if !strings.Contains(s, "*") && !names[s] {
				errs = append(errs, fmt.Errorf("allow[%d] %s: no scenario %q in the catalogue", i, a.ID, s))
			}
		}
		for _, p := range a.Pairings {
			if !strings.Contains(p, "*") && !pairs[p] {
				errs = append(errs, fmt.Errorf("allow[%d] %s: no pairing %q (one of %v)", i, a.ID, p, keys(pairs)))
			}
		}
	}
	for _, sc := range cat {
		row, ok := d.table[sc.Name]
		if !ok {
			errs = append(errs, fmt.Errorf("table: no row for scenario %s", sc.Name))
			continue
		}
		for p := range pairs {
			cell, ok := row[p]
			if !ok {
				errs = append(errs, fmt.Errorf("table: row %s has no column %s", sc.Name, p))
				continue
			}
			for _, id := range cellIDs(cell) {
				if d.races()[id] {
					errs = append(errs, fmt.Errorf("table: %s x %s names %q, a race: races are not shown in the table", sc.Name, p, id))
				}
				if _, ok := d.sections[id]; !ok {
					errs = append(errs, fmt.Errorf("table: %s x %s names %q, which has no section", sc.Name, p, id))
				} else if !d.allows(sc.Name, p, id) {
					errs = append(errs, fmt.Errorf("table: %s x %s names %q, but no allow-list entry of it covers that scenario and pairing", sc.Name, p, id))
				}
			}
		}
	}
	for name := range d.table {
		if !names[name] {
			errs = append(errs, fmt.Errorf("table: row %s is no scenario of the catalogue", name))
		}
	}
	return errors.Join(errs...)
}

// allows reports whether some entry with id covers scenario x pairing.
func (d *compatDoc) allows(scenario, pairing, id string) bool {
	for _, a := range d.allow {
		if a.ID == id && anyGlob(a.Scenarios, scenario) && anyGlob(a.Pairings, pairing) {
			return true
		}
	}
	return false
}

var cellLink = regexp.MustCompile("\\[`([a-z0-9-]+)`\\]")

// cellIDs returns the documented differences a table cell names.
func cellIDs(cell string) []string {
	var out []string
	for _, m := range cellLink.FindAllStringSubmatch(cell, -1) {
		out = append(out, m[1])
	}
	return out
}

// accept marks each difference with the documented difference that covers
// it, if any.
func (d *compatDoc) accept(scenario, pairing string, diffs []difference) {
	for i := range diffs {
		for _, a := range d.allow {
			change := a.Change
			if change == "" {
				change = changeAny
			}
			if (change == changeAny || change == diffs[i].Change) && anyGlob(a.Scenarios, scenario) &&
				anyGlob(a.Pairings, pairing) && anyGlob(a.Paths, diffs[i].Path) {
				diffs[i].Allowed = a.ID
				break
			}
		}
	}
}

func anyGlob(globs []string, s string) bool {
	for _, g := range globs {
		if globMatch(g, s) {
			return true
		}
	}
	return false
}

var globCache = map[string]*regexp.Regexp{}

// globMatch matches s against a pattern where * is any run of characters
// (including / . [ ]) and everything else is literal.
func globMatch(glob, s string) bool {
	re, ok := globCache[glob]
	if !ok {
		parts := strings.Split(glob, "*")
		for i := range parts {
			parts[i] = regexp.QuoteMeta(parts[i])
		}
		re = regexp.MustCompile("^" + strings.Join(parts, ".*") + "$")
		globCache[glob] = re
	}
	return re.MatchString(s)
}

func keys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// raceReason marks differences that come and go with timing: they are
// not shown in the table, which must be the same from run to run.
const raceReason = "community race"

// cell renders a table cell for a pairing's differences; differences of
// ids in skip (the races) are not shown.
func cell(res *result, diffs []difference, skip map[string]bool) string {
	if res == nil || res.err != nil {
		return "**run failed**"
	}
	if len(res.leaks) > 0 || len(res.stuck) > 0 {
		return "**leak or stuck**"
	}
	ids := map[string]bool{}
	for _, d := range diffs {
		if d.Allowed == "" {
			return "**differs**"
		}
		if !skip[d.Allowed] {
			ids[d.Allowed] = true
		}
	}
	if len(ids) == 0 {
		return "same"
	}
	var parts []string
	for _, id := range keys(ids) {
		parts = append(parts, "[`"+id+"`](#"+id+")")
	}
	return strings.Join(parts, ", ")
}

// renderTable renders the table block for the catalogue; rows not in
// cells keep the document's current cells.
func (d *compatDoc) renderTable(cat []*scenario, cells map[string]map[string]string) string {
	var b strings.Builder
	b.WriteString("\n| scenario | what it does |")
	for _, p := range allPairings[1:] {
		b.WriteString(" `" + p.ID() + "` |")
	}
	b.WriteString("\n|---|---|")
	for range allPairings[1:] {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, sc := range cat {
		title := sc.Title
		if sc.Short {
			title += " *(short)*"
		}
		b.WriteString("| `" + sc.Name + "` | " + title + " |")
		for _, p := range allPairings[1:] {
			c := cells[sc.Name][p.ID()]
			if c == "" {
				c = d.table[sc.Name][p.ID()]
			}
			if c == "" {
				c = "not run"
			}
			b.WriteString(" " + c + " |")
		}
		b.WriteString("\n")
	}
	return b.String()
}

// withTable returns the document text with the table block replaced.
func (d *compatDoc) withTable(table string) string {
	i := strings.Index(d.text, tableBegin) + len(tableBegin)
	j := strings.Index(d.text, tableEnd)
	return d.text[:i] + table + d.text[j:]
}
