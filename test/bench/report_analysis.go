package main

import (
	"fmt"
	"strings"
)

// analysisSection is written from the figures of this run alone: every
// sentence is computed, none is kept by hand.
func (r *report) analysisSection(b *strings.Builder) {
	p := printTo(b)
	p("## Analysis (generated from the figures below)")
	p("")
	r.scenarioAnalysis(b)
	if line := r.dominantWait(); line != "" {
		p("- %s", line)
	}
	r.singleAnalysis(p)
	r.waitingAnalysis(p)
	r.scaleAnalysis(p)
	r.startAnalysis(p, r.steady, "restart over")
	r.startAnalysis(p, r.cold, "cold start over")
	r.groupAnalysis(p)
	r.scheduleAnalysis(p)
	r.admissionAnalysis(p)
	p("")
}

// scaleAnalysis gives, per system, the growth per 10× N between
// consecutive sizes and the range of writes per snapshot.
func (r *report) scaleAnalysis(p printer) {
	for _, id := range scaleIDs(r.scale) {
		var rows []*scenarioResult
		failed := 0
		for _, s := range r.scale {
			switch {
			case s.System.ID != id:
			case s.Err != nil:
				failed++
			default:
				rows = append(rows, s)
			}
		}
		label := labelOfScale(r, id)
		if failed > 0 {
			p("- Scale, %s: %d of %d sizes failed.", label, failed, failed+len(rows))
		}
		var steps []string
		for i := 1; i < len(rows); i++ {
			prev, s := rows[i-1], rows[i]
			var parts []string
			add := func(name string, f func(*scenarioResult) float64, comparable bool) {
				if g, ok := growthOf(prev, s, f, comparable); ok {
					parts = append(parts, fmt.Sprintf("%s ×%.1f", name, g))
				}
			}
			same := prev.Seeded == s.Seeded
			add("all-ready", func(x *scenarioResult) float64 { return x.createTime().Seconds() }, same && !s.Seeded)
			add("start to idle", func(x *scenarioResult) float64 { return x.createTime().Seconds() }, same && s.Seeded)
			add("all-deleted", func(x *scenarioResult) float64 { return x.Delete.Duration.Seconds() }, true)
			add("controller CPU", func(x *scenarioResult) float64 { return x.controllerCPU().Seconds() }, same)
			add("peak RSS", func(x *scenarioResult) float64 { return float64(x.PeakRSSkB) }, true)
			if len(parts) > 0 {
				steps = append(steps, fmt.Sprintf("N %d→%d: %s", prev.N, s.N, strings.Join(parts, ", ")))
			}
		}
		if len(steps) > 0 {
			p("- Scale, %s, growth per 10× N (×10 is linear): %s.", label, strings.Join(steps, "; "))
		}
		if lo, hi, ok := perSnapshotRange(rows, func(s *scenarioResult) float64 { return s.Delete.Writes.Total(isNotEvent) }); ok {
			p("- Scale, %s: API writes per snapshot to delete %.2f–%.2f over N = %s%s.", label, lo, hi, sizes(rows), r.createRange(rows))
		}
		if line := perWriteLine(rows); line != "" {
			p("- Scale, %s, the cost of one write and one snapshot at each N: %s.", label, line)
		}
	}
	r.scaleRepeatAnalysis(p)
	r.emptyControllerLine(p)
}

