package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/snapkeeper/snapkeeper/pkg/csi/csitest"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

// phase is one measured half of the scenario (create or delete).
type phase struct {
	Duration time.Duration    // from the first request to all-ready / all-gone
	Issued   time.Duration    // time to send the n requests
	Writes   writeCounts      // API writes of the controllers (bench's own removed)
	Own      writeCounts      // the benchmark's own writes in the window
	Codes    writeCounts      // all writes in the window by HTTP code (ByCode only)
	Calls    map[string]int64 // CSI calls by method ("Method Code" for failures)
	CPU      time.Duration    // controllers' CPU time from start of phase to quiet
	PlaneCPU time.Duration    // kube-apiserver + etcd CPU in the same window
	Events   map[string]int   // events by Kind/Reason, counted at the end of the phase
	Tail     time.Duration    // from all-ready/all-gone until writes stopped
	Stages   map[string]stageTimes
	BenchCPU time.Duration // this process (its requests and informers)
	Load     string        // /proc/loadavg when the phase started
	Pressure pressure      // 429s, APF rejections, client-side throttling
}

// scenarioResult is the create/delete scenario of one system.
type scenarioResult struct {
	System       *system
	Run          int // 1..repeats
	N            int
	Ceiling      ceilings // writes/s on this control plane
	Create       phase
	Delete       phase
	PeakRSSkB    int64
	OurMetrics   map[string]float64 // ours only: the controller's own counters after the run
	Notes        []string           // observations (not failures)
	Err          error              // the run failed: not ready, leftovers, crash
	LeftInDriver int
}

type scenarioOptions struct {
	n, createConc           int
	ceilingOps, ceilingConc int
	quiet                   time.Duration
	keep                    bool
	csiLatency              bool
	csiReadyAfter           string // "5s-30s": the driver answers not ready for a while
}

// runScenario starts a fresh control plane, measures its write ceiling, runs
// the system through create-all/delete-all, and stops everything.
func runScenario(ctx context.Context, sys *system, o scenarioOptions) *scenarioResult {
	res := &scenarioResult{System: sys, N: o.n}
	res.Err = scenario(ctx, sys, o, res)
	return res
}

