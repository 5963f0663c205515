package main

import (
	"context"
	"fmt"
	"time"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// steadyResult is the restart of a system that holds m ready snapshots.
type steadyResult struct {
	System      *system
	M           int
	Idle        time.Duration
	FillTime    time.Duration    // time for the m snapshots to become ready
	RestartTime time.Duration    // from start of the new process(es) to ready
	Writes      writeCounts      // API writes from the restart to the end of the idle window
	Calls       map[string]int64 // CSI calls in the same window
	CPU         time.Duration    // new process(es), over the window
	RSSBeforekB int64            // the first process(es), all objects cached, before the restart
	RSSkB       int64            // the new process(es) at the end of the window
	HWMkB       int64            // their peak
	StillReady  int
	Err         error
}

type steadyOptions struct {
	m, createConc int
	idle, quiet   time.Duration
	keep          bool
}

func runSteady(ctx context.Context, sys *system, o steadyOptions) *steadyResult {
	res := &steadyResult{System: sys, M: o.m, Idle: o.idle}
	res.Err = steady(ctx, sys, o, res)
	return res
}

func steady(ctx context.Context, sys *system, o steadyOptions, res *steadyResult) (err error) {
	logf("[steady %s] starting a control plane; binding %d PVCs", sys.ID, o.m)
	env, err := framework.StartWith(ctx, planeOptions)
	if err != nil {
		return fmt.Errorf("control plane: %w", err)
	}
	defer stopEnv(env, o.keep, &err)
	cl, err := newClients(env)
	if err != nil {
		return err
	}
	api := newAPIServer(env)
	if err := prepare(ctx, env, o.m); err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	dir, err := mkdir(env, "steady-"+sys.ID)
	if err != nil {
		return err
	}
	drv, err := framework.StartCSIDriver(dir, framework.CSIDriverOptions{})
	if err != nil {
		return err
	}
	defer drv.Stop()
	run, err := sys.start(env, dir, drv.Socket)
	if err != nil {
		return fmt.Errorf("start %s: %w", sys.ID, err)
	}
	defer func() { run.Stop() }()
	w, err := startWatcher(ctx, env)
	if err != nil {
		return err
	}
	defer w.stop()
	timeout := 2*time.Minute + time.Duration(o.m)*sys.perSnapshotBudget

	logf("[steady %s] creating %d VolumeSnapshots (timeout %s)", sys.ID, o.m, timeout)
	start := time.Now()
	if err := createSnapshots(ctx, cl, o.m, o.createConc); err != nil {
		return fmt.Errorf("create snapshots: %w", err)
	}
	if err := w.waitFor(ctx, timeout, fmt.Sprintf("%d ready snapshots", o.m), func() (bool, error) {
		_, ready, _ := w.counts()
		return ready == o.m, nil
	}, run.exited); err != nil {
		_, ready, _ := w.counts()
		return fmt.Errorf("%d of %d snapshots ready: %w", ready, o.m, err)
	}
	res.FillTime = time.Since(start)
	if _, err := api.WaitQuiet(ctx, o.quiet, timeout); err != nil {
		return err
	}
	st, err := readProcs(run.pids())
	if err != nil {
		return err
	}
	res.RSSBeforekB = st.RSSkB

	logf("[steady %s] %d ready in %s; restarting the controllers, then %s idle", sys.ID, o.m, res.FillTime.Round(time.Millisecond), o.idle)
	run.Stop()
	before, err := api.Writes(ctx)
	if err != nil {
		return err
	}
	callsBefore, err := csiCalls(ctx, drv)
	if err != nil {
		return err
	}
	start = time.Now()
	if run, err = sys.start(env, dir, drv.Socket); err != nil {
		return fmt.Errorf("restart %s: %w", sys.ID, err)
	}
	res.RestartTime = time.Since(start)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(o.idle):
	}
	after, err := api.Writes(ctx)
	if err != nil {
		return err
	}
	callsAfter, err := csiCalls(ctx, drv)
	if err != nil {
		return err
	}
	res.Writes = after.Sub(before) // the benchmark writes nothing in this window
	res.Calls = subCalls(callsAfter, callsBefore)
	if st, err = readProcs(run.pids()); err != nil {
		return err
	}
	res.CPU, res.RSSkB, res.HWMkB = st.CPU, st.RSSkB, st.HWMkB
	snaps, err := listSnapshots(ctx, env)
	if err != nil {
		return err
	}
	for _, vs := range snaps {
		if vs.Status != nil && vs.Status.ReadyToUse != nil && *vs.Status.ReadyToUse {
			res.StillReady++
		}
	}
	if res.StillReady != o.m {
		return fmt.Errorf("only %d of %d snapshots are still ready after the restart", res.StillReady, o.m)
	}
	return run.exited()
}
