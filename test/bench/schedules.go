package main

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/pkg/schedclient"
	"github.com/snapkeeper/snapkeeper/pkg/schedule"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

// The schedule stage: one hourly SnapshotSchedule over N bound claims with
// retention keepLast 1, on a fresh control plane per system. Ours runs the
// schedule component (a process of its own beside the binder and the CSI
// side): the schedule's minute is set to the next full minute, so its run
// cuts N snapshots "at the top of the hour" (run 1); once they are all
// ready its minute is moved to the next full minute again (run 2), and the
// retention deletes run 1's N snapshots as run 2's turn ready. The
// community pair has no schedule: the benchmark sends the same N creates
// at once for each run and deletes run 1's N at once when run 2 is all
// ready, which is what snapscheduler would do (it creates and deletes the
// VolumeSnapshots itself). Writes of run 2 and the retention share one
// window (ours deletes while run 2 turns ready).

type scheduleOptions struct {
	claims, conc            int
	ceilingOps, ceilingConc int
	quiet                   time.Duration
	keep                    bool
	oursArgs                []string
}

// scheduleResult is the schedule stage of one system.
type scheduleResult struct {
	System  *system
	N       int
	Ceiling ceilings
	// Run1: from the scheduled time (ours) or the first create
	// (community) until all N are ready; its writes until quiet. Issued:
	// until all N VolumeSnapshots existed.
	Run1 phase
	// Run2: Duration from the second scheduled time (or first create)
	// until run 2 was all ready; Issued as in Run1; the writes of run 2
	// and of deleting run 1, until quiet.
	Run2 phase
	// Gone: from run 2 all-ready until run 1's snapshots, contents and
	// backend snapshots were gone; Total: from run 2's start until then.
	Gone, Total time.Duration
	// FirstDelete: from run 2's start until the first of run 1's
	// snapshots was being deleted (-1: not before run 2 was all ready).
	FirstDelete time.Duration
	PeakRSSkB   int64 // every controller process, summed
	SchedRSSkB  int64 // ours: the schedule component alone (peak)
	Cron        string
	Notes       []string
	Err         error
}

// scheduled reports whether the system cut through a schedule (ours).
func (r *scheduleResult) scheduled() bool { return r.System.ours() }

// sent are the writes that cut and delete the snapshots of a window: the
// controllers', plus for the community pair the benchmark's own creates
// and deletes (snapscheduler's), which ours' schedule component sends itself.
func (r *scheduleResult) sent(ph phase) writeCounts {
	if r.scheduled() {
		return ph.Writes
	}
	return addCounts(ph.Writes, ph.Own)
}

func runSchedules(ctx context.Context, sys *system, o scheduleOptions) *scheduleResult {
	res := &scheduleResult{System: sys, N: o.claims, FirstDelete: -1}
	res.Err = scheduleScenario(ctx, sys, o, res)
	return res
}