func scenario(ctx context.Context, sys *system, o scenarioOptions, res *scenarioResult) (err error) {
	logf("[%s] starting a control plane", sys.ID)
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
	plane := append(findPids("bin/kube-apiserver", env.Dir), findPids("bin/etcd", env.Dir)...)

	logf("[%s] write ceiling: %d ConfigMaps, then VolumeSnapshots, created+patched from %d goroutines", sys.ID, o.ceilingOps, o.ceilingConc)
	if res.Ceiling, err = measureCeilings(ctx, cl, o.ceilingOps, o.ceilingConc); err != nil {
		return err
	}
	logf("[%s] ceiling %.0f writes/s (ConfigMaps), %.0f writes/s (VolumeSnapshots); binding %d PVCs", sys.ID, res.Ceiling.ConfigMaps, res.Ceiling.Snapshots, o.n)
	if err := prepare(ctx, env, o.n); err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	dir, err := mkdir(env, sys.ID)
	if err != nil {
		return err
	}
	drv, err := framework.StartCSIDriver(dir, driverOptions(o.csiLatency, o.csiReadyAfter))
	if err != nil {
		return err
	}
	defer drv.Stop()
	run, err := sys.start(env, dir, drv.Socket)
	if err != nil {
		return fmt.Errorf("start %s: %w", sys.ID, err)
	}
	defer run.Stop()
	defer withRefusals(run, &err)
	w, err := startWatcher(ctx, env)
	if err != nil {
		return err
	}
	defer w.stop()
	timeout := 2*time.Minute + time.Duration(o.n)*sys.perSnapshotBudget

	// Create phase.
	mark, err := takeMark(ctx, api, cl, drv, run, plane, o.quiet)
	if err != nil {
		return err
	}
	logf("[%s] creating %d VolumeSnapshots (timeout %s)", sys.ID, o.n, timeout)
	res.Create.Load = loadAvg()
	start := time.Now()
	if err := createSnapshots(ctx, cl, o.n, o.createConc); err != nil {
		return fmt.Errorf("create snapshots: %w", err)
	}
	res.Create.Issued = time.Since(start)
	err = w.waitFor(ctx, timeout, fmt.Sprintf("%d ready snapshots", o.n), func() (bool, error) {
		_, ready, _ := w.counts()
		return ready == o.n, nil
	}, run.exited)
	res.Create.Duration = time.Since(start)
	res.Create.Stages = w.timeline.summary(start, createStages)
	if err != nil {
		_, ready, _ := w.counts()
		return fmt.Errorf("%d of %d snapshots ready: %w; first errors: %s", ready, o.n, err, strings.Join(w.errorsSeen(3), "; "))
	}
	logf("[%s] all %d ready in %s; waiting for writes to stop", sys.ID, o.n, res.Create.Duration.Round(time.Millisecond))
	if mark, err = mark.close(ctx, &res.Create, timeout); err != nil {
		return err
	}
	if res.Create.Events, err = eventsByReason(ctx, env); err != nil {
		return err
	}
	if held, err := pvcsWithSnapshotFinalizer(ctx, env); err != nil {
		return err
	} else if held > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("%d PVCs still hold pvc-as-source-protection after every snapshot was ready and writes stopped", held))
	}

	// Delete phase.
	logf("[%s] deleting %d VolumeSnapshots", sys.ID, o.n)
	res.Delete.Load = loadAvg()
	start = time.Now()
	if err := deleteSnapshots(ctx, cl, o.n, o.createConc); err != nil {
		return fmt.Errorf("delete snapshots: %w", err)
	}
	res.Delete.Issued = time.Since(start)
	err = w.waitFor(ctx, timeout, "every snapshot, content and backend snapshot gone", func() (bool, error) {
		snaps, _, contents := w.counts()
		if snaps > 0 || contents > 0 {
			return false, nil
		}
		left, err := drv.GetCreated(ctx)
		return len(left) == 0, err
	}, run.exited)
	res.Delete.Duration = time.Since(start)
	res.Delete.Stages = w.timeline.summary(start, deleteStages)
	if err != nil {
		snaps, _, contents := w.counts()
		left, _ := drv.GetCreated(ctx)
		res.LeftInDriver = len(left)
		return fmt.Errorf("after deletion %d snapshots, %d contents and %d backend snapshots remain: %w", snaps, contents, len(left), err)
	}
	logf("[%s] all deleted in %s; waiting for writes to stop", sys.ID, res.Delete.Duration.Round(time.Millisecond))
	if _, err = mark.close(ctx, &res.Delete, timeout); err != nil {
		return err
	}
	events, err := eventsByReason(ctx, env)
	if err != nil {
		return err
	}
	res.Delete.Events = subEvents(events, res.Create.Events)
	left, err := drv.GetCreated(ctx)
	if err != nil {
		return err
	}
	if res.LeftInDriver = len(left); len(left) > 0 {
		return fmt.Errorf("%d backend snapshots left in the driver after deletion", len(left))
	}
	st, err := readProcs(run.pids())
	if err != nil {
		return err
	}
	res.PeakRSSkB = st.HWMkB
	if res.OurMetrics, err = ourMetrics(ctx, run); err != nil {
		return err
	}
	res.Notes = append(res.Notes, refusals(run)...)
	return run.exited()
}

// mark is the state at the start of a measured window.
type mark struct {
	api      *apiServer
	cl       *clients
	drv      *framework.CSIDriver
	run      *running
	plane    []int
	quiet    time.Duration
	writes   writeCounts
	own      writeCounts
	calls    map[string]int64
	cpu      time.Duration
	planeCPU time.Duration
	benchCPU time.Duration
	press    pressure
}

