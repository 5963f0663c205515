package main

import (
	"context"
)

// runStages runs the benchmark's parts in order, the long new ones (scale,
// cold start) last so that the report holds the others early; flush
// rewrites the report after each run.
func runStages(ctx context.Context, o options, rep *report, oursArgs []string, flush func()) error {
	systems, err := pick(o.systems, o.skipCommunity, oursArgs)
	if err != nil {
		return err
	}
	base := scenarioOptions{n: o.n, createConc: o.createConc, ceilingOps: o.ceilingOps, ceilingConc: o.ceilingConc, quiet: o.quiet,
		keep: o.keep, csiLatency: o.csiLatency, csiReadyAfter: o.csiReadyAfter, seedConc: o.seedConc, idle: o.steadyIdle}
	runRepeated(ctx, "", systems, o.repeats, func(sys *system) (scenarioOptions, bool) {
		so := base
		if sys.ID == sysCommunityDefault && o.communityDefaultN > 0 {
			so.n = o.communityDefaultN
		}
		return so, true
	}, func(r *scenarioResult) {
		rep.scenarios = append(rep.scenarios, r)
		flush()
	})
	if err := runSingleStage(ctx, o, rep, oursArgs, flush); err != nil {
		return err
	}
	if err := runWaitingStage(ctx, o, rep, oursArgs, base, flush); err != nil {
		return err
	}
	so := steadyOptions{m: o.steadyM, createConc: o.createConc, seedConc: o.seedConc, idle: o.steadyIdle, quiet: o.quiet, keep: o.keep}
	if o.steadyM > 0 && ctx.Err() == nil {
		steadySystems, err := pick(o.steadySystems, o.skipCommunity, oursArgs)
		if err != nil {
			return err
		}
		eachSystem(ctx, "steady ", steadySystems, func(sys *system) error {
			if sys.ID == sysCommunityDefault {
				logf("[steady] community-default would need hours to fill %d snapshots at QPS 5; skipped", o.steadyM)
				return nil
			}
			r := runRestart(ctx, sys, so)
			rep.steady = append(rep.steady, r)
			flush()
			return r.Err
		})
	}
	if o.groups > 0 && ctx.Err() == nil {
		groupSystems, err := pick(o.groupSystems, o.skipCommunity, oursArgs)
		if err != nil {
			return err
		}
		eachSystem(ctx, "groups ", groupSystems, func(sys *system) error {
			r := runGroups(ctx, sys, groupOptions{groups: o.groups, size: o.groupSize, conc: o.createConc,
				ceilingOps: o.ceilingOps, ceilingConc: o.ceilingConc, quiet: o.quiet, keep: o.keep})
			rep.groups = append(rep.groups, r)
			flush()
			return r.Err
		})
	}
	if err := runScheduleStage(ctx, o, rep, oursArgs, flush); err != nil {
		return err
	}
	if o.admission && ctx.Err() == nil {
		rep.admission = runAdmission(ctx, admissionOptions{requests: o.admissionRequests, apiRequests: o.admissionAPIReqs, levels: []int{1, 16, 64}, keep: o.keep})
		if rep.admission.Err != nil {
			logf("[admission] FAILED: %v", rep.admission.Err)
		}
		flush()
	}
	if err := runScaleStage(ctx, o, rep, oursArgs, base, flush); err != nil {
		return err
	}
	if o.coldStartM > 0 && ctx.Err() == nil {
		coldSystems, err := pick(o.coldStartSystems, o.skipCommunity, oursArgs)
		if err != nil {
			return err
		}
		so.m = o.coldStartM
		rep.cold = runColdStart(ctx, coldSystems, so)
		for _, r := range rep.cold {
			if r.Err != nil {
				logf("[cold start %s] FAILED: %v", r.System.ID, r.Err)
			}
		}
		flush()
	}
	runSeededScheduleStage(ctx, o, rep, oursArgs, flush)
	return nil
}

// runWaitingStage runs -waiting-systems -repeats times each, interleaved,
// with the slow driver: latency, and readiness -waiting after the cut. No
// ceiling measurement: the times are the driver's, not the API server's.
func runWaitingStage(ctx context.Context, o options, rep *report, oursArgs []string, base scenarioOptions, flush func()) error {
	if o.waiting == "" || ctx.Err() != nil {
		return nil
	}
	systems, err := pick(o.waitingSystems, o.skipCommunity, oursArgs)
	if err != nil {
		return err
	}
	base.ceilingOps, base.csiLatency, base.csiReadyAfter = 0, true, o.waiting
	if o.waitingN > 0 {
		base.n = o.waitingN
	}
	runRepeated(ctx, "waiting ", systems, o.repeats, func(sys *system) (scenarioOptions, bool) {
		if sys.ID == sysCommunityDefault {
			logf("[waiting] community-default at QPS 5 measures its client limits, not its polling; skipped")
			return base, false
		}
		return base, true
	}, func(r *scenarioResult) {
		rep.waiting = append(rep.waiting, r)
		flush()
	})
	return nil
}

