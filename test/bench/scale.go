package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The scale runs: the create/delete scenario at several N for a few
// systems, to show how each figure grows with N. Up to -scale-dynamic-max
// the snapshots are created through the system as in the main scenario;
// above it they are made directly as ready objects (seedReady) and the
// system starts over them, which is the steady-state part of the scenario
// at that size; the delete phase is the same on both paths.

type scaleOptions struct {
	ns         []int
	dynamicMax int
	repeats    int             // runs per N and system, at least 1
	base       scenarioOptions // n and seeded are set per run
}

// parseScale reads -scale ("500,5000,20000"), sorted ascending.
func parseScale(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("-scale %q: want positive snapshot counts such as 500,5000,20000", s)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// runScale runs every N for every system, smallest N first, and all of it
// again o.repeats times, so that a slow spell of the machine falls on
// different sizes and systems; reuse returns a run of the main scenario at
// the same N and system (counted as the first run, not run again).
func runScale(ctx context.Context, systems []*system, o scaleOptions, reuse func(id string, n int) *scenarioResult, done func(*scenarioResult)) {
	repeats := max(o.repeats, 1)
	for run := 1; run <= repeats; run++ {
		for _, n := range o.ns {
			for _, sys := range systems {
				if ctx.Err() != nil {
					return
				}
				if r := reuse(sys.ID, n); r != nil && n <= o.dynamicMax && run == 1 {
					logf("[scale %s] N=%d: the main scenario's median run", sys.ID, n)
					done(r)
					continue
				}
				so := o.base
				so.n, so.seeded, so.profile = n, n > o.dynamicMax, profileDir != ""
				logf("[scale %s] N=%d (%s), run %d of %d", sys.ID, n, pathOf(so.seeded), run, repeats)
				r := runScenario(ctx, sys, so)
				r.Run = run
				if r.Err != nil {
					logf("[scale %s] N=%d, run %d FAILED: %v", sys.ID, n, run, r.Err)
				}
				done(r)
			}
		}
	}
}

// scaleMedians keeps one run per system and N (scaleGroups), in the order
// of their first runs: the median by time to all-ready (start to idle when
// seeded) of the runs that succeeded (the lower middle one of an even
// count), or the first run when none did.
func scaleMedians(all []*scenarioResult) []*scenarioResult {
	groups := scaleGroups(all)
	first := func(g scaleGroup) int { return slices.Index(all, g.runs[0]) }
	slices.SortStableFunc(groups, func(a, b scaleGroup) int { return cmp.Compare(first(a), first(b)) })
	out := make([]*scenarioResult, 0, len(groups))
	for _, g := range groups {
		ok := g.ok()
		if len(ok) == 0 {
			out = append(out, g.runs[0])
			continue
		}
		slices.SortStableFunc(ok, func(a, b *scenarioResult) int { return cmp.Compare(a.createTime(), b.createTime()) })
		out = append(out, ok[(len(ok)-1)/2])
	}
	return out
}

func pathOf(seeded bool) string {
	if seeded {
		return "seeded ready, then start + delete"
	}
	return "created through the system"
}

// seededStart seeds the N snapshots ready and starts the system over them
// (a scale run above -scale-dynamic-max); the watcher starts after the
// seeding so that it does not record it.
func seededStart(ctx context.Context, b *bed, sys *system, o scenarioOptions, res *scenarioResult, timeout time.Duration) (*watcher, error) {
	var err error
	if res.Seed, err = seedReady(ctx, b, o.n, o.seedConc); err != nil {
		return nil, err
	}
	w, err := startWatcher(ctx, b.env)
	if err != nil {
		return nil, err
	}
	logf("[%s] starting over %d ready snapshots", sys.ID, o.n)
	if res.Start, err = b.startMeasured(ctx, sys, o.quiet, o.idle, max(timeout, startTimeout(o.n))); err != nil {
		w.stop()
		return nil, err
	}
	return w, nil
}