// takeMark waits until nobody writes (so that start-up writes stay outside
// the window), then records every counter.
func takeMark(ctx context.Context, api *apiServer, cl *clients, drv *framework.CSIDriver, run *running, plane []int, quiet time.Duration) (*mark, error) {
	m := &mark{api: api, cl: cl, drv: drv, run: run, plane: plane, quiet: quiet}
	var err error
	if m.writes, err = api.WaitQuiet(ctx, quiet, 5*time.Minute); err != nil {
		return nil, fmt.Errorf("before the window: %w", err)
	}
	return m, m.record(ctx)
}

func (m *mark) record(ctx context.Context) error {
	m.own = m.cl.own.Snapshot()
	var err error
	if m.press, err = m.api.apiPressure(ctx); err != nil {
		return err
	}
	throttling(ctx, m.run, &m.press)
	if m.calls, err = csiCalls(ctx, m.drv); err != nil {
		return err
	}
	st, err := readProcs(m.run.pids())
	if err != nil {
		return err
	}
	m.cpu = st.CPU
	pst, _ := readProcs(m.plane)
	m.planeCPU = pst.CPU
	self, _ := readProc(os.Getpid())
	m.benchCPU = self.CPU
	return nil
}

// close waits until writes stop, fills p with the deltas since m and
// returns the mark for the next window.
func (m *mark) close(ctx context.Context, p *phase, timeout time.Duration) (*mark, error) {
	done := time.Now()
	writes, err := m.api.WaitQuiet(ctx, m.quiet, timeout)
	if err != nil {
		return nil, err
	}
	p.Tail = time.Since(done) - m.quiet
	if p.Tail < 0 {
		p.Tail = 0
	}
	next := &mark{api: m.api, cl: m.cl, drv: m.drv, run: m.run, plane: m.plane, quiet: m.quiet, writes: writes}
	if err := next.record(ctx); err != nil {
		return nil, err
	}
	all := writes.Sub(m.writes)
	p.Own = next.own.Sub(m.own)
	p.Writes = all.Sub(p.Own)
	p.Codes = all
	p.Calls = subCalls(next.calls, m.calls)
	p.CPU = next.cpu - m.cpu
	p.PlaneCPU = next.planeCPU - m.planeCPU
	p.BenchCPU = next.benchCPU - m.benchCPU
	p.Pressure = next.press.sub(m.press)
	return next, nil
}

// driverOptions gives the mock driver latency with -csi-latency, and with
// -csi-ready-after "min-max" snapshots that become ready only after a time
// between min and max (the mock's --ready-after, --ready-after-max).
func driverOptions(latency bool, readyAfter string) framework.CSIDriverOptions {
	var o framework.CSIDriverOptions
	if latency {
		o.Faults = &framework.Faults{Rules: []framework.FaultRule{
			{Method: "CreateSnapshot", Latency: csitest.Duration(200 * time.Millisecond)},
			{Method: "ListSnapshots", Latency: csitest.Duration(50 * time.Millisecond)},
		}}
	}
	if readyAfter != "" {
		lo, hi, _ := strings.Cut(readyAfter, "-")
		o.Args = append(o.Args, "--ready-after="+lo)
		if hi != "" {
			o.Args = append(o.Args, "--ready-after-max="+hi)
		}
	}
	return o
}

func subEvents(a, b map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range a {
		if d := v - b[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// stopEnv stops the control plane and removes its directory unless keep is
// set or the run failed.
func stopEnv(env *framework.Env, keep bool, err *error) {
	env.Stop()
	if keep || *err != nil {
		logf("logs kept in %s", env.Dir)
		return
	}
	os.RemoveAll(env.Dir)
}

// loadAvg is the 1-, 5- and 15-minute load average: the machine is shared.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s bench: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}