// scaleRepeatAnalysis gives, per system that ran more than once at some N,
// the growth per 10× N of each phase's median over the runs.
func (r *report) scaleRepeatAnalysis(p printer) {
	groups := scaleGroups(r.scaleAll)
	lines := map[string][]string{}
	var ids []string
	for i := 1; i < len(groups); i++ {
		prev, g := groups[i-1], groups[i]
		if prev.id != g.id || (len(prev.runs) < 2 && len(g.runs) < 2) {
			continue
		}
		var parts []string
		if v, ok := g.growthOf(&prev, createSecs, prev.seeded() == g.seeded()); ok {
			name := "all-ready"
			if g.seeded() {
				name = "start to idle"
			}
			parts = append(parts, fmt.Sprintf("%s ×%.1f (medians %.2f → %.2f s of %d and %d runs)", name, v,
				prev.spread(createSecs).med, g.spread(createSecs).med, len(prev.ok()), len(g.ok())))
		}
		if v, ok := g.growthOf(&prev, deleteSecs, true); ok {
			parts = append(parts, fmt.Sprintf("all-deleted ×%.1f (%.2f → %.2f s)", v, prev.spread(deleteSecs).med, g.spread(deleteSecs).med))
		}
		if len(parts) == 0 {
			continue
		}
		if lines[g.id] == nil {
			ids = append(ids, g.id)
		}
		lines[g.id] = append(lines[g.id], fmt.Sprintf("N %d→%d: %s", prev.n, g.n, strings.Join(parts, ", ")))
	}
	for _, id := range ids {
		p("- Scale, %s, growth per 10× N of each phase's median over the repeats: %s.", labelOfScale(r, id), strings.Join(lines[id], "; "))
	}
}

// perWriteLine lists, per N, kube-apiserver's and etcd's CPU per API write
// and the floor ratios of both phases: whether a write costs more as N
// grows, and how far from the floor each N is.
func perWriteLine(rows []*scenarioResult) string {
	var parts []string
	for _, s := range rows {
		if s.Seeded {
			continue
		}
		perWrite := func(ph phase) string {
			all := ph.Codes.Total(func(writeKey) bool { return true })
			if all == 0 {
				return "-"
			}
			return fmt.Sprintf("%.2f", 1000*ph.PlaneCPU.Seconds()/all)
		}
		parts = append(parts, fmt.Sprintf("N=%d: kube-apiserver + etcd %s / %s ms CPU per write (create / delete), all-ready %s and all-deleted %s the CRD-priced floor",
			s.N, perWrite(s.Create), perWrite(s.Delete), floorRatio(s, s.Create, true), floorRatio(s, s.Delete, true)))
	}
	return strings.Join(parts, "; ")
}

// emptyControllerLine sets ours beside the empty controller (the same
// writes without logic) at each N both ran: what is left to us.
func (r *report) emptyControllerLine(p printer) {
	ours, empty := map[int]*scenarioResult{}, map[int]*scenarioResult{}
	for _, s := range r.scale {
		if s.Err != nil || s.Seeded {
			continue
		}
		switch s.System.ID {
		case sysOurs:
			ours[s.N] = s
		case sysWritesOnly:
			empty[s.N] = s
		}
	}
	var parts []string
	for _, n := range sortedNs(ours) {
		e, ok := empty[n]
		if !ok {
			continue
		}
		o := ours[n]
		parts = append(parts, fmt.Sprintf("N=%d: all-ready %s vs %s (%.2f×), all-deleted %s vs %s (%.2f×)", n,
			secs(o.createTime()), secs(e.createTime()), o.createTime().Seconds()/e.createTime().Seconds(),
			secs(o.Delete.Duration), secs(e.Delete.Duration), o.Delete.Duration.Seconds()/e.Delete.Duration.Seconds()))
	}
	if len(parts) > 0 {
		p("- Scale, snapkeeper ÷ the empty controller (the same writes without logic, CSI calls or events: the API server's share): %s.", strings.Join(parts, "; "))
	}
}

func (r *report) createRange(rows []*scenarioResult) string {
	var created []*scenarioResult
	for _, s := range rows {
		if !s.Seeded {
			created = append(created, s)
		}
	}
	lo, hi, ok := perSnapshotRange(created, func(s *scenarioResult) float64 { return s.Create.Writes.Total(isNotEvent) })
	if !ok {
		return ""
	}
	return fmt.Sprintf("; to create %.2f–%.2f over N = %s (created through the system)", lo, hi, sizes(created))
}

