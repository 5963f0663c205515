package main

import (
	"fmt"
	"strings"
)

// waitRuns are the median runs that measured waiting (-csi-ready-after).
func (r *report) waitRuns() []*scenarioResult {
	var out []*scenarioResult
	for _, s := range r.medianRuns() {
		if s.Waiting != nil {
			out = append(out, s)
		}
	}
	return out
}

// waitingSection shows what each system spent per snapshot while the
// driver said "not ready".
func (r *report) waitingSection(b *strings.Builder) {
	runs := r.waitRuns()
	if len(runs) == 0 {
		return
	}
	p := func(format string, args ...any) { fmt.Fprintf(b, format+"\n", args...) }
	p("### While the driver says \"not ready\" (`-csi-ready-after=%s`, median run)", r.opts.csiReadyAfter)
	p("")
	p("For each snapshot, the driver's first answer about it (from the mock's call log) opens an interval that ends when")
	p("the driver turned ready (its first answer plus the snapshot's own delay, spread by a hash of its id between the")
	p("two bounds, as the mock computes it). CSI calls are the driver's calls about that id in the interval (polls);")
	p("writes are the changes to the VolumeSnapshot and its content that the benchmark's informers saw in it, without")
	p("the one status write that records the handle of the first answer (events and claims are not in this count).")
	p("The delay runs from the driver turning ready until the VolumeSnapshot showed `readyToUse`.")
	p("")
	p("| | %s |", joinCols(runs, func(s *scenarioResult) string { return s.System.Label }))
	p("|---|%s", strings.Repeat("---|", len(runs)))
	row := func(name string, f func(w *waitStats, s *scenarioResult) string) {
		p("| %s | %s |", name, joinCols(runs, func(s *scenarioResult) string { return f(s.Waiting, s) }))
	}
	row("snapshots measured", func(w *waitStats, s *scenarioResult) string { return fmt.Sprintf("%d of %d", w.Snapshots, s.N) })
	row("**CSI calls per snapshot while waiting** (mean / most)", func(w *waitStats, _ *scenarioResult) string {
		return fmt.Sprintf("**%.2f** / %.0f", w.CallsMean, w.CallsMax)
	})
	row("**API writes per snapshot while waiting** (goal 0; mean / most)", func(w *waitStats, _ *scenarioResult) string {
		return fmt.Sprintf("**%s** / %d", per(float64(w.writesTotal()), w.Snapshots), w.WritesMax)
	})
	row("writes while waiting by object and kind (per snapshot)", func(w *waitStats, _ *scenarioResult) string {
		var parts []string
		for _, k := range sortedKeys(w.Writes) {
			parts = append(parts, fmt.Sprintf("%s: %s", k, per(float64(w.Writes[k]), w.Snapshots)))
		}
		if len(parts) == 0 {
			return "none"
		}
		return strings.Join(parts, "<br>")
	})
	row("**driver ready → VolumeSnapshot readyToUse** (median / p99 / last)", func(w *waitStats, _ *scenarioResult) string {
		return fmt.Sprintf("**%s** / %s / %s", secs(w.LagP50), secs(w.LagP99), secs(w.LagMax))
	})
	row("CSI calls and API writes per snapshot, whole create phase", func(_ *waitStats, s *scenarioResult) string {
		return fmt.Sprintf("%s / %s", per(float64(snapshotCalls(s.Create.Calls)), s.N), per(s.Create.Writes.Total(isNotEvent), s.N))
	})
	p("")
	for _, s := range runs {
		if s.Waiting.Dropped > 0 {
			p("Note (%s): the driver's call log dropped %d calls; the CSI figures are of those it kept.", s.System.Label, s.Waiting.Dropped)
			p("")
		}
	}
}

// waitingAnalysis is the analysis line of the waiting figures.
func (r *report) waitingAnalysis(p func(format string, args ...any)) {
	runs := r.waitRuns()
	if len(runs) == 0 {
		return
	}
	var parts []string
	for _, s := range runs {
		w := s.Waiting
		parts = append(parts, fmt.Sprintf("%s %.2f CSI calls and %s API writes per snapshot while waiting, VolumeSnapshot ready %s (median; p99 %s) after the driver",
			s.System.Label, w.CallsMean, per(float64(w.writesTotal()), w.Snapshots), secs(w.LagP50), secs(w.LagP99)))
	}
	p("- With the slow driver (%s): %s.", r.driverNote(), strings.Join(parts, "; "))
	for _, s := range runs {
		if n := s.Waiting.writesTotal(); n > 0 {
			p("- %s wrote while the driver said not ready (goal 0): %d changes over %d snapshots (see the waiting table).", s.System.Label, n, s.Waiting.Snapshots)
		}
	}
}
