package main

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// waitingRuns are the runs that measured waiting, by system in the order
// first run: the -waiting stage's, or else the main scenario's median runs
// when it ran with -csi-ready-after.
func (r *report) waitingRuns() (ids []string, runs map[string][]*scenarioResult) {
	src := r.waiting
	if len(src) == 0 {
		src = r.medianRuns()
	}
	measured := slices.DeleteFunc(slices.Clone(src), func(s *scenarioResult) bool {
		return s.Err != nil || s.Waiting == nil || s.Waiting.Snapshots == 0
	})
	return bySystem(measured, func(*scenarioResult) bool { return true })
}

// waitingRange is the readiness spread the waiting runs used.
func (r *report) waitingRange() string {
	if len(r.waiting) > 0 {
		return r.opts.waiting
	}
	return r.opts.csiReadyAfter
}

// Per-snapshot waiting figures of one run.
func waitCalls(s *scenarioResult) float64 { return s.Waiting.CallsMean }
func waitWrites(s *scenarioResult) float64 {
	return float64(s.Waiting.writesTotal()) / float64(s.Waiting.Snapshots)
}
func waitCutWrites(s *scenarioResult) float64 {
	return float64(s.Waiting.cutWritesTotal()) / float64(s.Waiting.Snapshots)
}
func waitLag(s *scenarioResult) float64 { return s.Waiting.LagP50.Seconds() }

// waitingSection shows what each system spent per snapshot while the
// driver said "not ready": medians over the runs, min and max.
func (r *report) waitingSection(b *strings.Builder) {
	ids, runs := r.waitingRuns()
	if len(ids) == 0 {
		return
	}
	p := printTo(b)
	p("### While the driver says \"not ready\": a slow driver (`-waiting=%s`)", r.waitingRange())
	p("")
	p("A driver as real storage is: CreateSnapshot takes 200 ms, ListSnapshots 50 ms, and each snapshot answers")
	p("`readyToUse: false` until %s after the driver's first answer about it (spread by a hash of its id, as the", r.waitingRange())
	p("mock computes it; the benchmark knows each snapshot's moment). N VolumeSnapshots are created at once and")
	p("deleted, as in the main scenario, on a control plane of their own.")
	p("")
	p("For each snapshot the driver's first answer (from the mock's call log) opens an interval that ends when the")
	p("driver turns ready. Its first part, **the cut's record**, lasts until the VolumeSnapshot shows the cut")
	p("(`status.creationTime`, which is what a freeze/thaw backup waits for): the writes there happen once per")
	p("snapshot however long the upload takes (the status write that stores the handle is not counted). The rest is")
	p("**the wait**: only polls should happen there, and any write in it is paid again by every poll that changes")
	p("something. CSI calls are the driver's calls about the snapshot in the whole interval. The delay runs from the")
	p("driver turning ready until the VolumeSnapshot showed `readyToUse`. Figures are per snapshot; each cell is the")
	p("median over the runs, (min–max).")
	p("")
	// A column per system holds all its runs.
	systemRuns := make([][]*scenarioResult, len(ids))
	for i, id := range ids {
		systemRuns[i] = runs[id]
	}
	row := resultTable(p, systemRuns, func(rs []*scenarioResult) string {
		return fmt.Sprintf("%s (%d runs)", rs[0].System.Label, len(rs))
	}, nil)
	num := func(f func(*scenarioResult) float64, unit string) func([]*scenarioResult) string {
		return func(rs []*scenarioResult) string {
			sp := spreadOf(rs, f)
			return fmt.Sprintf("%.2f%s (%.2f–%.2f)", sp.med, unit, sp.min, sp.max)
		}
	}
	row("snapshots measured, per run", func(rs []*scenarioResult) string {
		var c []string
		for _, s := range rs {
			c = append(c, fmt.Sprintf("%d/%d", s.Waiting.Snapshots, s.N))
		}
		return strings.Join(c, ", ")
	})
	row("**CSI calls per snapshot while uploading**", num(waitCalls, ""))
	row("most CSI calls for one snapshot", num(func(s *scenarioResult) float64 { return s.Waiting.CallsMax }, ""))
	row("**driver ready → VolumeSnapshot readyToUse**, median snapshot", num(waitLag, " s"))
	row("driver ready → VolumeSnapshot readyToUse, p99 snapshot", num(func(s *scenarioResult) float64 { return s.Waiting.LagP99.Seconds() }, " s"))
	row("API writes recording the cut (once per snapshot)", num(waitCutWrites, ""))
	row("VolumeSnapshots that showed the cut before the driver turned ready", num(func(s *scenarioResult) float64 {
		return 100 * float64(s.Waiting.CutShown) / float64(s.Waiting.Snapshots)
	}, " %"))
	row("**API writes during the wait** (goal 0)", num(waitWrites, ""))
	row("most writes during the wait, one snapshot", num(func(s *scenarioResult) float64 { return float64(s.Waiting.WritesMax) }, ""))
	row("writes by object and kind, median run (cut's record · wait)", func(rs []*scenarioResult) string {
		s := medianBy(rs, waitLag)
		return kinds(s.Waiting.CutWrites, s.Waiting.Snapshots) + " · " + kinds(s.Waiting.Writes, s.Waiting.Snapshots)
	})
	row("CSI calls / API writes per snapshot, whole create phase", func(rs []*scenarioResult) string {
		calls := spreadOf(rs, func(s *scenarioResult) float64 { return float64(snapshotCalls(s.Create.Calls)) / float64(s.N) })
		writes := spreadOf(rs, func(s *scenarioResult) float64 { return s.Create.Writes.Total(isNotEvent) / float64(s.N) })
		return fmt.Sprintf("%.2f / %.2f", calls.med, writes.med)
	})
	row("time to all-ready", num(func(s *scenarioResult) float64 { return s.Create.Duration.Seconds() }, " s"))
	p("")
	for _, id := range ids {
		for _, s := range runs[id] {
			if s.Waiting.Dropped > 0 {
				p("Note (%s, run %d): the driver's call log dropped %d calls; the CSI figures are of those it kept.", s.System.Label, s.Run, s.Waiting.Dropped)
				p("")
			}
		}
	}
}

