package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/snapkeeper/snapkeeper/pkg/schedclient"
	"github.com/snapkeeper/snapkeeper/pkg/schedule"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

// A schedule's run over M scheduled snapshots (ours only): M ready
// VolumeSnapshots of the schedule (label, claim, scheduled-time annotation,
// an hour apart, M/C per claim over C bound claims) are seeded with their
// contents and backend snapshots, the binder and the CSI side start over
// them, and then the schedule component starts, as a process of its own,
// after the schedule's minute passed: its first sync runs the missed time
// (C creates) and applies the retention over the M (keepLast M/C − 1: one
// delete per claim, then one more once the claim's new snapshot is ready,
// so that the writes stay few and the figures are of the decisions). What
// is measured: the time from its start until its first sync is done
// (status.lastScheduleTime), until the run is ready and retention has
// deleted what keepLast says (backend included), the time of idle syncs
// (the schedule touched, nothing to write: the decisions over every
// snapshot alone), its peak RSS, and every LIST request the API server
// served meanwhile (the component lists once, then reads its index).

// idlePokes is how many idle syncs are timed.
const idlePokes = 5

type seededScheduleOptions struct {
	claims, seeded, seedConc int
	quiet                    time.Duration
	keep                     bool
	oursArgs                 []string
}

// seededScheduleResult is the run over the seeded snapshots.
type seededScheduleResult struct {
	System                          *system
	Claims, Seeded, KeepLast        int
	Cron                            string
	Seed                            seedStats
	Start                           startWindow // the binder and the CSI side over the seeded snapshots
	BaselinekB                      int64       // the schedule component's peak RSS over no snapshot
	Serving, FirstSync, Converged   time.Duration
	FirstWork, AllWork              queueWork          // syncs until the first was done; all syncs of the window
	Window                          phase              // from the component's start until retention was done and writes stopped
	Requests                        map[string]float64 // the component's requests until retention was done, by HTTP method
	Cut, Deleted, ExpectedDeletes   int
	Kept                            int
	IdleSyncs                       []time.Duration
	SchedHWMkB, SchedRSSkB, OtherkB int64 // the schedule component (peak, at the end); binder + CSI side (peak)
	Notes                           []string
	Err                             error
}

// bytesPerSnapshot is the schedule component's peak RSS over the seeded
// snapshots less its peak over none, per seeded snapshot.
func (r *seededScheduleResult) bytesPerSnapshot() float64 {
	if r.Seeded == 0 || r.BaselinekB == 0 {
		return 0
	}
	return float64(r.SchedHWMkB-r.BaselinekB) * 1024 / float64(r.Seeded)
}

func runSeededSchedule(ctx context.Context, sys *system, o seededScheduleOptions) *seededScheduleResult {
	res := &seededScheduleResult{System: sys, Claims: o.claims, Seeded: o.seeded, KeepLast: max(1, o.seeded/o.claims-1)}
	res.Err = seededSchedule(ctx, sys, o, res)
	return res
}