// runRepeated runs each of systems repeats times (at least once),
// interleaved, with the options optsFor gives it (false skips the system),
// and hands each result to add; tag prefixes the log lines.
func runRepeated(ctx context.Context, tag string, systems []*system, repeats int,
	optsFor func(*system) (scenarioOptions, bool), add func(*scenarioResult)) {
	repeats = max(repeats, 1)
	for i := 0; i < repeats && ctx.Err() == nil; i++ {
		eachSystem(ctx, tag, systems, func(sys *system) error {
			so, ok := optsFor(sys)
			if !ok {
				return nil
			}
			logf("[%s%s] run %d of %d", tag, sys.ID, i+1, repeats)
			r := runScenario(ctx, sys, so)
			r.Run = i + 1
			add(r)
			return r.Err
		})
	}
}

// eachSystem calls run for each of systems in turn until ctx ends, and logs
// the failure run returns under tag (which ends in a space when not empty).
func eachSystem(ctx context.Context, tag string, systems []*system, run func(*system) error) {
	for _, sys := range systems {
		if err := run(sys); err != nil {
			logf("[%s%s] FAILED: %v", tag, sys.ID, err)
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// runScaleStage runs -scale for -scale-systems with the plain driver, each
// run with its own write ceilings (its floor); a main-scenario median at
// the same N (same driver) is reused.
func runScaleStage(ctx context.Context, o options, rep *report, oursArgs []string, base scenarioOptions, flush func()) error {
	ns, err := parseScale(o.scale)
	if err != nil || len(ns) == 0 || ctx.Err() != nil {
		return err
	}
	systems, err := pick(o.scaleSystems, o.skipCommunity, oursArgs)
	if err != nil {
		return err
	}
	base.csiLatency, base.csiReadyAfter = false, ""
	reuse := func(id string, n int) *scenarioResult {
		if o.csiLatency || o.csiReadyAfter != "" {
			return nil
		}
		if s := rep.scenario(id); s != nil && s.N == n {
			return s
		}
		return nil
	}
	runScale(ctx, systems, scaleOptions{ns: ns, dynamicMax: o.scaleDynamicMax, repeats: o.scaleRepeats, base: base}, reuse, func(r *scenarioResult) {
		rep.scaleAll = append(rep.scaleAll, r)
		rep.scale = scaleMedians(rep.scaleAll)
		flush()
	})
	return nil
}

// runScheduleStage runs the schedule stage (-schedule-claims) for each of
// -schedule-systems, one fresh control plane each.
func runScheduleStage(ctx context.Context, o options, rep *report, oursArgs []string, flush func()) error {
	if o.scheduleClaims <= 0 || ctx.Err() != nil {
		return nil
	}
	systems, err := pick(o.scheduleSystems, o.skipCommunity, oursArgs)
	if err != nil {
		return err
	}
	eachSystem(ctx, "schedules ", systems, func(sys *system) error {
		if sys.ID == sysCommunityDefault {
			logf("[schedules] community-default at QPS 5 measures its client limits; skipped")
			return nil
		}
		r := runSchedules(ctx, sys, scheduleOptions{claims: o.scheduleClaims, conc: o.createConc, ceilingOps: o.ceilingOps,
			ceilingConc: o.ceilingConc, quiet: o.quiet, keep: o.keep, oursArgs: oursArgs})
		rep.schedules = append(rep.schedules, r)
		flush()
		return r.Err
	})
	return nil
}

// runSeededScheduleStage runs ours over -schedule-seeded scheduled
// snapshots of -schedule-claims claims.
func runSeededScheduleStage(ctx context.Context, o options, rep *report, oursArgs []string, flush func()) {
	if o.scheduleClaims <= 0 || o.scheduleSeeded <= 0 || ctx.Err() != nil {
		return
	}
	ours := allSystems(oursArgs)[0]
	rep.schedSeeded = runSeededSchedule(ctx, ours, seededScheduleOptions{claims: o.scheduleClaims, seeded: o.scheduleSeeded,
		seedConc: o.seedConc, quiet: o.quiet, keep: o.keep, oursArgs: oursArgs})
	if rep.schedSeeded.Err != nil {
		logf("[schedule over seeded] FAILED: %v", rep.schedSeeded.Err)
	}
	flush()
}