// medianBy is the run with the median value of f.
func medianBy(rs []*scenarioResult, f func(*scenarioResult) float64) *scenarioResult {
	sorted := slices.Clone(rs)
	slices.SortStableFunc(sorted, func(a, b *scenarioResult) int { return cmp.Compare(f(a), f(b)) })
	return sorted[(len(sorted)-1)/2]
}

// kinds renders writes by kind per snapshot.
func kinds(m map[string]int, n int) string {
	return listing(m, "<br>", func(k string, v int) string { return fmt.Sprintf("%s: %s", k, per(float64(v), n)) })
}

// waitingAnalysis is the analysis line of the waiting figures, from the
// medians.
func (r *report) waitingAnalysis(p printer) {
	ids, runs := r.waitingRuns()
	if len(ids) == 0 {
		return
	}
	var parts []string
	for _, id := range ids {
		rs := runs[id]
		parts = append(parts, fmt.Sprintf("%s %.2f CSI calls per snapshot while uploading, %.2f API writes during the wait (%.2f recording the cut), VolumeSnapshot ready %.2f s after the driver (median snapshot)",
			rs[0].System.Label, spreadOf(rs, waitCalls).med, spreadOf(rs, waitWrites).med, spreadOf(rs, waitCutWrites).med, spreadOf(rs, waitLag).med))
	}
	p("- With the slow driver (ready %s after the cut), medians over the runs: %s.", r.waitingRange(), strings.Join(parts, "; "))
	if o, ok := runs[sysOurs]; ok {
		for _, id := range ids {
			if id == sysOurs {
				continue
			}
			c := runs[id]
			p("- Slow driver, ours ÷ %s (ratio of medians): CSI calls while uploading %s, delay to readyToUse %s.", c[0].System.Label,
				ratioOf(spreadOf(o, waitCalls).med, spreadOf(c, waitCalls).med), ratioOf(spreadOf(o, waitLag).med, spreadOf(c, waitLag).med))
		}
	}
	for _, id := range ids {
		if w := spreadOf(runs[id], waitWrites); w.max > 0 {
			p("- %s wrote during the wait (goal 0): %.2f writes per snapshot in the median run, up to %.2f (see the slow-driver table).", runs[id][0].System.Label, w.med, w.max)
		}
	}
}

func ratioOf(a, b float64) string {
	if b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f×", a/b)
}
