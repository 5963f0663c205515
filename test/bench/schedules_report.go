package main

import (
	"fmt"
	"strings"
	"time"
)

// scheduleSection is the report's schedule tables: the stage's runs and
// retention side by side, then the run over seeded scheduled snapshots.
func (r *report) scheduleSection(b *strings.Builder) {
	if len(r.schedules) == 0 && r.schedSeeded == nil {
		return
	}
	p := printTo(b)
	p("## Snapshot schedules")
	p("")
	r.scheduleRunsTable(p)
	r.seededScheduleTable(p)
}

func (r *report) scheduleRunsTable(p printer) {
	if len(r.schedules) == 0 {
		return
	}
	n := r.schedules[0].N
	p("### One hourly schedule over %d claims: its run at the top of the hour, the next, and its retention", n)
	p("")
	p("Each system on its own fresh control plane with the mock CSI driver (zero latency) and %d bound claims; the write", n)
	p("ceilings are measured first, as in the scenario. snapkeeper runs its schedule component as a third process")
	p("(`--components=schedules`, as the controller's ServiceAccount; the chart runs it inside the binder's process) and one")
	p("SnapshotSchedule over every claim, hourly at the next full minute (`M * * * *`), retention `keepLast: 1`: its run cuts")
	p("one VolumeSnapshot per claim at that top of the hour (run 1). Once they are all ready, the schedule's minute is moved")
	p("to the next full minute (run 2), and its retention deletes a claim's run-1 snapshot as soon as the claim's new one is")
	p("ready. The community pair has no schedule: the benchmark sends the same %d creates at once (from %d goroutines) for", n, r.opts.createConc)
	p("each run and deletes run 1's %d at once when run 2 is all ready, which is what snapscheduler does (it creates and", n)
	p("deletes the VolumeSnapshots itself). A run's clock starts at its scheduled time (ours) or at the first create and stops")
	p("when all %d are ready; the deletion's clock runs from run 2's all-ready until every run-1 snapshot, its content and", n)
	p("its backend snapshot is gone. Writes are the API server's count, the creates and deletes included: the community's")
	p("are the benchmark's (snapscheduler's), ours the schedule component's. Run 2 and the deletion of run 1 share one")
	p("window of writes (ours deletes while run 2 turns ready).")
	p("")
	row := resultTable(p, r.schedules, func(s *scheduleResult) string { return s.System.Label }, func(s *scheduleResult) bool { return s.Err != nil })
	row("who cuts and deletes", func(s *scheduleResult) string {
		if s.scheduled() {
			return fmt.Sprintf("the schedule `%s`, keepLast 1, moved to the next minute for run 2", s.Cron)
		}
		return "the benchmark, at once (as snapscheduler)"
	})
	row("raw write ceiling of this control plane: ConfigMaps / VolumeSnapshots (CRD)", func(s *scheduleResult) string {
		if !s.measured() {
			return "not measured"
		}
		return fmt.Sprintf("%.0f / %.0f writes/s", s.Ceiling.ConfigMaps, s.Ceiling.Snapshots)
	})
	row("time until all VolumeSnapshots of the run existed, run 1 / run 2", func(s *scheduleResult) string {
		return secs(s.Run1.Issued) + " / " + secs(s.Run2.Issued)
	})
	row("**time to all-ready, run 1** (from the scheduled time or the first create)", func(s *scheduleResult) string { return "**" + secs(s.Run1.Duration) + "**" })
	row("time to all-ready, run 2 (the run-1 snapshots still there)", func(s *scheduleResult) string { return secs(s.Run2.Duration) })
	row("first run-1 snapshot being deleted, after run 2's start", func(s *scheduleResult) string {
		if s.FirstDelete < 0 {
			return "after run 2's all-ready"
		}
		return secs(s.FirstDelete)
	})
	row("**run 1's snapshots, contents and backend snapshots gone, after run 2's all-ready**", func(s *scheduleResult) string { return "**" + secs(s.Gone) + "**" })
	row("run 2's start until run 1 is gone", func(s *scheduleResult) string { return secs(s.Total) })
	row("floor, run 1 / run 2 + deletion: raw (ConfigMap ceiling) · CRD-priced", func(s *scheduleResult) string {
		if !s.measured() {
			return "not measured"
		}
		return floors(s.Run1, s.Run2, s.Ceiling)
	})
	row("**time ÷ CRD-priced floor**, run 1 / run 2 + deletion", func(s *scheduleResult) string {
		if !s.measured() {
			return "not measured"
		}
		return fmt.Sprintf("**%.1f× / %.1f×**", ratio(s.Run1.Duration, floor(s.Run1, s.Ceiling, true)), ratio(s.Total, floor(s.Run2, s.Ceiling, true)))
	})
	row("**API writes per snapshot, run 1** (its create included, no events)", func(s *scheduleResult) string {
		return "**" + per(s.sent(s.Run1).Total(isNotEvent), s.N) + "**"
	})
	row("API writes per snapshot, run 2 + deleting run 1 (creates and deletes included, no events)", func(s *scheduleResult) string {
		return per(s.sent(s.Run2).Total(isNotEvent), s.N)
	})
	for _, res := range scheduleWriteResources(r.schedules) {
		row("writes per snapshot on "+res+", run 1 / run 2 + deletion", func(s *scheduleResult) string {
			on := func(k writeKey) bool { return k.Resource == res }
			return per(s.sent(s.Run1).Total(on), s.N) + " / " + per(s.sent(s.Run2).Total(on), s.N)
		})
	}
	row("CSI calls per snapshot, run 1 / run 2 + deletion", func(s *scheduleResult) string {
		return callList(s.Run1.Calls, s.N) + " / " + callList(s.Run2.Calls, s.N)
	})
	row("controller CPU, run 1 + run 2 and deletion", func(s *scheduleResult) string {
		return fmt.Sprintf("%.2f s + %.2f s", s.Run1.CPU.Seconds(), s.Run2.CPU.Seconds())
	})
	row("controllers' peak RSS, summed (the schedule component's)", func(s *scheduleResult) string {
		if s.SchedRSSkB > 0 {
			return mib(s.PeakRSSkB) + " (" + mib(s.SchedRSSkB) + ")"
		}
		return mib(s.PeakRSSkB)
	})
	p("")
	p("\"Floor\" as in the scenario: every write of the window (the controllers', the events, the creates and deletes) at")
	p("this control plane's ceiling, the writes to the snapshot CRDs at the VolumeSnapshot ceiling in the CRD-priced one;")
	p("run 2 + deletion is timed from run 2's start until run 1 is gone.")
	p("")
	for _, s := range r.schedules {
		if s.Err != nil {
			p("- %s FAILED: %s", s.System.Label, oneLine(s.Err.Error()))
		}
		for _, n := range s.Notes {
			p("- %s: %s.", s.System.Label, oneLine(n))
		}
	}
	p("")
}