func scheduleScenario(ctx context.Context, sys *system, o scheduleOptions, res *scheduleResult) (err error) {
	tag := "schedules " + sys.ID
	b, err := newBed(ctx, tag, "schedules-"+sys.ID, o.keep)
	if err != nil {
		return err
	}
	defer b.close(&err)
	if o.ceilingOps > 0 {
		if res.Ceiling, err = b.ceilings(ctx, o.ceilingOps, o.ceilingConc); err != nil {
			return err
		}
	}
	logf("[%s] binding %d PVCs", tag, o.claims)
	if err := prepare(ctx, b.env, o.claims); err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	if err := b.startDriver(driverOptions(false, "")); err != nil {
		return err
	}
	if _, err := b.startSystem(sys, startOpts{}); err != nil {
		return err
	}
	timeout := 2*time.Minute + time.Duration(o.claims)*sys.perSnapshotBudget
	var sched *framework.Component
	if res.scheduled() {
		if sched, _, err = startScheduleProcess(b, sys, o.oursArgs, time.Minute); err != nil {
			return err
		}
	}
	w, err := startWatcher(ctx, b.env)
	if err != nil {
		return err
	}
	defer w.stop()
	sc, err := scheduleClient(b)
	if err != nil {
		return err
	}

	// Run 1: the schedule fires at the next full minute.
	t1 := nextMinute(15 * time.Second)
	if res.scheduled() {
		res.Cron = cronAt(t1)
		logf("[%s] schedule %q (keepLast 1) over %d claims; its run is at %s", tag, res.Cron, o.claims, t1.Format("15:04:05"))
		if _, err := sc.Create(ctx, hourlyAt(t1, 1), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create the schedule: %w", err)
		}
	} else {
		t1 = time.Now().Truncate(time.Minute) // names only: the community pair has no schedule
	}
	m, err := b.mark(ctx, o.quiet)
	if err != nil {
		return err
	}
	if _, err := runPhase(ctx, b, w, res, o, t1, &res.Run1, timeout, nil); err != nil {
		return fmt.Errorf("run 1: %w", err)
	}
	if res.scheduled() {
		res.checkLast(ctx, sc, t1)
	}
	logf("[%s] run 1: all %d ready %s after its start; waiting for writes to stop", tag, o.claims, secs(res.Run1.Duration))
	if _, err := m.close(ctx, &res.Run1, timeout); err != nil {
		return err
	}

	// Run 2, and the deletion of run 1.
	t2 := t1.Add(time.Minute)
	if res.scheduled() {
		t2 = nextMinute(15 * time.Second)
		if err := reschedule(ctx, sc, t2); err != nil {
			return fmt.Errorf("move the schedule to %s: %w", t2.Format("15:04"), err)
		}
		logf("[%s] schedule moved to %q: run 2 at %s", tag, cronAt(t2), t2.Format("15:04:05"))
	}
	if m, err = b.mark(ctx, o.quiet); err != nil { // after the schedule's own status write
		return err
	}
	readyAt, err := runPhase2(ctx, b, w, res, o, t1, t2, timeout)
	if err != nil {
		return err
	}
	if err := waitRunGone(ctx, b, w, res, o, t1, readyAt, timeout); err != nil {
		return err
	}
	if res.scheduled() {
		res.checkLast(ctx, sc, t2)
	}
	logf("[%s] run 1 gone %s after run 2 was all ready; waiting for writes to stop", tag, secs(res.Gone))
	if _, err := m.close(ctx, &res.Run2, timeout); err != nil {
		return err
	}
	if st, err := readProcs(b.run.pids()); err == nil {
		res.PeakRSSkB = st.HWMkB
	}
	if sched != nil {
		if st, err := readProc(sched.Proc.Pid()); err == nil {
			res.SchedRSSkB = st.HWMkB
		}
	}
	res.Notes = append(res.Notes, refusals(b.run)...)
	return b.exited()
}

// runPhase times one run: ours waits for the scheduled time t and lets the
// schedule cut; the community pair gets the N creates at once (names as the
// schedule would give them). It returns when all N are ready, and when the
// run started; seen (when not nil) is called on each change meanwhile.
func runPhase(ctx context.Context, b *bed, w *watcher, res *scheduleResult, o scheduleOptions, t time.Time, ph *phase, timeout time.Duration, seen func(start time.Time)) (time.Time, error) {
	if res.scheduled() {
		if time.Now().After(t) {
			return t, fmt.Errorf("the scheduled time %s passed before the window opened (the control plane was not quiet in time)", t.Format("15:04:05"))
		}
		if err := sleepUntil(ctx, t); err != nil {
			return t, err
		}
	}
	clock := startPhase(b, ph)
	if res.scheduled() {
		clock.start = t // the clock runs from the scheduled time
	} else {
		logf("[%s] creating %d VolumeSnapshots at once", b.tag, o.claims)
		if err := createRun(ctx, b, o.claims, o.conc, t); err != nil {
			return clock.start, fmt.Errorf("create snapshots: %w", err)
		}
	}
	cut := false
	err := w.waitFor(ctx, timeout, fmt.Sprintf("%d ready snapshots of the run", o.claims), func() (bool, error) {
		exist, ready, _ := runCounts(w, t)
		if !cut && exist == o.claims {
			cut = true
			ph.Issued = time.Since(clock.start)
		}
		if seen != nil {
			seen(clock.start)
		}
		return ready == o.claims, nil
	}, b.exited)
	clock.stop(b, w, createStages)
	if err != nil {
		exist, ready, _ := runCounts(w, t)
		return clock.start, fmt.Errorf("%d of %d snapshots cut, %d ready: %w", exist, o.claims, ready, err)
	}
	return clock.start, nil
}

