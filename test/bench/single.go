package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// The "one snapshot alone" stage: the latency of a single snapshot on an
// idle control plane, next to the latency of the single API write its chain
// of writes is made of. The scenario measures throughput (N at once); this
// measures how close one snapshot gets to the sum of its sequential writes.

const (
	// singleWriteNamespace holds the objects patched to price one write;
	// they are deleted before any controller starts, so nothing acts on them.
	singleWriteNamespace = "bench-single-write"
	// singleWrites is how many sequential patches price one write.
	singleWrites = 100
	// singleWarmup patches are sent first and not counted: the first
	// requests of a fresh client pay its connection and discovery.
	singleWarmup = 5
	// singleCreateWrites and singleDeleteWrites are the cost model's writes
	// of one snapshot (docs: "Cost model"), the user's create or delete not
	// counted.
	singleCreateWrites = 9
	singleDeleteWrites = 4
	// singleTimeout bounds each wait for one snapshot: far above what one
	// snapshot on an idle plane takes, even at QPS 5.
	singleTimeout = time.Minute
)

// singleResult is the stage of one system.
type singleResult struct {
	System *system
	N      int             // snapshots asked for
	Ready  []time.Duration // per snapshot: create sent -> the watch shows readyToUse
	Gone   []time.Duration // per snapshot: delete sent -> snapshot and content gone, driver empty
	// CRDWrite and ConfigMapWrite are sequential merge patches of one
	// VolumeSnapshot and one ConfigMap, measured before the controllers
	// start: the price of one write as a controller experiences it on this
	// plane (minus APF, from which the admin is exempt).
	CRDWrite, ConfigMapWrite []time.Duration
	// CreateStages and DeleteStages are, per timeline stage, the time from
	// each snapshot's create (delete) to the watch seeing that stage.
	CreateStages, DeleteStages map[string][]time.Duration
	Load                       string // load average when the snapshots began
	Err                        error
}

// runSingleStage runs -single snapshots one after the other for each of
// -single-systems, each on a fresh control plane.
func runSingleStage(ctx context.Context, o options, rep *report, oursArgs []string, flush func()) error {
	if o.single <= 0 || ctx.Err() != nil {
		return nil
	}
	systems, err := pick(o.singleSystems, o.skipCommunity, oursArgs)
	if err != nil {
		return err
	}
	eachSystem(ctx, "single ", systems, func(sys *system) error {
		logf("[single %s] %d sequential snapshots", sys.ID, o.single)
		r := &singleResult{System: sys, N: o.single, CreateStages: map[string][]time.Duration{}, DeleteStages: map[string][]time.Duration{}}
		r.Err = single(ctx, sys, o, r)
		rep.single = append(rep.single, r)
		flush()
		return r.Err
	})
	return nil
}

// single prices one write on a fresh plane, then starts the system with the
// plain driver and one bound PVC and takes res.N snapshots of it in turn.
func single(ctx context.Context, sys *system, o options, res *singleResult) (err error) {
	tag := "single " + sys.ID
	b, err := newBed(ctx, tag, "single-"+sys.ID, o.keep)
	if err != nil {
		return err
	}
	defer b.close(&err)
	if err := priceOneWrite(ctx, b.cl, res); err != nil {
		return fmt.Errorf("one write: %w", err)
	}
	logf("[%s] one write p50: VolumeSnapshot %s, ConfigMap %s", tag, ms1(pctl(res.CRDWrite, 50)), ms1(pctl(res.ConfigMapWrite, 50)))
	if err := b.startDriver(driverOptions(false, "")); err != nil {
		return err
	}
	if err := prepare(ctx, b.env, 1); err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	if _, err := b.startSystem(sys, startOpts{}); err != nil {
		return err
	}
	w, err := startWatcher(ctx, b.env)
	if err != nil {
		return err
	}
	defer w.stop()
	// The controllers' start-up writes must not queue in front of the
	// first snapshot (Leases are not counted as writes).
	if _, err := b.api.WaitQuiet(ctx, o.quiet, 5*time.Minute); err != nil {
		return fmt.Errorf("before the first snapshot: %w", err)
	}
	res.Load = loadAvg()
	for i := 0; i < res.N; i++ {
		if err := oneSnapshot(ctx, b, w, fmt.Sprintf("single-%03d", i), res); err != nil {
			return fmt.Errorf("snapshot %d of %d: %w", i+1, res.N, err)
		}
	}
	logf("[%s] create -> ready p50 %s, delete -> gone p50 %s", tag, ms1(pctl(res.Ready, 50)), ms1(pctl(res.Gone, 50)))
	return b.exited()
}

