// Package conformance is a differential conformance suite: one catalogue of
// scenarios, each run on a real control plane with the mock CSI driver
// against four pairings of binder and CSI side (ours/ours,
// community/community, ours + community csi-snapshotter, community
// snapshot-controller + ours), all with volume group snapshots on. Every run
// records a normalized outcome (objects, group objects, events, CSI calls,
// the driver's snapshots and group snapshots step by step); each
// pairing's outcome is diffed against community/community, and a
// difference fails unless docs/compatibility.md documents it. Leaks and
// stuck objects fail in every pairing.
//
//	go test ./test/conformance                          # the short catalogue
//	SNAPKEEPER_CONFORMANCE=full go test ./test/conformance  # all (make conformance)
//
// Other knobs: SNAPKEEPER_CONFORMANCE_SCENARIOS (regexp of scenario names),
// SNAPKEEPER_CONFORMANCE_PAIRINGS (comma-separated pairing ids, e.g.
// "community-community,ours-ours"; without community-community nothing is
// compared, only leaks and stuck objects are checked), SNAPKEEPER_CONFORMANCE_PARALLEL (scenarios at
// once per pairing, default 8), SNAPKEEPER_CONFORMANCE_PAIRINGS_AT_ONCE
// (control planes at once, default 4), SNAPKEEPER_CONFORMANCE_UPDATE_DOC=1
// (rewrite the table of docs/compatibility.md from this run),
// SNAPKEEPER_CONFORMANCE_REPORT (write the markdown report there; it is
// always written next to the logs), SNAPKEEPER_CONFORMANCE_OURS (a prebuilt
// controller binary to test as "ours" instead of building ./cmd/controller).
package conformance

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

const (
	envMode      = "SNAPKEEPER_CONFORMANCE"
	envScenarios = "SNAPKEEPER_CONFORMANCE_SCENARIOS"
	envPairings  = "SNAPKEEPER_CONFORMANCE_PAIRINGS"
	envParallel  = "SNAPKEEPER_CONFORMANCE_PARALLEL"
	envAtOnce    = "SNAPKEEPER_CONFORMANCE_PAIRINGS_AT_ONCE"
	envUpdateDoc = "SNAPKEEPER_CONFORMANCE_UPDATE_DOC"
	envReport    = "SNAPKEEPER_CONFORMANCE_REPORT"
)

func full() bool { return os.Getenv(envMode) == "full" }

// selected returns the scenarios of this run.
func selected(t *testing.T) []*scenario {
	var re *regexp.Regexp
	if s := os.Getenv(envScenarios); s != "" {
		var err error
		if re, err = regexp.Compile(s); err != nil {
			t.Fatalf("%s: %v", envScenarios, err)
		}
	}
	var out []*scenario
	for _, sc := range catalogue() {
		if re != nil {
			if !re.MatchString(sc.Name) {
				continue
			}
		} else if !full() && !sc.Short {
			continue
		}
		out = append(out, sc)
	}
	return out
}