// runPhase2 is run 2 (at t2), noting when the first of run 1's snapshots
// was being deleted; it returns when run 2 was all ready.
func runPhase2(ctx context.Context, b *bed, w *watcher, res *scheduleResult, o scheduleOptions, t1, t2 time.Time, timeout time.Duration) (time.Time, error) {
	seen := func(start time.Time) {
		if res.FirstDelete >= 0 {
			return
		}
		if exist, _, deleting := runCounts(w, t1); deleting > 0 || exist < o.claims {
			res.FirstDelete = time.Since(start)
		}
	}
	start, err := runPhase(ctx, b, w, res, o, t2, &res.Run2, timeout, seen)
	if err != nil {
		return time.Time{}, fmt.Errorf("run 2: %w", err)
	}
	logf("[%s] run 2: all %d ready %s after its start", b.tag, o.claims, secs(res.Run2.Duration))
	return start.Add(res.Run2.Duration), nil
}

// waitRunGone waits until run 1's snapshots, their contents and backend
// snapshots are gone (the community pair: after the benchmark deleted
// them at once) and records the times.
func waitRunGone(ctx context.Context, b *bed, w *watcher, res *scheduleResult, o scheduleOptions, t1, readyAt time.Time, timeout time.Duration) error {
	if !res.scheduled() {
		logf("[%s] deleting run 1's %d VolumeSnapshots at once", b.tag, o.claims)
		if err := deleteRun(ctx, b, o.claims, o.conc, t1); err != nil {
			return fmt.Errorf("delete run 1: %w", err)
		}
	}
	err := w.waitFor(ctx, timeout, "run 1's snapshots, contents and backend snapshots gone", func() (bool, error) {
		exist, _, _ := runCounts(w, t1)
		if exist > 0 || len(w.contents.GetStore().List()) > o.claims {
			return false, nil
		}
		left, err := b.drv.GetCreated(ctx)
		return len(left) == o.claims, err
	}, b.exited)
	res.Gone = time.Since(readyAt)
	res.Total = res.Gone + res.Run2.Duration
	if err != nil {
		exist, _, _ := runCounts(w, t1)
		left, _ := b.drv.GetCreated(ctx)
		return fmt.Errorf("deleting run 1: %d of its snapshots, %d contents in all and %d backend snapshots in all remain (want 0, %d, %d): %w",
			exist, len(w.contents.GetStore().List()), len(left), o.claims, o.claims, err)
	}
	return nil
}

// checkLast notes when the schedule's status does not show the run at t.
func (r *scheduleResult) checkLast(ctx context.Context, sc schedclient.Interface, t time.Time) {
	s, err := sc.Get(ctx, benchSchedule, metav1.GetOptions{})
	switch {
	case err != nil:
		r.Notes = append(r.Notes, "reading the schedule: "+err.Error())
	case s.Status.LastScheduleTime == nil || !s.Status.LastScheduleTime.Time.Equal(t):
		r.Notes = append(r.Notes, fmt.Sprintf("the schedule's status.lastScheduleTime is %v after the run of %s", s.Status.LastScheduleTime, t.UTC().Format(time.RFC3339)))
	}
}

// createRun creates one VolumeSnapshot per claim at once, named as the
// schedule would name the snapshots of time t.
func createRun(ctx context.Context, b *bed, n, conc int, t time.Time) error {
	return parallel(ctx, n, conc, func(ctx context.Context, i int) error {
		vs := framework.DynamicSnapshot(benchNamespace, schedule.SnapshotName(benchSchedule, pvcName(i), t), pvcName(i), nil)
		_, err := b.cl.snap.SnapshotV1().VolumeSnapshots(benchNamespace).Create(ctx, vs, metav1.CreateOptions{})
		return err
	})
}

// deleteRun deletes the snapshots createRun made for time t, at once.
func deleteRun(ctx context.Context, b *bed, n, conc int, t time.Time) error {
	return parallel(ctx, n, conc, func(ctx context.Context, i int) error {
		err := b.cl.snap.SnapshotV1().VolumeSnapshots(benchNamespace).Delete(ctx, schedule.SnapshotName(benchSchedule, pvcName(i), t), metav1.DeleteOptions{})
		if errors.IsNotFound(err) {
			return nil
		}
		return err
	})
}
