package main

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// steadyResult is a system started over M ready snapshots: a restart over
// the snapshots it made itself (-steady-m), or a cold start over snapshots
// seeded directly in the API server (-cold-start-m).
type steadyResult struct {
	System   *system
	M        int
	Direct   bool          // cold start over seeded snapshots
	Idle     time.Duration // the least window after the start
	FillTime time.Duration // restart: time for the system to make the M snapshots ready
	Seed     seedStats     // cold start: how they were seeded
	// Baseline is the same system started with no snapshot on the same
	// control plane, for the memory per cached snapshot.
	Baseline    startWindow
	Start       startWindow // the measured start over the M snapshots
	RSSBeforekB int64       // restart: the first processes, all cached, before the restart
	StillReady  int
	// PlaneRSSkB, PlaneHWMkB: kube-apiserver + etcd at the end.
	PlaneRSSkB, PlaneHWMkB int64
	Notes                  []string
	Err                    error
}

// bytesPerSnapshot is the controllers' peak RSS over the M snapshots less
// their peak with none, per snapshot (its VolumeSnapshot and content).
func (s *steadyResult) bytesPerSnapshot() float64 {
	if s.M == 0 || s.Baseline.HWMkB == 0 {
		return 0
	}
	return float64(s.Start.HWMkB-s.Baseline.HWMkB) * 1024 / float64(s.M)
}

type steadyOptions struct {
	m, createConc, seedConc int
	idle, quiet             time.Duration
	keep                    bool
}

// startTimeout bounds a start over m objects.
func startTimeout(m int) time.Duration { return 2*time.Minute + time.Duration(m)*2*time.Millisecond }

// runRestart fills a fresh control plane with M ready snapshots made by sys
// itself, then restarts sys and measures the start.
func runRestart(ctx context.Context, sys *system, o steadyOptions) *steadyResult {
	res := &steadyResult{System: sys, M: o.m, Idle: o.idle}
	res.Err = restart(ctx, sys, o, res)
	return res
}

func restart(ctx context.Context, sys *system, o steadyOptions, res *steadyResult) (err error) {
	tag := "steady " + sys.ID
	b, err := newBed(ctx, tag, "steady-"+sys.ID, o.keep)
	if err != nil {
		return err
	}
	defer b.close(&err)
	logf("[%s] binding %d PVCs", tag, o.m)
	if err := prepare(ctx, b.env, o.m); err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	if err := b.startDriver(driverOptions(false, "")); err != nil {
		return err
	}
	timeout := 2*time.Minute + time.Duration(o.m)*sys.perSnapshotBudget
	if res.Baseline, err = b.startMeasured(ctx, sys, o.quiet, 0, timeout); err != nil {
		return fmt.Errorf("first start: %w", err)
	}
	w, err := startWatcher(ctx, b.env)
	if err != nil {
		return err
	}
	defer w.stop()
	logf("[%s] creating %d VolumeSnapshots (timeout %s)", tag, o.m, timeout)
	start := time.Now()
	if err := createSnapshots(ctx, b.cl, o.m, o.createConc); err != nil {
		return fmt.Errorf("create snapshots: %w", err)
	}
	if err := w.waitFor(ctx, timeout, fmt.Sprintf("%d ready snapshots", o.m), func() (bool, error) {
		_, ready, _ := w.counts()
		return ready == o.m, nil
	}, b.exited); err != nil {
		_, ready, _ := w.counts()
		return fmt.Errorf("%d of %d snapshots ready: %w", ready, o.m, err)
	}
	res.FillTime = time.Since(start)
	if _, err := b.api.WaitQuiet(ctx, o.quiet, timeout); err != nil {
		return err
	}
	st, err := readProcs(b.run.pids())
	if err != nil {
		return err
	}
	res.RSSBeforekB = st.RSSkB
	logf("[%s] %d ready in %s; restarting the controllers, then at least %s", tag, o.m, res.FillTime.Round(time.Millisecond), o.idle)
	b.stopSystem()
	if res.Start, err = b.startMeasured(ctx, sys, o.quiet, o.idle, startTimeout(o.m)); err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	return res.check(ctx, b)
}

// runColdStart seeds one control plane with M ready snapshots and starts
// each system over it in turn; before seeding, each system is started once
// over nothing (its baseline memory). A system that writes changes what the
// next one starts over: its result says so.
func runColdStart(ctx context.Context, systems []*system, o steadyOptions) (out []*steadyResult) {
	for _, sys := range systems {
		out = append(out, &steadyResult{System: sys, M: o.m, Direct: true, Idle: o.idle})
	}
	b, err := newBed(ctx, "cold start", "cold-start", o.keep)
	if err == nil {
		err = coldStart(ctx, b, o, out)
	}
	failed := err
	for _, r := range out {
		if r.Err == nil && err != nil {
			r.Err = err
		}
		if failed == nil {
			failed = r.Err
		}
	}
	if b != nil {
		b.close(&failed) // keeps the logs when any system failed
	}
	return out
}

func coldStart(ctx context.Context, b *bed, o steadyOptions, out []*steadyResult) error {
	if err := b.startDriver(driverOptions(false, "")); err != nil {
		return err
	}
	for _, r := range out {
		logf("[cold start] %s over no snapshot (baseline)", r.System.ID)
		var err error
		if r.Baseline, err = b.startMeasured(ctx, r.System, o.quiet, 0, startTimeout(0)); err != nil {
			return fmt.Errorf("%s over no snapshot: %w", r.System.ID, err)
		}
		b.stopSystem()
	}
	seed, err := seedReady(ctx, b, o.m, o.seedConc)
	if err != nil {
		return err
	}
	var wrote []string
	for _, r := range out {
		r.Seed = seed
		r.Notes = append(r.Notes, wrote...)
		logf("[cold start] %s over %d ready snapshots", r.System.ID, o.m)
		if r.Start, r.Err = b.startMeasured(ctx, r.System, o.quiet, o.idle, startTimeout(o.m)); r.Err == nil {
			r.Err = r.check(ctx, b)
		}
		if n := r.Start.Writes.Total(nil); n > 0 {
			wrote = append(wrote, fmt.Sprintf("started after %s had written %.0f times over the same snapshots", r.System.Label, n))
		}
		if r.Err != nil && b.run != nil {
			withRefusals(b.run, &r.Err)
		}
		b.stopSystem()
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}

// check counts the snapshots still ready after the start (listing in
// pages) and records the control plane's memory.
func (s *steadyResult) check(ctx context.Context, b *bed) error {
	opts := metav1.ListOptions{Limit: 5000}
	s.StillReady = 0
	for {
		l, err := b.env.Snap.SnapshotV1().VolumeSnapshots(benchNamespace).List(ctx, opts)
		if err != nil {
			return err
		}
		for _, vs := range l.Items {
			if vs.Status != nil && vs.Status.ReadyToUse != nil && *vs.Status.ReadyToUse {
				s.StillReady++
			}
		}
		if opts.Continue = l.Continue; opts.Continue == "" {
			break
		}
	}
	if ps, err := readProcs(b.plane); err == nil {
		s.PlaneRSSkB, s.PlaneHWMkB = ps.RSSkB, ps.HWMkB
	}
	if s.StillReady != s.M {
		return fmt.Errorf("only %d of %d snapshots are still ready after the start", s.StillReady, s.M)
	}
	s.Notes = append(s.Notes, refusals(b.run)...)
	return b.exited()
}