// measured reports whether both write ceilings of the run were measured.
func (s *scheduleResult) measured() bool { return s.Ceiling.ConfigMaps > 0 && s.Ceiling.Snapshots > 0 }

func (r *report) seededScheduleTable(p printer) {
	s := r.schedSeeded
	if s == nil {
		return
	}
	perClaim := s.Seeded / max(s.Claims, 1)
	p("### A schedule's run over %d scheduled snapshots (snapkeeper)", s.Seeded)
	p("")
	p("One fresh control plane. The schedule component first starts over nothing (its baseline memory) and stops. Then")
	p("the schedule is created (`%s`, keepLast %d; its next time a minute ahead) and %d ready VolumeSnapshots of it are", s.Cron, s.KeepLast, s.Seeded)
	p("seeded as in the cold start, %d for each of %d bound claims, an hour apart, with the schedule's label, claim and", perClaim, s.Claims)
	p("`snapkeeper.io/scheduled-time` annotation. The binder and the CSI side start over them; once the schedule's time")
	p("has passed and they are idle, the schedule component starts: its first sync runs that missed time (%d creates) and", s.Claims)
	p("applies the retention to every claim's %d (one delete each; one more when the claim's new snapshot is ready, so that", perClaim)
	p("the writes stay few and the figures are the decisions'). Idle syncs: the schedule's annotations are touched %d times,", idlePokes)
	p("each after the sync before, with nothing to cut, delete or write; each sync's time is the component's")
	p("`workqueue_work_duration_seconds{%s}`.", scheduleQueue)
	p("")
	p("| | %s |", s.System.Label)
	p("|---|---|")
	if s.Err != nil {
		p("| FAILED | %s |", oneLine(s.Err.Error()))
	}
	if s.Seed.Took > 0 {
		p("| seeding %d snapshots (with contents and backend snapshots) | %s (%.0f writes/s) |", s.Seeded, secs(s.Seed.Took), s.Seed.Writes/s.Seed.Took.Seconds())
	}
	if s.Start.Serving > 0 {
		p("| binder + CSI side over them: serving / idle after their start | %s / %s |", secs(s.Start.Serving), secs(s.Start.Idle))
	}
	if s.Err == nil {
		p("| schedule component: caches synced (/readyz) after its start | %s |", secs(s.Serving))
		p("| **first sync done** (status.lastScheduleTime is the missed time), after its start | **%s** (its time in the work queue: %s over %.0f sync(s)) |", secs(s.FirstSync), secs(s.FirstWork.Sum), s.FirstWork.Syncs)
		p("| run ready, retention done (contents and backend snapshots gone), after its start | %s |", secs(s.Converged))
		p("| snapshots cut / deleted (what keepLast %d says) / kept | %d / %d (%d) / %d |", s.KeepLast, s.Cut, s.Deleted, s.ExpectedDeletes, s.Kept)
		p("| every claim keeps exactly its %d newest | yes |", s.KeepLast)
		p("| **idle sync over %d scheduled snapshots**: median / max of %d | **%s** / %s |", s.Kept, len(s.IdleSyncs), ms(s.idleMedian()), ms(s.idleMax()))
		p("| syncs until retention was done and writes stopped: count, mean | %.0f, %s |", s.AllWork.Syncs, ms(s.AllWork.mean()))
		p("| requests the schedule component sent (GET: gets, lists and watches) | %s |", listing(s.Requests, ", ", func(k string, v float64) string { return fmt.Sprintf("%s %.0f", k, v) }))
		p("| API writes of every controller in that window | %s |", writeList(s.Window.Writes))
		p("| CSI calls in that window | %s |", callCounts(s.Window.Calls))
		p("| **schedule component peak RSS** (over none; per scheduled snapshot) / RSS at the end | **%s** (%s; %s) / %s |", mib(s.SchedHWMkB), mib(s.BaselinekB), kib(s.bytesPerSnapshot()), mib(s.SchedRSSkB))
		p("| binder + CSI side peak RSS | %s |", mib(s.OtherkB))
	}
	p("")
	for _, n := range s.Notes {
		p("- %s.", oneLine(n))
	}
	p("")
}