func seededSchedule(ctx context.Context, sys *system, o seededScheduleOptions, res *seededScheduleResult) (err error) {
	tag := "schedule over seeded"
	b, err := newBed(ctx, tag, "schedule-seeded", o.keep)
	if err != nil {
		return err
	}
	defer b.close(&err)
	if err := b.startDriver(driverOptions(false, "")); err != nil {
		return err
	}
	// The component over nothing: its baseline memory.
	c, _, err := startScheduleProcess(b, sys, o.oursArgs, time.Minute)
	if err != nil {
		return fmt.Errorf("schedule component over nothing: %w", err)
	}
	time.Sleep(o.quiet)
	st, err := readProc(c.Proc.Pid())
	c.Proc.Stop(15 * time.Second)
	if err != nil {
		return err
	}
	res.BaselinekB = st.HWMkB

	// The schedule exists before its minute passes; nothing runs it yet.
	if _, err := b.env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNamespace}}, metav1.CreateOptions{}); err != nil && !errors.IsAlreadyExists(err) {
		return err
	}
	sc, err := scheduleClient(b)
	if err != nil {
		return err
	}
	at := nextMinute(15 * time.Second)
	res.Cron = cronAt(at)
	if _, err := sc.Create(ctx, hourlyAt(at, int32(res.KeepLast)), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create the schedule: %w", err)
	}
	if res.Seed, err = seedReadyAs(ctx, b, o.seeded, o.seedConc, func(i int) *snapv1.VolumeSnapshot {
		return seededScheduled(i, o.claims, at)
	}); err != nil {
		return err
	}
	logf("[%s] binding %d PVCs", tag, o.claims)
	if err := bindClaims(ctx, b.env, o.claims); err != nil {
		return fmt.Errorf("bind claims: %w", err)
	}
	logf("[%s] starting the binder and the CSI side over %d snapshots", tag, o.seeded)
	timeout := startTimeout(o.seeded) + time.Duration(4*o.claims)*sys.perSnapshotBudget
	if res.Start, err = b.startMeasured(ctx, sys, o.quiet, 0, startTimeout(o.seeded)); err != nil {
		return err
	}
	w, err := startWatcher(ctx, b.env)
	if err != nil {
		return err
	}
	defer w.stop()
	if err := sleepUntil(ctx, at.Add(time.Second)); err != nil {
		return err
	}
	m, err := b.mark(ctx, o.quiet)
	if err != nil {
		return err
	}
	logf("[%s] starting the schedule component (%q, keepLast %d) after its time %s passed", tag, res.Cron, res.KeepLast, at.Format("15:04"))
	start := time.Now()
	if c, res.Serving, err = startScheduleProcess(b, sys, o.oursArgs, startTimeout(o.seeded)); err != nil {
		return err
	}
	if err := pollUntil(ctx, timeout, b.exited, func() (bool, error) {
		s, err := sc.Get(ctx, benchSchedule, metav1.GetOptions{})
		return err == nil && s.Status.LastScheduleTime != nil && s.Status.LastScheduleTime.Time.Equal(at), err
	}); err != nil {
		return fmt.Errorf("first sync: %w", err)
	}
	res.FirstSync = time.Since(start)
	// The work queue records the sync's time once it returned, right
	// after its status write.
	if err := pollUntil(ctx, time.Minute, b.exited, func() (bool, error) {
		res.FirstWork, err = scheduleWork(ctx, c)
		return res.FirstWork.Syncs > 0, err
	}); err != nil {
		return fmt.Errorf("first sync's time: %w", err)
	}
	logf("[%s] first sync done %s after the start; waiting for the run and the retention", tag, secs(res.FirstSync))
	if err := res.waitRetention(ctx, b, w, at, timeout); err != nil {
		return err
	}
	res.Converged = time.Since(start)
	if _, err := m.close(ctx, &res.Window, timeout); err != nil {
		return err
	}
	if res.AllWork, err = scheduleWork(ctx, c); err != nil {
		return err
	}
	if res.Requests, err = componentRequests(ctx, c); err != nil {
		return err
	}
	if err := res.idleSyncs(ctx, b, c, sc); err != nil {
		return err
	}
	if st, err := readProc(c.Proc.Pid()); err == nil {
		res.SchedHWMkB, res.SchedRSSkB = st.HWMkB, st.RSSkB
	}
	if st, err := readProcs(b.run.pids()); err == nil {
		res.OtherkB = st.HWMkB - res.SchedHWMkB
	}
	res.Notes = append(res.Notes, refusals(b.run)...)
	return b.exited()
}

