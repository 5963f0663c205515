package main

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

func (r *report) treeWarning(b *strings.Builder) {
	if r.tree.dirty == "" {
		return
	}
	fmt.Fprintf(b, "> **DIRTY TREE: these figures are not of commit `%s` alone** (%s; run with `-allow-dirty`).\n\n", r.tree.commit, r.tree.dirty)
}

// setupRows are the machine table's rows about what was measured.
func (r *report) setupRows(b *strings.Builder) {
	p := printTo(b)
	tree := "`" + r.tree.commit + "`, clean"
	if r.tree.dirty != "" {
		tree = "`" + r.tree.commit + "` **plus uncommitted changes** (" + r.tree.dirty + ")"
	}
	p("| commit | %s |", tree)
	end := r.loadEnd
	if end == "" {
		end = "(running)"
	}
	p("| load average (1, 5, 15 min) at start / end | %s / %s |", r.loadStart, end)
	fsync := "etcd syncs every write to disk (no `--unsafe-no-fsync`)"
	if r.opts.unsafeNoFsync {
		fsync = "**etcd with `--unsafe-no-fsync` (`-unsafe-no-fsync`): writes are not synced, faster than any cluster**"
	}
	p("| control plane | %s; kube-apiserver with its default API Priority and Fairness configuration and default inflight limits (400 / 200) |", fsync)
	p("| identities | %s |", identityNote())
	if r.opts.systems != "" {
		p("| repeats | each system %d times, interleaved in the order %s |", max(r.opts.repeats, 1), r.opts.systems)
	} else {
		p("| repeats | the main scenario did not run (`-systems=`); the stages below say how often each system ran |")
	}
}

func (r *report) driverNote() string {
	var parts []string
	if r.opts.csiLatency {
		parts = append(parts, "latency: CreateSnapshot 200 ms, ListSnapshots 50 ms (`-csi-latency`)")
	}
	if r.opts.csiReadyAfter != "" {
		parts = append(parts, "each snapshot readyToUse=false until "+r.opts.csiReadyAfter+" after the driver's first answer about it (`-csi-ready-after`)")
	}
	if len(parts) == 0 {
		return "zero latency, ready at once"
	}
	return strings.Join(parts, "; ")
}

// runsOf returns the successful runs of each system, in the order the
// systems first ran, each system's runs sorted by time to all-ready.
func (r *report) runsOf() (ids []string, ok map[string][]*scenarioResult, all map[string]int) {
	ids, _ = bySystem(r.scenarios, func(*scenarioResult) bool { return true })
	all = map[string]int{}
	for _, s := range r.scenarios {
		all[s.System.ID]++
	}
	_, ok = bySystem(r.scenarios, func(s *scenarioResult) bool { return s.Err == nil })
	for _, runs := range ok {
		sort.SliceStable(runs, func(i, j int) bool { return runs[i].Create.Duration < runs[j].Create.Duration })
	}
	return ids, ok, all
}

// bySystem groups the runs keep accepts by system, the systems in the
// order of their first run among all of src.
func bySystem(src []*scenarioResult, keep func(*scenarioResult) bool) (ids []string, runs map[string][]*scenarioResult) {
	runs = map[string][]*scenarioResult{}
	seen := map[string]bool{}
	for _, s := range src {
		if !seen[s.System.ID] {
			seen[s.System.ID] = true
			ids = append(ids, s.System.ID)
		}
		if keep(s) {
			runs[s.System.ID] = append(runs[s.System.ID], s)
		}
	}
	return ids, runs
}

// medianRuns is one run per system: its median by time to all-ready (the
// lower one of the two middle runs when their number is even).
func (r *report) medianRuns() []*scenarioResult {
	ids, ok, _ := r.runsOf()
	var out []*scenarioResult
	for _, id := range ids {
		if runs := ok[id]; len(runs) > 0 {
			out = append(out, runs[(len(runs)-1)/2])
		}
	}
	return out
}

// spread is the median, min and max of a figure over runs.
type spread struct{ med, min, max float64 }