func (s *seededScheduleResult) idleMedian() time.Duration {
	if len(s.IdleSyncs) == 0 {
		return 0
	}
	return s.IdleSyncs[len(s.IdleSyncs)/2]
}

func (s *seededScheduleResult) idleMax() time.Duration {
	if len(s.IdleSyncs) == 0 {
		return 0
	}
	return s.IdleSyncs[len(s.IdleSyncs)-1]
}

// scheduleAnalysis gives the schedule stage's figures in a line per system,
// how the community pair compares, and the run over seeded snapshots.
func (r *report) scheduleAnalysis(p printer) {
	var ours *scheduleResult
	for _, s := range r.schedules {
		head := fmt.Sprintf("- Schedules, %d claims, %s:", s.N, s.System.Label)
		if s.Err != nil {
			p("%s FAILED (%s).", head, oneLine(s.Err.Error()))
			continue
		}
		if s.System.ID == sysOurs {
			ours = s
		}
		from := "its first create"
		if s.scheduled() {
			from = "its scheduled time"
		}
		floorNote := ""
		if s.measured() {
			floorNote = fmt.Sprintf(" (%.1f× its CRD-priced write floor)", ratio(s.Run1.Duration, floor(s.Run1, s.Ceiling, true)))
		}
		p("%s run 1 all-ready %s after %s%s, %s API writes per snapshot with the create; run 1's snapshots gone (backend included) %s after run 2 was all ready.",
			head, secs(s.Run1.Duration), from, floorNote, per(s.sent(s.Run1).Total(isNotEvent), s.N), secs(s.Gone))
	}
	for _, s := range r.schedules {
		if ours == nil || s == ours || s.Err != nil || s.scheduled() {
			continue
		}
		p("- Schedules: %s took %.1f× snapkeeper's time to all-ready (run 1) and %.1f× to delete run 1 once run 2 was ready.",
			s.System.Label, ratio(s.Run1.Duration, ours.Run1.Duration), ratio(s.Gone, ours.Gone))
	}
	s := r.schedSeeded
	switch {
	case s == nil:
	case s.Err != nil:
		p("- A schedule's run over %d scheduled snapshots: FAILED (%s).", s.Seeded, oneLine(s.Err.Error()))
	default:
		p("- A schedule's run over %d scheduled snapshots of %d claims: first sync (%d cut, retention over all of them) done %s after the component started;"+
			" an idle sync takes %s (median of %d); peak RSS %s, %s per scheduled snapshot; retention deleted %d (keepLast %d says %d) and kept the %d newest of every claim.",
			s.Seeded, s.Claims, s.Cut, secs(s.FirstSync), ms(s.idleMedian()), len(s.IdleSyncs), mib(s.SchedHWMkB), kib(s.bytesPerSnapshot()),
			s.Deleted, s.KeepLast, s.ExpectedDeletes, s.KeepLast)
	}
}

// scheduleFailures are the schedule stages' failures for the report's list.
func (r *report) scheduleFailures() []string {
	var out []string
	for _, s := range r.schedules {
		if s.Err != nil {
			out = append(out, fmt.Sprintf("schedules %s (%d claims): %v", s.System.ID, s.N, s.Err))
		}
	}
	if s := r.schedSeeded; s != nil && s.Err != nil {
		out = append(out, fmt.Sprintf("schedule over %d seeded snapshots: %v", s.Seeded, s.Err))
	}
	return out
}

// scheduleWriteResources are the resources any system wrote in the
// schedule stage (creates and deletes included), sorted.
func scheduleWriteResources(rs []*scheduleResult) []string {
	seen := map[string]bool{}
	for _, s := range rs {
		for _, ph := range []phase{s.Run1, s.Run2} {
			for k, v := range s.sent(ph).ByKey {
				if v > 0 {
					seen[k.Resource] = true
				}
			}
		}
	}
	return sortedKeys(seen)
}
