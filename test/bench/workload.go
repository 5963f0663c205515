package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapinformers "github.com/kubernetes-csi/external-snapshotter/client/v8/informers/externalversions"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

const (
	benchNamespace = "bench"
	className      = "bench-class"
)

// parallel runs fn(i) for i in [0,n) on at most conc goroutines and returns
// the first error.
func parallel(ctx context.Context, n, conc int, fn func(ctx context.Context, i int) error) error {
	if conc > n {
		conc = n
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var next atomic.Int64
	var once sync.Once
	var first error
	var wg sync.WaitGroup
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := fn(ctx, i); err != nil {
					once.Do(func() { first = err; cancel() })
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

func pvcName(i int) string  { return fmt.Sprintf("pvc-%05d", i) }
func snapName(i int) string { return fmt.Sprintf("snap-%05d", i) }

// prepare creates the namespace, n bound PVC/PV pairs of the mock driver
// and the driver's default class. None of this is inside a measured window.
func prepare(ctx context.Context, env *framework.Env, n int) error {
	return prepareClaims(ctx, env, n, func(ctx context.Context, i int) error {
		_, err := env.BindPVC(ctx, benchNamespace, pvcName(i), framework.PVCOptions{Driver: framework.MockDriverName})
		return err
	})
}

// prepareClaims creates the namespace, binds n claims there (bind binds
// the i-th) and creates the driver's default class.
func prepareClaims(ctx context.Context, env *framework.Env, n int, bind func(ctx context.Context, i int) error) error {
	if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNamespace}}, metav1.CreateOptions{}); err != nil && !errors.IsAlreadyExists(err) {
		return err
	}
	if err := parallel(ctx, n, 32, bind); err != nil {
		return err
	}
	class := framework.SnapshotClass(className, framework.MockDriverName, snapv1.VolumeSnapshotContentDelete, true)
	_, err := env.Snap.SnapshotV1().VolumeSnapshotClasses().Create(ctx, class, metav1.CreateOptions{})
	return err
}

// createSnapshots creates n VolumeSnapshots (one per PVC, default class)
// at once from conc goroutines.
func createSnapshots(ctx context.Context, cl *clients, n, conc int) error {
	return parallel(ctx, n, conc, func(ctx context.Context, i int) error {
		vs := framework.DynamicSnapshot(benchNamespace, snapName(i), pvcName(i), nil)
		_, err := cl.snap.SnapshotV1().VolumeSnapshots(benchNamespace).Create(ctx, vs, metav1.CreateOptions{})
		return err
	})
}

func deleteSnapshots(ctx context.Context, cl *clients, n, conc int) error {
	return parallel(ctx, n, conc, func(ctx context.Context, i int) error {
		err := cl.snap.SnapshotV1().VolumeSnapshots(benchNamespace).Delete(ctx, snapName(i), metav1.DeleteOptions{})
		if errors.IsNotFound(err) {
			return nil
		}
		return err
	})
}

// watcher keeps the snapshots and contents in informer caches (reads only:
// one LIST and one WATCH each) and signals every change.
type watcher struct {
	snaps    cache.SharedIndexInformer
	contents cache.SharedIndexInformer
	changed  chan struct{}
	stop     context.CancelFunc
	timeline *timeline
	// The counts are kept by the event handlers: waitFor asks for them
	// up to 200 times a second, and counting the caches each time would
	// make the benchmark's own CPU grow with N on the machine it measures.
	mu                     sync.Mutex
	nSnaps, nReady, nConts int
}

func startWatcher(ctx context.Context, env *framework.Env) (*watcher, error) {
	ctx, cancel := context.WithCancel(ctx)
	f := snapinformers.NewSharedInformerFactory(env.Snap, 0)
	w := &watcher{
		snaps:    f.Snapshot().V1().VolumeSnapshots().Informer(),
		contents: f.Snapshot().V1().VolumeSnapshotContents().Informer(),
		changed:  make(chan struct{}, 1),
		stop:     cancel,
		timeline: newTimeline(),
	}
	notify := func() {
		select {
		case w.changed <- struct{}{}:
		default:
		}
	}
	h := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.observe(nil, obj, false); notify() },
		UpdateFunc: func(old, obj any) { w.observe(old, obj, false); notify() },
		DeleteFunc: func(obj any) { w.observe(nil, obj, true); notify() },
	}
	for _, inf := range []cache.SharedIndexInformer{w.snaps, w.contents} {
		if _, err := inf.AddEventHandler(h); err != nil {
			cancel()
			return nil, err
		}
	}
	f.Start(ctx.Done())
	for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok {
			cancel()
			return nil, fmt.Errorf("informer of %v did not sync", typ)
		}
	}
	return w, nil
}