func spreadOf(runs []*scenarioResult, f func(*scenarioResult) float64) spread {
	if len(runs) == 0 {
		return spread{}
	}
	v := make([]float64, len(runs))
	for i, s := range runs {
		v[i] = f(s)
	}
	slices.Sort(v)
	m := v[len(v)/2]
	if len(v)%2 == 0 {
		m = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return spread{m, v[0], v[len(v)-1]}
}

func (s spread) secs() string {
	return fmt.Sprintf("%.2f s (%.2f–%.2f)", s.med, s.min, s.max)
}

// readySecs and deletedSecs are the phase times at -n (extrapolated for
// a smaller -community-default-n).
func (r *report) readySecs(s *scenarioResult) float64 {
	return extrapolated(s.Create.Duration, s.N, r.opts.n).Seconds()
}

func (r *report) deletedSecs(s *scenarioResult) float64 {
	return extrapolated(s.Delete.Duration, s.N, r.opts.n).Seconds()
}

func (r *report) repeatSection(b *strings.Builder) {
	p := printTo(b)
	ids, ok, all := r.runsOf()
	if len(ids) == 0 {
		return
	}
	p("## Summary over the repeats: median (min–max), N = %d", r.opts.n)
	p("")
	p("| system | runs ok | time to all-ready | ÷ ours (medians) | time to all-deleted | ÷ ours (medians) | API writes/snapshot, create | 429s per run, create + delete | client-side throttling, median run |")
	p("|---|---|---|---|---|---|---|---|---|")
	ours := ok[sysOurs]
	oursReady, oursDeleted := spreadOf(ours, r.readySecs), spreadOf(ours, r.deletedSecs)
	div := func(a, b spread) string {
		if len(ours) == 0 || b.med <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f×", a.med/b.med)
	}
	for _, id := range ids {
		runs := ok[id]
		label := labelOf(r, id)
		if len(runs) == 0 {
			p("| %s | 0 of %d | FAILED | | | | | | |", label, all[id])
			continue
		}
		ready, deleted := spreadOf(runs, r.readySecs), spreadOf(runs, r.deletedSecs)
		writes := spreadOf(runs, func(s *scenarioResult) float64 { return s.Create.Writes.Total(isNotEvent) / float64(s.N) })
		rej := spreadOf(runs, func(s *scenarioResult) float64 { return s.Create.Pressure.Code429 + s.Delete.Pressure.Code429 })
		med := runs[(len(runs)-1)/2]
		note := ""
		if runs[0].N != r.opts.n {
			note = fmt.Sprintf(" (measured at N=%d, extrapolated)", runs[0].N)
		}
		p("| %s | %d of %d | %s%s | %s | %s | %s | %.2f (%.2f–%.2f) | %.0f (%.0f–%.0f) | %s |", label, len(runs), all[id],
			ready.secs(), note, div(ready, oursReady), deleted.secs(), div(deleted, oursDeleted),
			writes.med, writes.min, writes.max, rej.med, rej.min, rej.max, med.Create.Pressure.add(med.Delete.Pressure).throttle())
	}
	p("")
}

func labelOf(r *report, id string) string {
	for _, s := range r.scenarios {
		if s.System.ID == id {
			return s.System.Label
		}
	}
	return id
}

// contractWrites is the cost model's create with a driver that answers
// ready at once: 9 writes per snapshot, of which the early status write
// is skipped when the CSI side's answer is in the binder's cache first.
const contractWrites = 9

// scenarioAnalysis is the analysis of the main scenario, from the figures
// of this run alone.
func (r *report) scenarioAnalysis(b *strings.Builder) {
	p := printTo(b)
	ids, ok, all := r.runsOf()
	if len(ids) == 0 {
		p("- The main scenario did not run.")
		return
	}
	if r.tree.dirty != "" {
		p("- These figures come from a tree with uncommitted changes (%s) on top of `%s`.", r.tree.dirty, short(r.tree.commit))
	}
	if r.opts.unsafeNoFsync {
		p("- etcd did not sync its writes (`-unsafe-no-fsync`): every time below is shorter than a cluster's would be.")
	}
	type entry struct {
		id             string
		ready, deleted spread
	}
	var es []entry
	for _, id := range ids {
		if n := len(ok[id]); n < all[id] {
			p("- %s: %d of %d runs failed; its figures are of the %d that passed.", labelOf(r, id), all[id]-n, all[id], n)
		}
		if len(ok[id]) > 0 {
			es = append(es, entry{id, spreadOf(ok[id], r.readySecs), spreadOf(ok[id], r.deletedSecs)})
		}
	}
	if len(es) == 0 {
		p("- Every run of the main scenario failed.")
		return
	}
	fastest, fastestDel := es[0], es[0]
	for _, e := range es {
		if e.ready.med < fastest.ready.med {
			fastest = e
		}
		if e.deleted.med < fastestDel.deleted.med {
			fastestDel = e
		}
	}
	p("- Fastest to all-ready (median of %d runs): %s, %.2f s for %d snapshots; fastest to all-deleted: %s, %.2f s.",
		len(ok[fastest.id]), labelOf(r, fastest.id), fastest.ready.med, r.opts.n, labelOf(r, fastestDel.id), fastestDel.deleted.med)
	var oursE *entry
	for i := range es {
		if es[i].id == sysOurs {
			oursE = &es[i]
		}
	}
	if oursE != nil {
		for _, e := range es {
			if e.id == sysOurs || oursE.ready.med <= 0 || oursE.deleted.med <= 0 {
				continue
			}
			overlap := ""
			if e.ready.min <= oursE.ready.max && oursE.ready.min <= e.ready.max {
				overlap = " (the ranges of all-ready times overlap: the difference is within the run-to-run spread)"
			}
			p("- %s took %.1f× snapkeeper's median time to all-ready and %.1f× to all-deleted%s.",
				labelOf(r, e.id), e.ready.med/oursE.ready.med, e.deleted.med/oursE.deleted.med, overlap)
		}
		w := spreadOf(ok[sysOurs], func(s *scenarioResult) float64 { return s.Create.Writes.Total(isNotEvent) / float64(s.N) })
		verdict := "at"
		switch {
		case w.med > contractWrites+0.0001:
			verdict = fmt.Sprintf("%.2f above", w.med-contractWrites)
		case w.med < contractWrites-0.0001:
			verdict = fmt.Sprintf("%.2f below", contractWrites-w.med)
		}
		p("- snapkeeper wrote %.2f API writes per snapshot to create (median; %.2f–%.2f), %s the cost model's %d (its early status write is skipped when the CSI side answered first).", w.med, w.min, w.max, verdict, contractWrites)
	}
	for _, e := range es {
		if e.id == sysOurs {
			continue
		}
		w := spreadOf(ok[e.id], func(s *scenarioResult) float64 { return s.Create.Writes.Total(isNotEvent) / float64(s.N) })
		p("- %s wrote %.2f API writes per snapshot to create (median).", labelOf(r, e.id), w.med)
	}
	for _, e := range es {
		var runs int
		for _, s := range ok[e.id] {
			for _, n := range s.Notes {
				if strings.Contains(n, "refusals by the API server") {
					runs++
					break
				}
			}
		}
		if runs > 0 {
			p("- %s was refused something under its RBAC in %d of %d runs (see the notes under the scenario table).", labelOf(r, e.id), runs, len(ok[e.id]))
		}
	}
	var rejected []string
	for _, e := range es {
		var n, apf float64
		for _, s := range ok[e.id] {
			ps := s.Create.Pressure.add(s.Delete.Pressure)
			n, apf = n+ps.Code429, apf+ps.apfTotal()
		}
		if n > 0 || apf > 0 {
			rejected = append(rejected, fmt.Sprintf("%s %.0f 429s (%.0f APF rejections) over %d runs", labelOf(r, e.id), n, apf, len(ok[e.id])))
		}
	}
	if len(rejected) == 0 {
		p("- The API server rejected nothing (no 429, no APF rejection) in any measured window.")
	} else {
		p("- The API server pushed back: %s.", strings.Join(rejected, "; "))
	}
}

func short(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}