// priceOneWrite creates one VolumeSnapshot and one ConfigMap in a namespace
// of their own and merge-patches each singleWrites times, one request after
// the other, changing a label every time (a patch that changes nothing is
// not written to etcd). The snapshot is deleted again before any
// controller starts.
func priceOneWrite(ctx context.Context, cl *clients, res *singleResult) error {
	probes, err := newWriteProbes(ctx, cl, singleWriteNamespace)
	if err != nil {
		return err
	}
	const name = "one-write"
	for _, k := range []struct {
		probe writeProbe
		into  *[]time.Duration
	}{{probes.configMaps, &res.ConfigMapWrite}, {probes.snapshots, &res.CRDWrite}} {
		if err := k.probe.create(ctx, name); err != nil {
			return err
		}
		if *k.into, err = timePatches(ctx, func(ctx context.Context, patch []byte) error { return k.probe.patch(ctx, name, patch) }); err != nil {
			return fmt.Errorf("%s: %w", k.probe.kind, err)
		}
	}
	return probes.removeSnapshots(ctx)
}

// timePatches sends singleWarmup uncounted, then singleWrites timed patches
// one after the other, each setting a label to a new value.
func timePatches(ctx context.Context, send func(context.Context, []byte) error) ([]time.Duration, error) {
	out := make([]time.Duration, 0, singleWrites)
	for i := 0; i < singleWarmup+singleWrites; i++ {
		patch := []byte(fmt.Sprintf(`{"metadata":{"labels":{"bench-write":"w%d"}}}`, i))
		start := time.Now()
		if err := send(ctx, patch); err != nil {
			return nil, err
		}
		if i >= singleWarmup {
			out = append(out, time.Since(start))
		}
	}
	return out, nil
}

// oneSnapshot creates the snapshot name of the bound PVC, waits until the
// watch shows it ready, deletes it and waits until it, its content and the
// backend snapshot are gone, and adds both times to res. The times are the
// watcher's own (its informer handlers stamp each stage as the event
// arrives), not when the wait loop noticed: no polling in the figures.
func oneSnapshot(ctx context.Context, b *bed, w *watcher, name string, res *singleResult) error {
	vss := b.cl.snap.SnapshotV1().VolumeSnapshots(benchNamespace)
	created := time.Now()
	if _, err := vss.Create(ctx, framework.DynamicSnapshot(benchNamespace, name, pvcName(0), nil), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create: %w", err)
	}
	if err := w.waitFor(ctx, singleTimeout, name+" ready", func() (bool, error) {
		_, ok := w.timeline.at(stageSnapshotReady, name)
		return ok, nil
	}, b.exited); err != nil {
		return fmt.Errorf("not ready: %w; errors seen: %v", err, w.errorsSeen(3))
	}
	ready, _ := w.timeline.at(stageSnapshotReady, name)
	res.Ready = append(res.Ready, ready.Sub(created))
	addStages(w.timeline, name, created, createStages, res.CreateStages)

	deleted := time.Now()
	if err := vss.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	gone, err := waitGone(ctx, b, w, name)
	if err != nil {
		return err
	}
	res.Gone = append(res.Gone, gone.Sub(deleted))
	addStages(w.timeline, name, deleted, deleteStages, res.DeleteStages)
	return nil
}

// waitGone waits until the snapshot and its content are gone from the
// watch and the driver holds no snapshot, and returns when that was. The
// driver is asked only once both objects are gone: a content loses its
// finalizer only after DeleteSnapshot succeeded, so the driver is empty by
// then and the last of the two watch events is the time; a driver found
// still holding the snapshot (a system that broke that order) moves the
// time to the check that found it empty.
func waitGone(ctx context.Context, b *bed, w *watcher, name string) (time.Time, error) {
	var at time.Time
	lagging := false
	err := w.waitFor(ctx, singleTimeout, name+", its content and its backend snapshot gone", func() (bool, error) {
		snap, ok1 := w.timeline.at(stageSnapshotGone, name)
		content, ok2 := w.timeline.at(stageContentGone, name)
		if !ok1 || !ok2 {
			return false, nil
		}
		left, err := b.drv.GetCreated(ctx)
		if err != nil {
			return false, err
		}
		if len(left) > 0 {
			lagging = true
			return false, nil
		}
		at = snap
		if content.After(at) {
			at = content
		}
		if lagging {
			at = time.Now()
		}
		return true, nil
	}, b.exited)
	if err != nil {
		left, _ := b.drv.GetCreated(ctx)
		return at, fmt.Errorf("not gone (%d backend snapshots left): %w", len(left), err)
	}
	return at, nil
}

// addStages appends, for each stage name has reached, its time since from.
func addStages(t *timeline, name string, from time.Time, stages []string, into map[string][]time.Duration) {
	for _, s := range stages {
		if at, ok := t.at(s, name); ok && !at.Before(from) {
			into[s] = append(into[s], at.Sub(from))
		}
	}
}

// pctl is the q-th percentile of ds by nearest rank (p0 the least, p100
// the greatest), 0 when empty.
func pctl(ds []time.Duration, q int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[max(0, min(rank(len(s), q), len(s))-1)]
}

// rank is the 1-based nearest rank of the q-th percentile of n samples.
func rank(n, q int) int { return (n*q + 99) / 100 }

// ms1 formats d in milliseconds with one decimal.
func ms1(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