func selectedPairings(t *testing.T) []pairing {
	s := os.Getenv(envPairings)
	if s == "" {
		return allPairings
	}
	var out []pairing
	for _, p := range allPairings {
		if strings.Contains(","+strings.ReplaceAll(s, " ", "")+",", ","+p.ID()+",") {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s=%q names none of the pairings", envPairings, s)
	}
	return out
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func TestConformance(t *testing.T) {
	doc, err := loadDoc()
	if err != nil {
		t.Fatal(err)
	}
	scenarios := selected(t)
	if len(scenarios) == 0 {
		t.Skip("no scenario selected")
	}
	pairings := selectedPairings(t)
	tools := []string{"kube-apiserver", "etcd", "mock-csi-driver"}
	for _, p := range pairings {
		if p.Binder == community || p.CSI == community {
			tools = append(tools, "snapshot-controller", "csi-snapshotter")
			break
		}
	}
	for _, tool := range tools {
		if _, err := framework.Tool(tool); err != nil {
			t.Fatalf("%v (make tools bin/snapshot-controller bin/csi-snapshotter)", err)
		}
	}
	if _, err := oursBinary(); err != nil {
		t.Fatal(err)
	}
	root, err := os.MkdirTemp("", "snapkeeper-conformance-")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	results := runAll(t, root, pairings, scenarios)
	t.Logf("%d scenarios x %d pairings in %v (logs in %s)", len(scenarios), len(pairings), time.Since(start).Round(time.Second), root)

	cells := map[string]map[string]string{}
	var report strings.Builder
	fmt.Fprintf(&report, "# Conformance report\n\n%d scenarios x %d pairings, %v, logs in `%s`.\n\n",
		len(scenarios), len(pairings), time.Since(start).Round(time.Second), root)
	used := map[string]bool{}
	for _, sc := range scenarios {
		sc := sc
		cells[sc.Name] = map[string]string{}
		t.Run(sc.Name, func(t *testing.T) {
			fmt.Fprintf(&report, "## %s\n\n%s\n\n", sc.Name, sc.Title)
			ref := results[sc.Name][reference.ID()]
			for _, p := range pairings {
				res := results[sc.Name][p.ID()]
				ran := checkRun(t, p, res, &report)
				switch {
				case p == reference:
					continue
				case !ran:
					cells[sc.Name][p.ID()] = cell(res, nil, nil)
					continue
				case ref == nil || ref.err != nil:
					cells[sc.Name][p.ID()] = "not compared"
					continue
				}
				diffs := diff(ref.out, res.out)
				doc.accept(sc.Name, p.ID(), diffs)
				cells[sc.Name][p.ID()] = cell(res, diffs, doc.races())
				var bad, ok []string
				for _, d := range diffs {
					if d.Allowed == "" {
						bad = append(bad, d.String())
					} else {
						used[d.Allowed] = true
						ok = append(ok, d.String()+"   ["+d.Allowed+"]")
					}
				}
				fmt.Fprintf(&report, "### %s: %s (%v)\n\n", p.Label(), cells[sc.Name][p.ID()], res.duration.Round(time.Second))
				if len(bad) > 0 {
					report.WriteString("Undocumented differences:\n\n```diff\n" + strings.Join(bad, "\n") + "\n```\n\n")
					t.Errorf("%s differs from community/community (%d undocumented differences; logs %s):\n%s",
						p.Label(), len(bad), res.dir, strings.Join(bad, "\n"))
				}
				if len(ok) > 0 {
					report.WriteString("Documented differences:\n\n```diff\n" + strings.Join(ok, "\n") + "\n```\n\n")
				}
			}
		})
	}
	reportPath := filepath.Join(root, "report.md")
	_ = os.WriteFile(reportPath, []byte(report.String()), 0o644)
	if p := os.Getenv(envReport); p != "" {
		if err := os.WriteFile(p, []byte(report.String()), 0o644); err != nil {
			t.Error(err)
		}
		reportPath = p
	}
	t.Logf("report: %s", reportPath)

	all := catalogue()
	table := doc.renderTable(all, cells)
	if os.Getenv(envUpdateDoc) == "1" {
		if err := os.WriteFile(doc.path, []byte(doc.withTable(table)), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote the table of %s", doc.path)
	} else if full() && os.Getenv(envScenarios) == "" && len(pairings) == len(allPairings) {
		// The full run proves the table: it must say what this run saw.
		if want := doc.withTable(table); want != doc.text {
			t.Errorf("the table of %s does not match this run; rerun with %s=1 to rewrite it, or fix the code. This run's table:\n%s",
				doc.path, envUpdateDoc, table)
		}
		for _, a := range doc.allow {
			if !used[a.ID] {
				t.Logf("note: documented difference %s matched nothing in this run", a.ID)
			}
		}
	}
	if !t.Failed() && os.Getenv("SNAPKEEPER_KEEP_TMP") == "" {
		os.RemoveAll(root)
	}
}

// checkRun reports a failed run, leaks and stuck objects; it returns
// whether the run can be compared.
func checkRun(t *testing.T, p pairing, res *result, report *strings.Builder) bool {
	t.Helper()
	if res == nil {
		t.Errorf("%s: did not run", p.Label())
		return false
	}
	if res.err != nil {
		t.Errorf("%s: run failed (logs %s): %v", p.Label(), res.dir, res.err)
		fmt.Fprintf(report, "### %s: run failed\n\n```\n%v\n```\n\n", p.Label(), res.err)
		return false
	}
	for _, l := range res.leaks {
		t.Errorf("%s: LEAK: %s (logs %s)", p.Label(), l, res.dir)
		fmt.Fprintf(report, "- %s: LEAK: %s\n", p.Label(), l)
	}
	for _, s := range res.stuck {
		t.Errorf("%s: STUCK: %s (logs %s)", p.Label(), s, res.dir)
		fmt.Fprintf(report, "- %s: STUCK: %s\n", p.Label(), s)
	}
	fmt.Fprintf(report, "<details><summary>%s outcome (%v)</summary>\n\n```\n%s```\n\n</details>\n\n", p.Label(), res.duration.Round(time.Second), render(res.out))
	return true
}

func render(o outcome) string {
	ks := keys(o)
	sortPaths(ks)
	var b strings.Builder
	for _, k := range ks {
		b.WriteString(k + " = " + o[k] + "\n")
	}
	return b.String()
}

func sortPaths(ps []string) {
	for i := 1; i < len(ps); i++ {
		for j := i; j > 0 && pathLess(ps[j], ps[j-1]); j-- {
			ps[j], ps[j-1] = ps[j-1], ps[j]
		}
	}
}

// runAll runs every scenario against every pairing and returns results by
// scenario name and pairing id.
func runAll(t *testing.T, root string, pairings []pairing, scenarios []*scenario) map[string]map[string]*result {
	results := map[string]map[string]*result{}
	for _, sc := range scenarios {
		results[sc.Name] = map[string]*result{}
	}
	var mu sync.Mutex
	inParallel(pairings, envInt(envAtOnce, 4), func(p pairing) {
		start := time.Now()
		got := runPairing(filepath.Join(root, p.ID()), p, scenarios)
		t.Logf("pairing %s: %v", p.Label(), time.Since(start).Round(time.Second))
		mu.Lock()
		defer mu.Unlock()
		for name, r := range got {
			results[name][p.ID()] = r
		}
	})
	return results
}

// inParallel calls fn for each of xs, at most n at once, and returns when
// every call has.
func inParallel[T any](xs []T, n int, fn func(T)) {
	sem := make(chan struct{}, n)
	var wg sync.WaitGroup
	for _, x := range xs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			fn(x)
		})
	}
	wg.Wait()
}