// observe notes obj on the timeline and in the counts; old is its earlier
// state (nil when it is new), gone says it was deleted.
func (w *watcher) observe(old, obj any, gone bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch o := obj.(type) {
	case *snapv1.VolumeSnapshot:
		w.timeline.observeSnapshot(o, gone)
		was := old != nil && isReady(old.(*snapv1.VolumeSnapshot))
		switch {
		case gone:
			w.nSnaps--
			if isReady(o) {
				w.nReady--
			}
		case old == nil:
			w.nSnaps++
			if isReady(o) {
				w.nReady++
			}
		case isReady(o) != was:
			if was {
				w.nReady--
			} else {
				w.nReady++
			}
		}
	case *snapv1.VolumeSnapshotContent:
		w.timeline.observeContent(o, gone)
		switch {
		case gone:
			w.nConts--
		case old == nil:
			w.nConts++
		}
	}
}

// counts returns (snapshots, ready snapshots, contents).
func (w *watcher) counts() (snaps, ready, contents int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.nSnaps, w.nReady, w.nConts
}

func isReady(vs *snapv1.VolumeSnapshot) bool {
	return vs.Status != nil && vs.Status.ReadyToUse != nil && *vs.Status.ReadyToUse
}

// errorsSeen lists snapshot and content status errors, for failure messages.
func (w *watcher) errorsSeen(max int) []string {
	var out []string
	for _, o := range w.snaps.GetStore().List() {
		vs := o.(*snapv1.VolumeSnapshot)
		if vs.Status != nil && vs.Status.Error != nil && vs.Status.Error.Message != nil && len(out) < max {
			out = append(out, fmt.Sprintf("VolumeSnapshot %s: %s", vs.Name, *vs.Status.Error.Message))
		}
	}
	return out
}

// waitFor re-evaluates cond on every change (at most every 5 ms) and every
// 200 ms, until it holds; check reports a fatal condition (a crashed
// controller) early.
func (w *watcher) waitFor(ctx context.Context, timeout time.Duration, what string, cond func() (bool, error), check func() error) error {
	deadline := time.After(timeout)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return fmt.Errorf("timed out after %s waiting for %s", timeout, what)
		case <-w.changed:
			time.Sleep(5 * time.Millisecond)
		case <-tick.C:
			if check != nil {
				if err := check(); err != nil {
					return err
				}
			}
		}
	}
}

// pvcsWithSnapshotFinalizer counts PVCs that still carry the snapshot
// source-protection finalizer.
func pvcsWithSnapshotFinalizer(ctx context.Context, env *framework.Env) (int, error) {
	list, err := env.Kube.CoreV1().PersistentVolumeClaims(benchNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range list.Items {
		for _, f := range p.Finalizers {
			if f == "snapshot.storage.kubernetes.io/pvc-as-source-protection" {
				n++
			}
		}
	}
	return n, nil
}

var benchKinds = map[string]bool{"VolumeSnapshot": true, "VolumeSnapshotContent": true, "PersistentVolumeClaim": true, "PersistentVolume": true, "VolumeSnapshotClass": true,
	"VolumeGroupSnapshot": true, "VolumeGroupSnapshotContent": true}

// eventsByReason counts event objects and their aggregated count by
// "Kind/Reason" in every namespace.
func eventsByReason(ctx context.Context, env *framework.Env) (map[string]int, error) {
	list, err := env.Kube.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, e := range list.Items {
		if !benchKinds[e.InvolvedObject.Kind] {
			continue // the API server's own events
		}
		c := int(e.Count)
		if c == 0 {
			c = 1
		}
		out[e.InvolvedObject.Kind+"/"+e.Reason] += c
	}
	return out, nil
}

// csiCalls returns the mock driver's calls by short method name, and the
// failed ones by "method code".
func csiCalls(ctx context.Context, d *framework.CSIDriver) (map[string]int64, error) {
	raw, err := d.GetCalls(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for method, codes := range raw {
		short := method
		if i := strings.LastIndexByte(method, '/'); i >= 0 {
			short = method[i+1:]
		}
		for code, n := range codes {
			out[short] += n
			if code != "OK" {
				out[short+" "+code] += n
			}
		}
	}
	return out, nil
}
