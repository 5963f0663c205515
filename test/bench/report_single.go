package main

import (
	"fmt"
	"strings"
	"time"
)

// singleSection renders the one-snapshot-alone stage (nothing when it did
// not run): a column per system.
func (r *report) singleSection(b *strings.Builder) {
	if len(r.single) == 0 {
		return
	}
	p := printTo(b)
	p("## One snapshot alone: %d sequential snapshots", r.opts.single)
	p("")
	p("Latency, not throughput: on a fresh control plane per system (etcd syncing, nothing else running, the mock")
	p("driver without latency, one bound PVC and the default class), one VolumeSnapshot is created, the clock runs")
	p("from just before the create is sent until the benchmark's watch shows it `readyToUse`; then it is deleted and")
	p("the clock runs until the watch has seen the VolumeSnapshot and its content gone (the driver then holds no")
	p("snapshot); then the next. The times are stamped by the watch's event handlers, not by a poll. On the same")
	p("plane, before any controller starts, one VolumeSnapshot (in a namespace of its own, deleted again before the")
	p("start) and one ConfigMap are merge-patched %d times one after the other (a new label value each time): the", singleWrites)
	p("latency of one write. Every request is the benchmark's own admin client, exempt from API Priority and Fairness:")
	p("the controllers' writes queue under APF as their ServiceAccounts, which on an idle plane should add little.")
	p("The limit prices the cost model's writes as one sequential chain at the CRD write's median: %d writes to", singleCreateWrites)
	p("create (writes 1 and 2 go together and 9 follows readyToUse, but the user's create and the watch hops the chain")
	p("waits on are not counted, so it is an estimate of the physical limit, not a bound) and %d to delete. The", singleDeleteWrites)
	p("limit is the same for every system: it prices the work, not a system's way of doing it. Percentiles are by")
	p("nearest rank: the p99 is rank %d of %d snapshots and rank %d of %d writes, fastest first.", rank(r.opts.single, 99), r.opts.single, rank(singleWrites, 99), singleWrites)
	p("")
	for _, s := range r.single {
		p("- **%s**: %s", s.System.Label, s.System.Flags)
	}
	p("")
	// A run that failed after some snapshots still shows what it measured.
	row := resultTable(p, r.single, func(s *singleResult) string { return s.System.Label }, func(s *singleResult) bool { return s.Err != nil && len(s.Ready) == 0 })
	row("snapshots measured", func(s *singleResult) string {
		if s.Err != nil {
			return fmt.Sprintf("%d of %d (FAILED)", len(s.Gone), s.N)
		}
		return fmt.Sprint(len(s.Gone))
	})
	row("machine load average when the snapshots began", func(s *singleResult) string { return s.Load })
	row("**create -> readyToUse** p50 / p99 (min-max)", func(s *singleResult) string { return "**" + spreadMS(s.Ready) + "**" })
	row("delete -> all gone p50 / p99 (min-max)", func(s *singleResult) string { return spreadMS(s.Gone) })
	row("one CRD write p50 / p99 (VolumeSnapshot merge patch, sequential, admin)", func(s *singleResult) string { return p50p99(s.CRDWrite) })
	row("one ConfigMap write p50 / p99 (same)", func(s *singleResult) string { return p50p99(s.ConfigMapWrite) })
	row(fmt.Sprintf("create limit: %d × CRD write p50", singleCreateWrites), func(s *singleResult) string { return ms1(s.createLimit()) })
	row("**create -> readyToUse p50 ÷ limit**", func(s *singleResult) string {
		return fmt.Sprintf("**%.1f×**", ratio(pctl(s.Ready, 50), s.createLimit()))
	})
	row(fmt.Sprintf("delete limit: %d × CRD write p50", singleDeleteWrites), func(s *singleResult) string { return ms1(s.deleteLimit()) })
	row("delete -> all gone p50 ÷ limit", func(s *singleResult) string {
		return fmt.Sprintf("%.1f×", ratio(pctl(s.Gone, 50), s.deleteLimit()))
	})
	row("create timeline, p50 from the create: "+strings.Join(createStages, " · "), func(s *singleResult) string {
		return stagesMS(s.CreateStages, createStages)
	})
	row("delete timeline, p50 from the delete: "+strings.Join(deleteStages, " · "), func(s *singleResult) string {
		return stagesMS(s.DeleteStages, deleteStages)
	})
	for _, s := range r.single {
		if s.Err != nil {
			p("")
			p("FAILED (%s): %s", s.System.Label, oneLine(s.Err.Error()))
		}
	}
	p("")
}

// singleAnalysis adds one line per system to the analysis.
func (r *report) singleAnalysis(p printer) {
	for _, s := range r.single {
		if s.Err != nil {
			p("- One snapshot alone, %s: FAILED after %d of %d snapshots (%s).", s.System.Label, len(s.Gone), s.N, oneLine(s.Err.Error()))
			continue
		}
		crd := pctl(s.CRDWrite, 50)
		p("- One snapshot alone, %s: create -> ready p50 %s (p99 %s), %.1f× the sum of its %d sequential writes (p50 %s each); delete -> gone p50 %s (p99 %s), %.1f× its %d writes.",
			s.System.Label, ms1(pctl(s.Ready, 50)), ms1(pctl(s.Ready, 99)), ratio(pctl(s.Ready, 50), s.createLimit()), singleCreateWrites, ms1(crd),
			ms1(pctl(s.Gone, 50)), ms1(pctl(s.Gone, 99)), ratio(pctl(s.Gone, 50), s.deleteLimit()), singleDeleteWrites)
	}
}

// singleFailures lists the failed systems of the stage for report.failures.
func (r *report) singleFailures() []string {
	var out []string
	for _, s := range r.single {
		if s.Err != nil {
			out = append(out, fmt.Sprintf("one snapshot alone %s (%d sequential): %v", s.System.ID, s.N, s.Err))
		}
	}
	return out
}

func (s *singleResult) createLimit() time.Duration {
	return singleCreateWrites * pctl(s.CRDWrite, 50)
}

func (s *singleResult) deleteLimit() time.Duration {
	return singleDeleteWrites * pctl(s.CRDWrite, 50)
}

// spreadMS is "p50 / p99 (min-max)" of ds in milliseconds.
func spreadMS(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	return fmt.Sprintf("%s / %s (%s-%s)", ms1(pctl(ds, 50)), ms1(pctl(ds, 99)), ms1(pctl(ds, 0)), ms1(pctl(ds, 100)))
}

func p50p99(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	return ms1(pctl(ds, 50)) + " / " + ms1(pctl(ds, 99))
}

// stagesMS is the p50 of each stage, " · "-separated ("-" where no
// snapshot reached it).
func stagesMS(by map[string][]time.Duration, stages []string) string {
	parts := make([]string, len(stages))
	for i, st := range stages {
		parts[i] = "-"
		if ds := by[st]; len(ds) > 0 {
			parts[i] = ms1(pctl(ds, 50))
		}
	}
	return strings.Join(parts, " · ")
}
