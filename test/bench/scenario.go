package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

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
	Waits    waitSums      // our controllers' and the API server's wait histograms, summed over the window (waitsum.go)
	Busy     busy          // CPU of the machine and each process from the first request to all-ready / all-gone
	Profiles profileSet    // -profile: CPU profile files per process, first request to writes stopped
}

// scenarioResult is the create/delete scenario of one system.
type scenarioResult struct {
	System       *system
	Run          int        // 1..repeats
	Tag          string     // names the run's files (profiles)
	RestHeap     profileSet // -profile: our processes' heap once all were ready and writes stopped
	N            int
	Ceiling      ceilings // writes/s on this control plane
	Create       phase
	Delete       phase
	PeakRSSkB    int64
	PlanePeakkB  int64              // kube-apiserver + etcd, peak RSS over the run
	OurMetrics   map[string]float64 // ours only: the controller's own counters after the run
	Notes        []string           // observations (not failures)
	Err          error              // the run failed: not ready, leftovers, crash
	LeftInDriver int
	// Seeded runs (-scale above -scale-dynamic-max) start over N ready
	// snapshots made directly in the API server: no create phase; Start
	// is the system's start over them, Seed how they were made.
	Seeded  bool
	Seed    seedStats
	Start   startWindow
	Waiting *waitStats // -csi-ready-after: the create phase while the driver said not ready
}

type scenarioOptions struct {
	n, createConc           int
	ceilingOps, ceilingConc int
	quiet                   time.Duration
	keep                    bool
	csiLatency              bool
	csiReadyAfter           string // "5s-30s": the driver answers not ready for a while
	seeded                  bool   // make the N snapshots ready directly (see scenarioResult.Seeded)
	seedConc                int
	idle                    time.Duration // seeded: the least window after the start
	profile                 bool          // -profile: take the phases' profiles (scale runs)
}

// runScenario starts a fresh control plane, measures its write ceiling, runs
// the system through create-all/delete-all, and stops everything.
func runScenario(ctx context.Context, sys *system, o scenarioOptions) *scenarioResult {
	res := &scenarioResult{System: sys, N: o.n, Seeded: o.seeded, Tag: runTag(sys, o)}
	res.Err = scenario(ctx, sys, o, res)
	return res
}

func scenario(ctx context.Context, sys *system, o scenarioOptions, res *scenarioResult) (err error) {
	b, err := newBed(ctx, sys.ID, sys.ID, o.keep)
	if err != nil {
		return err
	}
	defer b.close(&err)
	if o.ceilingOps > 0 {
		logf("[%s] write ceiling: %d ConfigMaps, then VolumeSnapshots, created+patched from %d goroutines", sys.ID, o.ceilingOps, o.ceilingConc)
		if res.Ceiling, err = measureCeilings(ctx, b.cl, o.ceilingOps, o.ceilingConc); err != nil {
			return err
		}
		logf("[%s] ceiling %.0f writes/s (ConfigMaps), %.0f writes/s (VolumeSnapshots)", sys.ID, res.Ceiling.ConfigMaps, res.Ceiling.Snapshots)
	}
	if err := b.startDriver(driverOptions(o.csiLatency, o.csiReadyAfter)); err != nil {
		return err
	}
	timeout := 2*time.Minute + time.Duration(o.n)*sys.perSnapshotBudget
	var w *watcher
	if o.seeded {
		if w, err = seededStart(ctx, b, sys, o, res, timeout); err != nil {
			return err
		}
	} else {
		logf("[%s] binding %d PVCs", sys.ID, o.n)
		if err := prepare(ctx, b.env, o.n); err != nil {
			return fmt.Errorf("prepare: %w", err)
		}
		if _, err := b.startSystem(sys, startOpts{}); err != nil {
			return err
		}
		if w, err = startWatcher(ctx, b.env); err != nil {
			return err
		}
	}
	defer w.stop()
	mark, err := b.mark(ctx, o.quiet)
	if err != nil {
		return err
	}
	if !o.seeded {
		if mark, err = createPhase(ctx, b, w, sys, o, res, mark, timeout); err != nil {
			return err
		}
	}
	if err := deletePhase(ctx, b, w, sys, o, res, mark, timeout); err != nil {
		return err
	}
	st, err := readProcs(b.run.pids())
	if err != nil {
		return err
	}
	res.PeakRSSkB = st.HWMkB
	if ps, err := readProcs(b.plane); err == nil {
		res.PlanePeakkB = ps.HWMkB
	}
	if res.OurMetrics, err = ourMetrics(ctx, b.run); err != nil {
		return err
	}
	res.Notes = append(res.Notes, refusals(b.run)...)
	return b.exited()
}