// runPairing starts a control plane for p and runs the scenarios on it,
// grouped by binder flags (one binder per group), each group's scenarios
// concurrently.
func runPairing(dir string, p pairing, scenarios []*scenario) map[string]*result {
	out := map[string]*result{}
	failAll := func(err error) map[string]*result {
		for _, sc := range scenarios {
			if out[sc.Name] == nil {
				out[sc.Name] = &result{err: err, dir: dir}
			}
		}
		return out
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return failAll(err)
	}
	ctx := context.Background()
	cp, err := framework.StartControlPlane(ctx, dir)
	if err != nil {
		return failAll(err)
	}
	defer cp.Stop()
	env, err := framework.NewEnv(cp)
	if err != nil {
		return failAll(err)
	}
	if err := framework.InstallCRDs(ctx, env.Dynamic, framework.CRDDir()); err != nil {
		return failAll(err)
	}
	w, err := newWorld(env, p)
	if err != nil {
		return failAll(err)
	}
	defer w.stop()

	var groups [][]*scenario
	index := map[string]int{}
	for _, sc := range scenarios {
		key := strings.Join(sc.BinderArgs, " ")
		i, ok := index[key]
		if !ok {
			i = len(groups)
			index[key] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], sc)
	}
	var mu sync.Mutex
	for gi, g := range groups {
		bdir := filepath.Join(dir, fmt.Sprintf("binder-%d", gi))
		if err := os.MkdirAll(bdir, 0o755); err != nil {
			return failAll(err)
		}
		binder, err := startBinder(env, bdir, p.Binder, g[0].BinderArgs)
		if err != nil {
			for _, sc := range g {
				out[sc.Name] = &result{err: fmt.Errorf("binder: %w", err), dir: dir}
			}
			continue
		}
		inParallel(g, envInt(envParallel, 8), func(sc *scenario) {
			sdir := filepath.Join(dir, sc.Name)
			res := &result{dir: sdir}
			if err := os.MkdirAll(sdir, 0o755); err != nil {
				res.err = err
			} else {
				res = runScenario(ctx, w, sc, sdir)
			}
			mu.Lock()
			out[sc.Name] = res
			mu.Unlock()
		})
		if binder.p.Exited() {
			for _, sc := range g {
				if out[sc.Name].err == nil {
					out[sc.Name].err = fmt.Errorf("binder exited during the run:\n%s", binder.p.Tail(2000))
				}
			}
		}
		binder.stop()
	}
	return out
}

// TestCompatibilityDoc checks docs/compatibility.md against itself and the
// catalogue: sections with a reason, allow-list entries that name existing
// sections, scenarios and pairings, and a table row per scenario whose
// cells name only differences the allow-list grants there.
func TestCompatibilityDoc(t *testing.T) {
	doc, err := loadDoc()
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.validate(catalogue()); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, sc := range catalogue() {
		if seen[sc.Name] {
			t.Errorf("scenario %s twice in the catalogue", sc.Name)
		}
		seen[sc.Name] = true
		if len(sc.Name) > 30 || !regexp.MustCompile(`^[a-z0-9-]+$`).MatchString(sc.Name) {
			t.Errorf("scenario name %q must be a short DNS label (it is the namespace)", sc.Name)
		}
	}
}