func perSnapshotRange(rows []*scenarioResult, f func(*scenarioResult) float64) (lo, hi float64, ok bool) {
	for i, s := range rows {
		v := f(s) / float64(s.N)
		if i == 0 || v < lo {
			lo = v
		}
		if i == 0 || v > hi {
			hi = v
		}
	}
	return lo, hi, len(rows) > 0
}

func sizes(rows []*scenarioResult) string {
	out := make([]string, len(rows))
	for i, s := range rows {
		out[i] = fmt.Sprint(s.N)
	}
	return strings.Join(out, ", ")
}

func labelOfScale(r *report, id string) string {
	for _, s := range r.scale {
		if s.System.ID == id {
			return s.System.Label
		}
	}
	return id
}

// startAnalysis sums up the restarts or cold starts.
func (r *report) startAnalysis(p printer, rs []*steadyResult, what string) {
	for _, s := range rs {
		if s.Err != nil {
			p("- %s %d ready snapshots, %s: FAILED (%s).", strings.ToUpper(what[:1])+what[1:], s.M, s.System.Label, oneLine(s.Err.Error()))
			continue
		}
		w, c := s.Start.Writes.Total(nil), snapshotCalls(s.Start.Calls)
		verdict := "no API write and no snapshot CSI call"
		if w > 0 || c > 0 {
			verdict = fmt.Sprintf("**%.0f API writes and %d snapshot CSI calls** (goal 0)", w, c)
		}
		p("- %s %d ready snapshots, %s: serving after %s, idle after %s, %s; %s per snapshot of memory (peak %s over %s with none).",
			strings.ToUpper(what[:1])+what[1:], s.M, s.System.Label, secs(s.Start.Serving), secs(s.Start.Idle), verdict,
			kib(s.bytesPerSnapshot()), mib(s.Start.HWMkB), mib(s.Baseline.HWMkB))
	}
	if len(rs) > 0 && rs[0].Direct && rs[0].Seed.Took > 0 {
		sd, total := rs[0].Seed, memTotalkB()
		share := ""
		if total > 0 {
			share = fmt.Sprintf(", %.0f%% of the machine's memory", 100*float64(sd.PlaneHWMkB)/float64(total))
		}
		p("- Seeding %d ready snapshots took %s (%.0f writes/s); kube-apiserver + etcd grew from %s to %s (%s per snapshot; peak %s%s).",
			sd.M, secs(sd.Took), sd.Writes/sd.Took.Seconds(), mib(sd.PlaneBeforekB), mib(sd.PlaneRSSkB), kib(sd.planeGrowth()), mib(sd.PlaneHWMkB), share)
	}
}

// admissionAnalysis gives the p99 through the API server with the
// ServiceAccount appliers and what the webhook adds to it.
func (r *report) admissionAnalysis(p printer) {
	a := r.admission
	if a == nil || a.Missing || a.Err != nil {
		return
	}
	find := func(req, path string, c int) (latencyRow, bool) {
		for _, row := range a.Rows {
			if row.Request == req && row.Path == path && row.Concurrency == c {
				return row, true
			}
		}
		return latencyRow{}, false
	}
	var parts []string
	var rejected float64
	for _, row := range a.Rows {
		rejected += row.Code429
		if row.Path != "API server + webhook" || row.Concurrency < 16 {
			continue
		}
		alone, ok := find(row.Request, "API server alone", row.Concurrency)
		add := ""
		if ok {
			add = fmt.Sprintf(" (the same requests without the webhook: %s)", ms(alone.P99))
		}
		parts = append(parts, fmt.Sprintf("%s at %d appliers p99 %s%s", row.Request, row.Concurrency, ms(row.P99), add))
	}
	if len(parts) > 0 {
		p("- Admission through the API server with ServiceAccount appliers (under APF): %s.", strings.Join(parts, "; "))
		if rejected > 0 {
			p("- The API server answered %.0f requests of the admission rows with 429.", rejected)
		}
	}
}
