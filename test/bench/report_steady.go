package main

import (
	"fmt"
	"strings"
)

// steadySection is the restart over snapshots the system made itself.
func (r *report) steadySection(b *strings.Builder) {
	title := fmt.Sprintf("## Steady state: restart over %d ready snapshots", r.opts.steadyM)
	startSection(b, title, r.steady, false, r.steadyIntro)
}

// steadyIntro says what the restart measures.
func (r *report) steadyIntro(p printer) {
	p("A fresh control plane holds M ready snapshots (made by the system itself); the controllers are stopped and")
	p("started again, and every API write and CSI call is counted from the new start until the controllers were idle")
	p("(no API write and under %.0f%% of a core) for `-quiet` (%s), and for at least %s. A restart lists every object", idleCPUShare*100, r.opts.quiet, r.opts.steadyIdle)
	p("into fresh informers and hands each one to the sync functions once, which is the forced full resync that the steady-state")
	p("target allows in place of 10 idle minutes; the community pair's periodic resync (15 min) and our safety re-check (5 min,")
	p("only objects that wait) fall outside the window. The community pair runs with QPS 100/burst 200/100 workers here")
	p("(filling %d snapshots at QPS 5 would take hours).", r.opts.steadyM)
	p("")
}

// coldSection is the cold start over seeded snapshots.
func (r *report) coldSection(b *strings.Builder) {
	title := fmt.Sprintf("## Cold start over %d ready snapshots", r.opts.coldStartM)
	startSection(b, title, r.cold, true, r.coldIntro)
}

// coldIntro says how the snapshots are seeded and the starts measured.
func (r *report) coldIntro(p printer) {
	s0 := r.cold[0]
	p("One fresh control plane; each system first starts over no snapshot (its baseline memory) and is stopped. Then")
	p("M ready dynamic snapshots are seeded directly in the API server, as a controller would have left them: each")
	p("VolumeSnapshot with its finalizers, class and a bound, ready status, each content `snapcontent-<uid>` with its")
	p("finalizer and a ready status holding the handle, written by the benchmark's admin client from %d goroutines", r.opts.seedConc)
	p("(statuses through the status subresource). The mock driver holds every handle (the benchmark cut each one under")
	p("the name a controller would use), so a system that polled or listed would find them. Their claims are gone.")
	p("Then each system starts over the same objects in turn and is measured from the start of its processes until it")
	p("was idle (no API write and under %.0f%% of a core) for `-quiet` (%s), and for at least %s. Memory per snapshot", idleCPUShare*100, r.opts.quiet, r.opts.steadyIdle)
	p("is (peak RSS over the M snapshots − peak RSS of the same processes over none) / M, summed over the processes.")
	p("")
	if s0.Seed.Took > 0 {
		p("Seeding: %d snapshots in %s (%.0f pairs/s, %.0f writes by the benchmark, %.0f writes/s); kube-apiserver + etcd",
			s0.Seed.M, secs(s0.Seed.Took), float64(s0.Seed.M)/s0.Seed.Took.Seconds(), s0.Seed.Writes, s0.Seed.Writes/s0.Seed.Took.Seconds())
		p("grew from %s to %s (kube-apiserver %s, etcd %s; %s per snapshot; peak %s).", mib(s0.Seed.PlaneBeforekB), mib(s0.Seed.PlaneRSSkB),
			mib(s0.Seed.APIServerkB), mib(s0.Seed.EtcdkB), kib(s0.Seed.planeGrowth()), mib(s0.Seed.PlaneHWMkB))
		p("")
	}
}

// startSection is a section on starts over ready snapshots: its title,
// then the intro and the table of rs, or that it did not run.
func startSection(b *strings.Builder, title string, rs []*steadyResult, cold bool, intro func(printer)) {
	p := printTo(b)
	p("%s", title)
	p("")
	if len(rs) == 0 {
		p("(not run)")
		p("")
		return
	}
	intro(p)
	steadyTable(p, rs, cold)
}

func steadyTable(p printer, rs []*steadyResult, cold bool) {
	row := resultTable(p, rs, func(s *steadyResult) string { return s.System.Label }, func(s *steadyResult) bool { return s.Err != nil })
	row("M (ready snapshots)", func(s *steadyResult) string { return fmt.Sprint(s.M) })
	if !cold {
		row("time to make them ready", func(s *steadyResult) string { return secs(s.FillTime) })
	}
	row("start to serving (ours: /readyz, every informer synced; community: metrics up + 2 s)", func(s *steadyResult) string { return secs(s.Start.Serving) })
	row("**start to idle** (last API write or busy CPU sample)", func(s *steadyResult) string { return "**" + secs(s.Start.Idle) + "**" })
	row("counted window", func(s *steadyResult) string { return secs(s.Start.Window) })
	row("**API writes in the window** (goal 0)", func(s *steadyResult) string { return fmt.Sprintf("**%.0f**", s.Start.Writes.Total(nil)) })
	row("writes by verb and resource", func(s *steadyResult) string { return writeList(s.Start.Writes) })
	row("**snapshot CSI calls** (goal 0)", func(s *steadyResult) string { return fmt.Sprintf("**%d**", snapshotCalls(s.Start.Calls)) })
	row("all CSI calls", func(s *steadyResult) string { return callCounts(s.Start.Calls) })
	row("controller CPU, start to end of window", func(s *steadyResult) string { return fmt.Sprintf("%.2f s", s.Start.CPU.Seconds()) })
	if !cold {
		row("RSS before the restart (all cached)", func(s *steadyResult) string { return mib(s.RSSBeforekB) })
	}
	row("peak RSS over no snapshot / over M / RSS at the end", func(s *steadyResult) string {
		return mib(s.Baseline.HWMkB) + " / " + mib(s.Start.HWMkB) + " / " + mib(s.Start.RSSkB)
	})
	row("**memory per snapshot** (VolumeSnapshot + content)", func(s *steadyResult) string { return "**" + kib(s.bytesPerSnapshot()) + "**" })
	row("kube-apiserver + etcd RSS at the end (peak)", func(s *steadyResult) string { return mib(s.PlaneRSSkB) + " (" + mib(s.PlaneHWMkB) + ")" })
	p("")
	for _, s := range rs {
		if s.Err != nil {
			p("- %s FAILED: %s", s.System.Label, oneLine(s.Err.Error()))
		}
		for _, n := range s.Notes {
			p("- %s: %s.", s.System.Label, oneLine(n))
		}
	}
	p("")
}

func kib(bytes float64) string { return fmt.Sprintf("%.1f KiB", bytes/1024) }

func writeList(w writeCounts) string {
	var parts []string
	for _, k := range w.Keys() {
		parts = append(parts, fmt.Sprintf("%s: %.0f", k, w.ByKey[k]))
	}
	return joinOrNone(parts, "<br>")
}

func callCounts(calls map[string]int64) string {
	return listing(calls, "<br>", func(k string, v int64) string { return fmt.Sprintf("%s: %d", k, v) })
}