// createPhase creates the N snapshots at once and waits until every one is
// ready and writes stopped.
func createPhase(ctx context.Context, b *bed, w *watcher, sys *system, o scenarioOptions, res *scenarioResult, m *mark, timeout time.Duration) (*mark, error) {
	var waits *waitRecorder
	if o.csiReadyAfter != "" {
		waits = startWaitRecorder(ctx, w, b.drv)
		defer waits.stop() // finish stops it too; this covers a failed phase
	}
	logf("[%s] creating %d VolumeSnapshots (timeout %s)", sys.ID, o.n, timeout)
	clock := startPhase(b, &res.Create)
	prof := startProfiles(b, o.profile, res.Tag, "create")
	defer prof.stop() // a failed phase
	if err := createSnapshots(ctx, b.cl, o.n, o.createConc); err != nil {
		return nil, fmt.Errorf("create snapshots: %w", err)
	}
	clock.issued()
	err := w.waitFor(ctx, timeout, fmt.Sprintf("%d ready snapshots", o.n), func() (bool, error) {
		_, ready, _ := w.counts()
		return ready == o.n, nil
	}, b.exited)
	clock.stop(b, w, createStages)
	if err != nil {
		_, ready, _ := w.counts()
		return nil, fmt.Errorf("%d of %d snapshots ready: %w; first errors: %s", ready, o.n, err, strings.Join(w.errorsSeen(3), "; "))
	}
	logf("[%s] all %d ready in %s; waiting for writes to stop", sys.ID, o.n, res.Create.Duration.Round(time.Millisecond))
	if m, err = m.close(ctx, &res.Create, timeout); err != nil {
		return nil, err
	}
	res.Create.Profiles = prof.collect(res)
	if o.profile {
		res.RestHeap = heapAtRest(ctx, b, res)
	}
	if waits != nil {
		if res.Waiting, err = waits.finish(ctx, o.csiReadyAfter); err != nil {
			return nil, err
		}
	}
	if res.Create.Events, err = eventsByReason(ctx, b.env); err != nil {
		return nil, err
	}
	if held, err := pvcsWithSnapshotFinalizer(ctx, b.env); err != nil {
		return nil, err
	} else if held > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("%d PVCs still hold pvc-as-source-protection after every snapshot was ready and writes stopped", held))
	}
	return m, nil
}

// phaseClock times a phase from its first request (startPhase).
type phaseClock struct {
	ph    *phase
	busy  busyMark
	start time.Time
}

// startPhase notes the load average and the CPU counters, then starts the
// clock of ph: call it right before the phase's first request.
func startPhase(b *bed, ph *phase) *phaseClock {
	ph.Load = loadAvg()
	return &phaseClock{ph: ph, busy: markBusy(b), start: time.Now()}
}

// issued records how long the phase's requests took to send.
func (c *phaseClock) issued() { c.ph.Issued = time.Since(c.start) }

// stop records the phase's duration, the CPU it used and when snapshots
// reached stages.
func (c *phaseClock) stop(b *bed, w *watcher, stages []string) {
	c.ph.Duration = time.Since(c.start)
	c.ph.Busy = c.busy.since(b)
	c.ph.Stages = w.timeline.summary(c.start, stages)
}

// deletePhase deletes the N snapshots at once and waits until every
// snapshot, content and backend snapshot is gone and writes stopped.
func deletePhase(ctx context.Context, b *bed, w *watcher, sys *system, o scenarioOptions, res *scenarioResult, m *mark, timeout time.Duration) error {
	logf("[%s] deleting %d VolumeSnapshots", sys.ID, o.n)
	clock := startPhase(b, &res.Delete)
	prof := startProfiles(b, o.profile, res.Tag, "delete")
	defer prof.stop() // a failed phase
	if err := deleteSnapshots(ctx, b.cl, o.n, o.createConc); err != nil {
		return fmt.Errorf("delete snapshots: %w", err)
	}
	clock.issued()
	err := w.waitFor(ctx, timeout, "every snapshot, content and backend snapshot gone", func() (bool, error) {
		snaps, _, contents := w.counts()
		if snaps > 0 || contents > 0 {
			return false, nil
		}
		left, err := b.drv.GetCreated(ctx)
		return len(left) == 0, err
	}, b.exited)
	clock.stop(b, w, deleteStages)
	if err != nil {
		snaps, _, contents := w.counts()
		left, _ := b.drv.GetCreated(ctx)
		res.LeftInDriver = len(left)
		return fmt.Errorf("after deletion %d snapshots, %d contents and %d backend snapshots remain: %w", snaps, contents, len(left), err)
	}
	logf("[%s] all deleted in %s; waiting for writes to stop", sys.ID, res.Delete.Duration.Round(time.Millisecond))
	if _, err = m.close(ctx, &res.Delete, timeout); err != nil {
		return err
	}
	res.Delete.Profiles = prof.collect(res)
	events, err := eventsByReason(ctx, b.env)
	if err != nil {
		return err
	}
	res.Delete.Events = framework.DiffCounts(events, res.Create.Events)
	left, err := b.drv.GetCreated(ctx)
	if err != nil {
		return err
	}
	if res.LeftInDriver = len(left); len(left) > 0 {
		return fmt.Errorf("%d backend snapshots left in the driver after deletion", len(left))
	}
	return nil
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
	waits    waitSums
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
	if m.waits, err = m.api.scrapeAPIWaits(ctx); err != nil {
		return err
	}
	ours, err := scrapeOurWaits(ctx, m.run)
	if err != nil {
		return err
	}
	for k, v := range ours {
		m.waits[k] = v
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
	p.Calls = framework.DiffCounts(next.calls, m.calls)
	p.CPU = next.cpu - m.cpu
	p.PlaneCPU = next.planeCPU - m.planeCPU
	p.BenchCPU = next.benchCPU - m.benchCPU
	p.Pressure = next.press.sub(m.press)
	p.Waits = framework.DiffCounts(next.waits, m.waits)
	return next, nil
}
