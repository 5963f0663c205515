package main

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
)

// scaleSection is one table per system, one row per N, with how each
// figure grows per 10× N.
func (r *report) scaleSection(b *strings.Builder) {
	p := printTo(b)
	if len(r.scale) == 0 {
		return
	}
	p("## Scale: the scenario at N = %s", r.opts.scale)
	p("")
	p("Each run on its own fresh control plane with the mock driver at zero latency and its own write ceilings, so")
	p("its own floor (÷ floor: CRD-priced, as in the scenario above); %s.", runsPerN(r.opts.scaleRepeats))
	p("Up to N = %d", r.opts.scaleDynamicMax)
	p("(`-scale-dynamic-max`) the N snapshots are created through the system, as")
	p("in the scenario above; above it they are seeded directly as ready objects (see the cold start below for their")
	p("shape) and the system starts over them (\"start to idle\" takes the place of the create phase) before the same")
	p("delete phase. \"growth\" is the factor by which the figure grows per 10× N from the row above (×10: linear; a")
	p("per-snapshot figure that holds stays ×1); figures of the create phase compare only rows of the same path.")
	p("Rows marked \"main\" are the main scenario's median run.")
	p("")
	for _, id := range scaleIDs(r.scale) {
		var rows []*scenarioResult
		for _, s := range r.scale {
			if s.System.ID == id {
				rows = append(rows, s)
			}
		}
		p("### %s", rows[0].System.Label)
		p("")
		p("| N | path | time to all-ready or start to idle | growth | ÷ floor | API writes/snapshot, create | events/snapshot | time to all-deleted | growth | ÷ floor | API writes/snapshot, delete | controller CPU, create or start + delete | growth | peak RSS | growth | kube-apiserver + etcd peak RSS |")
		p("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
		for i, s := range rows {
			if s.Err != nil {
				p("| %d | %s | FAILED: %s | | | | | | | | | | | | | |", s.N, pathOf(s.Seeded), oneLine(s.Err.Error()))
				continue
			}
			var prev *scenarioResult
			if i > 0 && rows[i-1].Err == nil {
				prev = rows[i-1]
			}
			same := prev != nil && prev.Seeded == s.Seeded
			path := "created"
			if s.Seeded {
				path = "seeded"
			}
			if r.isMain(s) {
				path += " (main)"
			}
			create := func(x *scenarioResult) float64 { return x.createTime().Seconds() }
			cpu := func(x *scenarioResult) float64 { return x.controllerCPU().Seconds() }
			del := func(x *scenarioResult) float64 { return x.Delete.Duration.Seconds() }
			rss := func(x *scenarioResult) float64 { return float64(x.PeakRSSkB) }
			p("| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.2f s | %s | %s | %s | %s |", s.N, path,
				secs(s.createTime()), growth(prev, s, create, same), floorRatio(s, s.Create, !s.Seeded), per(s.Create.Writes.Total(isNotEvent), s.N),
				per(eventsCreated(s.Create)+eventsCreated(s.Delete), s.N),
				secs(s.Delete.Duration), growth(prev, s, del, prev != nil), floorRatio(s, s.Delete, true), per(s.Delete.Writes.Total(isNotEvent), s.N),
				s.controllerCPU().Seconds(), growth(prev, s, cpu, same), mib(s.PeakRSSkB), growth(prev, s, rss, prev != nil), mib(s.PlanePeakkB))
		}
		p("")
	}
	r.scaleRepeatTable(b)
	r.scaleComparison(b)
	r.scalePerOp(b)
}

// runsPerN says how often each system ran at each N, and which run the
// tables show.
func runsPerN(repeats int) string {
	if repeats <= 1 {
		return "one run per N and system"
	}
	return fmt.Sprintf("%d runs per N and system, interleaved (every N of every system, then again); the tables show the median run by time to all-ready", repeats)
}

// scaleRepeatTable gives, when a system ran more than once at some N, each
// phase's median, min and max over the runs that succeeded and the growth
// per 10× N of the medians: a phase's own median, which need not be the
// run the other tables show.
func (r *report) scaleRepeatTable(b *strings.Builder) {
	p := printTo(b)
	groups := scaleGroups(r.scaleAll)
	if !slices.ContainsFunc(groups, func(g scaleGroup) bool { return len(g.runs) > 1 }) {
		return
	}
	p("### Over the repeats: median (min–max) of each phase, and the growth of the medians")
	p("")
	p("| system | N | runs ok | time to all-ready or start to idle | growth | time to all-deleted | growth | each run, all-ready / all-deleted |")
	p("|---|---|---|---|---|---|---|---|")
	for i, g := range groups {
		var prev *scaleGroup
		if i > 0 && groups[i-1].id == g.id {
			prev = &groups[i-1]
		}
		create, del := g.spread(createSecs), g.spread(deleteSecs)
		var each []string
		for _, s := range g.runs {
			if s.Err != nil {
				each = append(each, fmt.Sprintf("run %d failed", s.Run))
				continue
			}
			each = append(each, fmt.Sprintf("%.1f / %.1f", createSecs(s), deleteSecs(s)))
		}
		p("| %s | %d | %d of %d | %s | %s | %s | %s | %s |", g.runs[0].System.Label, g.n, len(g.ok()), len(g.runs),
			spreadSecs(create), g.growth(prev, createSecs, prev != nil && prev.seeded() == g.seeded()),
			spreadSecs(del), g.growth(prev, deleteSecs, prev != nil), strings.Join(each, " · "))
	}
	p("")
}

func createSecs(s *scenarioResult) float64 { return s.createTime().Seconds() }
func deleteSecs(s *scenarioResult) float64 { return s.Delete.Duration.Seconds() }

func spreadSecs(s spread) string {
	if s.med == 0 {
		return "-"
	}
	return s.secs()
}

// scaleGroup is every run of one system at one N.
type scaleGroup struct {
	id   string
	n    int
	runs []*scenarioResult
}

// scaleGroups groups runs by system (in the order of their first runs),
// then by N ascending.
func scaleGroups(all []*scenarioResult) []scaleGroup {
	var out []scaleGroup
	for _, id := range scaleIDs(all) {
		byN := map[int][]*scenarioResult{}
		for _, s := range all {
			if s.System.ID == id {
				byN[s.N] = append(byN[s.N], s)
			}
		}
		for _, n := range slices.Sorted(maps.Keys(byN)) {
			out = append(out, scaleGroup{id: id, n: n, runs: byN[n]})
		}
	}
	return out
}

func (g scaleGroup) ok() []*scenarioResult {
	return slices.DeleteFunc(slices.Clone(g.runs), func(s *scenarioResult) bool { return s.Err != nil })
}

// seeded reports whether the group's snapshots were seeded ready.
func (g scaleGroup) seeded() bool { return g.runs[0].Seeded }

func (g scaleGroup) spread(f func(*scenarioResult) float64) spread {
	return spreadOf(g.ok(), f)
}

// growth is the growth per 10× N of f's median from prev to g ("-" without
// a comparable group above or without a run that succeeded).
func (g scaleGroup) growth(prev *scaleGroup, f func(*scenarioResult) float64, comparable bool) string {
	if v, ok := g.growthOf(prev, f, comparable); ok {
		return fmt.Sprintf("×%.1f", v)
	}
	return "-"
}

func (g scaleGroup) growthOf(prev *scaleGroup, f func(*scenarioResult) float64, comparable bool) (float64, bool) {
	if prev == nil || !comparable || len(g.ok()) == 0 || len(prev.ok()) == 0 {
		return 0, false
	}
	return perTenfold(prev.n, g.n, prev.spread(f).med, g.spread(f).med)
}

// scaleComparison sets each other system's times beside ours at every N
// both ran (created through the system only).
func (r *report) scaleComparison(b *strings.Builder) {
	p := printTo(b)
	at := map[string]map[int]*scenarioResult{}
	for _, s := range r.scale {
		if s.Err != nil || s.Seeded {
			continue
		}
		if at[s.System.ID] == nil {
			at[s.System.ID] = map[int]*scenarioResult{}
		}
		at[s.System.ID][s.N] = s
	}
	ours := at[sysOurs]
	if ours == nil {
		return
	}
	var lines []string
	for _, id := range scaleIDs(r.scale) {
		if id == sysOurs {
			continue
		}
		for _, n := range sortedNs(at[id]) {
			o, c := ours[n], at[id][n]
			if o == nil {
				continue
			}
			lines = append(lines, fmt.Sprintf("| %s | %d | %s / %s: **%.1f×** | %s / %s: **%.1f×** |", c.System.Label, n,
				secs(c.Create.Duration), secs(o.Create.Duration), ratio(c.Create.Duration, o.Create.Duration),
				secs(c.Delete.Duration), secs(o.Delete.Duration), ratio(c.Delete.Duration, o.Delete.Duration)))
		}
	}
	if len(lines) == 0 {
		return
	}
	p("### Side by side: the other system's time ÷ ours at each N")
	p("")
	p("| system | N | time to all-ready, theirs / ours | time to all-deleted, theirs / ours |")
	p("|---|---|---|---|")
	for _, l := range lines {
		p("%s", l)
	}
	p("")
}

func sortedNs(m map[int]*scenarioResult) []int {
	return slices.Sorted(maps.Keys(m))
}

// floorRatio is a phase's time over its CRD-priced floor ("-" without
// ceilings, or for a phase that did not run).
func floorRatio(s *scenarioResult, ph phase, ran bool) string {
	f := floor(ph, s.Ceiling, true)
	if !ran || f <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f×", ratio(ph.Duration, f))
}

// createTime is the time to all-ready, or for a seeded run the time from
// the start of the controllers until they were idle.
func (s *scenarioResult) createTime() time.Duration {
	if s.Seeded {
		return s.Start.Idle
	}
	return s.Create.Duration
}

// controllerCPU is the controllers' CPU in the create phase (seeded: their
// start) and the delete phase.
func (s *scenarioResult) controllerCPU() time.Duration {
	if s.Seeded {
		return s.Start.CPU + s.Delete.CPU
	}
	return s.Create.CPU + s.Delete.CPU
}

// growth is f's factor per 10× N from prev to s ("-" without a comparable
// row above).
func growth(prev, s *scenarioResult, f func(*scenarioResult) float64, comparable bool) string {
	g, ok := growthOf(prev, s, f, comparable)
	if !ok {
		return "-"
	}
	return fmt.Sprintf("×%.1f", g)
}

func growthOf(prev, s *scenarioResult, f func(*scenarioResult) float64, comparable bool) (float64, bool) {
	if !comparable || prev == nil {
		return 0, false
	}
	return perTenfold(prev.N, s.N, f(prev), f(s))
}

// perTenfold is the factor by which a figure grows per 10× N, from v0 at
// n0 to v1 at n1.
func perTenfold(n0, n1 int, v0, v1 float64) (float64, bool) {
	if n0 >= n1 || v0 <= 0 || v1 <= 0 {
		return 0, false
	}
	return math.Pow(v1/v0, 1/math.Log10(float64(n1)/float64(n0))), true
}

func (r *report) isMain(s *scenarioResult) bool {
	for _, m := range r.scenarios {
		if m == s {
			return true
		}
	}
	return false
}

func scaleIDs(rs []*scenarioResult) []string {
	var ids []string
	seen := map[string]bool{}
	for _, s := range rs {
		if !seen[s.System.ID] {
			seen[s.System.ID] = true
			ids = append(ids, s.System.ID)
		}
	}
	return ids
}