// seededScheduled is the i-th seeded snapshot: claim i mod claims, cut
// i/claims+1 hours before at, named, labelled and annotated as the
// schedule would have done.
func seededScheduled(i, claims int, at time.Time) *snapv1.VolumeSnapshot {
	claim, class := pvcName(i%claims), className
	t := at.Add(-time.Duration(i/claims+1) * time.Hour)
	vs := framework.DynamicSnapshot(benchNamespace, schedule.SnapshotName(benchSchedule, claim, t), claim, &class)
	vs.Labels = schedule.Labels(nil, benchSchedule, claim)
	vs.Annotations = schedule.Annotations(nil, t)
	return vs
}

// waitRetention waits until the run's snapshots are ready and every claim
// holds exactly its keepLast newest (the run's and the newest seeded), with
// the contents and backend snapshots of the rest gone.
func (r *seededScheduleResult) waitRetention(ctx context.Context, b *bed, w *watcher, at time.Time, timeout time.Duration) error {
	want := r.Claims * r.KeepLast
	// Every 250 ms, not on every change: counting walks the whole cache,
	// and the benchmark shares the cores with the component it measures.
	err := pollUntil(ctx, timeout, b.exited, func() (bool, error) {
		snaps, ready, contents := w.counts()
		if snaps != want || ready != want || contents != want {
			return false, nil
		}
		left, err := b.drv.GetCreated(ctx)
		return len(left) == want, err
	})
	snaps, ready, contents := w.counts()
	r.Cut, _, _ = runCounts(w, at)
	r.Kept, r.ExpectedDeletes = snaps, r.Seeded+r.Claims-want
	r.Deleted = r.Seeded + r.Cut - snaps
	if err != nil {
		left, _ := b.drv.GetCreated(ctx)
		return fmt.Errorf("retention: %d snapshots (%d ready), %d contents and %d backend snapshots, want %d of each: %w", snaps, ready, contents, len(left), want, err)
	}
	have := map[string]bool{}
	for _, o := range w.snaps.GetStore().List() {
		have[o.(*snapv1.VolumeSnapshot).Name] = true
	}
	var missing []string
	for c := 0; c < r.Claims; c++ {
		for j := 0; j < r.KeepLast; j++ {
			if name := schedule.SnapshotName(benchSchedule, pvcName(c), at.Add(-time.Duration(j)*time.Hour)); !have[name] {
				missing = append(missing, name)
			}
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("retention kept %d snapshots but not the %d newest of each claim: %d missing, such as %v", snaps, r.KeepLast, len(missing), missing[:min(3, len(missing))])
	}
	return nil
}

// idleSyncs touches the schedule (an annotation: no spec change, nothing
// to cut, delete or write) idlePokes times, each once the sync before is
// done, and records each sync's time from the component's work queue.
func (r *seededScheduleResult) idleSyncs(ctx context.Context, b *bed, c *framework.Component, sc schedclient.Interface) error {
	for i := 0; i < idlePokes; i++ {
		before, err := scheduleWork(ctx, c)
		if err != nil {
			return err
		}
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"bench.snapkeeper.io/touch":"%d"}}}`, i)
		if _, err := sc.Patch(ctx, benchSchedule, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("touch the schedule: %w", err)
		}
		var d queueWork
		if err := pollUntil(ctx, time.Minute, b.exited, func() (bool, error) {
			now, err := scheduleWork(ctx, c)
			d = now.sub(before)
			return d.Syncs > 0, err
		}); err != nil {
			return fmt.Errorf("idle sync %d: %w", i+1, err)
		}
		r.IdleSyncs = append(r.IdleSyncs, d.mean())
	}
	slices.Sort(r.IdleSyncs)
	return nil
}

// componentRequests is the HTTP requests the component sent to the API
// server since its start, by method (GET covers gets, lists and watches),
// from client-go's rest_client_requests_total in its /metrics.
func componentRequests(ctx context.Context, c *framework.Component) (map[string]float64, error) {
	samples, err := scrape(ctx, c.HTTPAddr, "rest_client_requests_total")
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, s := range samples {
		out[s.Labels["method"]] += s.Value
	}
	return out, nil
}
