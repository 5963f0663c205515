// Command writesonly is the benchmark's "empty controller" (system
// writes-only in test/bench): two processes, run like snapkeeper's binder
// and CSI side (--half=binder, --half=csi), that send exactly the API writes
// snapkeeper's two processes send for a dynamic VolumeSnapshot with a Delete
// class (docs/benchmarks-coldstart.md, "Cost model"): the same kinds, verbs,
// subresources, order and about the same object shapes, but with no logic
// beyond what makes each write follow the one before, no CSI calls and no
// events. Beside snapkeeper in the benchmark it shows what the API server
// alone needs to serve those writes.
//
// Writes per dynamic snapshot, create:
//
//	binder: (1) patch VolumeSnapshot: finalizers + spec.volumeSnapshotClassName,
//	        (2) update PVC: + pvc-as-source-protection (sent together with 1),
//	        (3) create VolumeSnapshotContent snapcontent-<uid>, born with its finalizer,
//	        (4) patch VolumeSnapshot status: bound, readyToUse false
//	csi:    (5) patch content: + being-created annotation,
//	        (6) patch content status: handle, creationTime, restoreSize, ready,
//	        (7) patch content: - being-created annotation
//	binder: (8) patch VolumeSnapshot status: ready, creationTime, restoreSize,
//	        (9) update PVC: - pvc-as-source-protection
//
// and delete: the binder patches the content with the being-deleted
// annotation and deletes it, the CSI side removes the content's finalizer,
// and once the content is gone the binder removes the snapshot's finalizers.
//
// Every step is skipped when the informer cache shows it done. As in
// snapkeeper (pkg/cachelag), a cached copy older than one of this process's
// own writes is not acted on: its watch event brings the object back, so a
// duplicate event costs no write. Copies are compared by resourceVersion
// read as a number (the etcd revision kube-apiserver uses), good enough for
// a benchmark tool.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	snapinformers "github.com/kubernetes-csi/external-snapshotter/client/v8/informers/externalversions"
	snaplisters "github.com/kubernetes-csi/external-snapshotter/client/v8/listers/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/snapkeeper/snapkeeper/pkg/kubeclient"
	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/sync/workloop"
)

type options struct {
	kubeconfig, httpEndpoint, half string
	workers                        int
	qps                            float64
	burst                          int
	restoreSize                    int64
}

func main() {
	var o options
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "Path to a kubeconfig; in-cluster configuration when empty.")
	flag.StringVar(&o.httpEndpoint, "http-endpoint", "", "Serve /readyz (200 once the caches synced), /healthz and an empty /metrics on this address.")
	flag.StringVar(&o.half, "half", "", "Which process to be: binder (snapkeeper's --components=binder) or csi (--components=csi).")
	flag.IntVar(&o.workers, "workers", 64, "Workers of the work queue.")
	flag.Float64Var(&o.qps, "kube-api-qps", 1000, "Client QPS towards the API server.")
	flag.IntVar(&o.burst, "kube-api-burst", 2000, "Client burst towards the API server.")
	flag.Int64Var(&o.restoreSize, "restore-size", 1<<30, "csi: the restoreSize (bytes) written to every content's status.")
	flag.Parse()
	if o.half != "binder" && o.half != "csi" {
		fmt.Fprintln(os.Stderr, "writesonly: --half must be binder or csi")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		log.Printf("writesonly %s: %v", o.half, err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	cfg, err := restConfig(o)
	if err != nil {
		return err
	}
	snapCS, err := snapclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	// Built-in kinds in protobuf, as cmd/controller does.
	kubeCfg := rest.CopyConfig(cfg)
	kubeCfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	kubeCfg.ContentType = "application/vnd.kubernetes.protobuf"
	kubeCS, err := kubernetes.NewForConfig(kubeCfg)
	if err != nil {
		return err
	}
	var ready atomic.Bool
	if o.httpEndpoint != "" {
		if err := serveHTTP(ctx, o.httpEndpoint, &ready); err != nil {
			return err
		}
	}
	// The informers list and watch over a connection of their own, apart
	// from the writes, as cmd/controller's do.
	watchKube, watchSnap, err := kubeclient.OwnConnection(kubeCfg, cfg)
	if err != nil {
		return err
	}
	sf := snapinformers.NewSharedInformerFactory(watchSnap, 0)
	kf := informers.NewSharedInformerFactory(watchKube, 0)
	tr := newTracker()
	var lp *workloop.Loop
	if o.half == "binder" {
		lp, err = newBinder(snapCS, kubeCS, sf, kf, tr)
	} else {
		lp, err = newCSISide(snapCS, sf, tr, o.restoreSize)
	}
	if err != nil {
		return err
	}
	sf.Start(ctx.Done())
	kf.Start(ctx.Done())
	for typ, ok := range sf.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("informer of %v did not sync", typ)
		}
	}
	for typ, ok := range kf.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("informer of %v did not sync", typ)
		}
	}
	ready.Store(true)
	log.Printf("writesonly %s: caches synced, %d workers", o.half, o.workers)
	lp.Run(ctx, o.workers)
	return nil
}

func restConfig(o options) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if o.kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = float32(o.qps), o.burst
	cfg.UserAgent = "snapkeeper-writes-only (" + o.half + ")"
	return cfg, nil
}

// serveHTTP serves /readyz, /healthz and an empty /metrics (the benchmark
// scrapes every process's /metrics; this one exports nothing).
func serveHTTP(ctx context.Context, addr string, ready *atomic.Bool) error {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			http.Error(w, "caches not synced", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		w.WriteHeader(http.StatusOK)
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	return nil
}

// newLoop is snapkeeper's work loop (pkg/sync/workloop: an error requeues
// the key with exponential backoff from 50 ms to 5 min) over a sync that
// returns how long to wait before the key is looked at again (0: done).
func newLoop(name string, sync func(context.Context, string) (time.Duration, error)) *workloop.Loop {
	return workloop.NewLoop(name, workloop.Backoff{Start: 50 * time.Millisecond, Max: 5 * time.Minute},
		func(ctx context.Context, key string) (workloop.Result, error) {
			after, err := sync(ctx, key)
			return workloop.Result{RequeueAfter: after}, err
		})
}

// tracker remembers this process's own writes until the informer caches
// show them: the resourceVersion each write returned, the contents created
// and the contents deleted.
type tracker struct {
	mu      sync.Mutex
	wrote   map[string]uint64
	created map[string]*snapv1.VolumeSnapshotContent
	deleted map[types.UID]bool
}

func newTracker() *tracker {
	return &tracker{wrote: map[string]uint64{}, created: map[string]*snapv1.VolumeSnapshotContent{}, deleted: map[types.UID]bool{}}
}

func rv(o metav1.Object) uint64 {
	n, _ := strconv.ParseUint(o.GetResourceVersion(), 10, 64)
	return n
}

func trackKey(kind string, o metav1.Object) string {
	return kind + "/" + o.GetNamespace() + "/" + o.GetName()
}

// wroteObj records what one of our writes returned.
func (t *tracker) wroteObj(kind string, o metav1.Object) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if k := trackKey(kind, o); rv(o) > t.wrote[k] {
		t.wrote[k] = rv(o)
	}
}

// stale reports whether a cached copy predates one of our writes.
func (t *tracker) stale(kind string, o metav1.Object) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	w, ok := t.wrote[trackKey(kind, o)]
	return ok && rv(o) < w
}

// observe forgets what the cache now shows (an informer event of o).
func (t *tracker) observe(kind string, o metav1.Object, gone bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := trackKey(kind, o)
	if w, ok := t.wrote[k]; ok && (gone || rv(o) >= w) {
		delete(t.wrote, k)
	}
	if kind == kindContent {
		delete(t.created, o.GetName())
		if gone {
			delete(t.deleted, o.GetUID())
		}
	}
}

func (t *tracker) createdContent(name string) *snapv1.VolumeSnapshotContent {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.created[name]
}

func (t *tracker) rememberCreated(c *snapv1.VolumeSnapshotContent) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.created[c.Name] = c
}

func (t *tracker) deleteSent(uid types.UID) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.deleted[uid]
}

func (t *tracker) rememberDeleted(uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.deleted[uid] = true
}

const (
	kindSnapshot = "VolumeSnapshot"
	kindContent  = "VolumeSnapshotContent"
	kindClaim    = "PersistentVolumeClaim"
)

// handler calls observe, then enqueue, on every event of an informer.
func handler(t *tracker, kind string, enqueue func(obj any)) cache.ResourceEventHandlerFuncs {
	on := func(obj any, gone bool) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if m, ok := obj.(metav1.Object); ok {
			t.observe(kind, m, gone)
			if enqueue != nil {
				enqueue(m)
			}
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { on(obj, false) },
		UpdateFunc: func(_, obj any) { on(obj, false) },
		DeleteFunc: func(obj any) { on(obj, true) },
	}
}

func objKey(ns, name string) string { return ns + "/" + name }

// finalizersAdded is fs with each of add it lacks appended; ok reports a
// change.
func finalizersAdded(fs []string, add ...string) ([]string, bool) {
	out := slices.Clone(fs)
	for _, f := range add {
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out, len(out) != len(fs)
}

// finalizersRemoved is fs without rm; ok reports a change.
func finalizersRemoved(fs []string, rm ...string) ([]string, bool) {
	out := slices.DeleteFunc(slices.Clone(fs), func(f string) bool { return slices.Contains(rm, f) })
	if out == nil {
		out = []string{}
	}
	return out, len(out) != len(fs)
}

func hasAny(fs []string, of ...string) bool {
	for _, f := range of {
		if slices.Contains(fs, f) {
			return true
		}
	}
	return false
}

func marshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// ---- binder half ----

var snapshotFinalizers = []string{snapshot.FinalizerSnapshotAsSource, snapshot.FinalizerSnapshotBound}

type binder struct {
	snap     snapclient.Interface
	kube     kubernetes.Interface
	tr       *tracker
	vss      snaplisters.VolumeSnapshotLister
	contents snaplisters.VolumeSnapshotContentLister
	classes  snaplisters.VolumeSnapshotClassLister
	pvcs     corelisters.PersistentVolumeClaimLister
	pvs      corelisters.PersistentVolumeLister
}

func newBinder(snapCS snapclient.Interface, kubeCS kubernetes.Interface, sf snapinformers.SharedInformerFactory, kf informers.SharedInformerFactory, tr *tracker) (*workloop.Loop, error) {
	v1 := sf.Snapshot().V1()
	b := &binder{snap: snapCS, kube: kubeCS, tr: tr,
		vss: v1.VolumeSnapshots().Lister(), contents: v1.VolumeSnapshotContents().Lister(), classes: v1.VolumeSnapshotClasses().Lister(),
		pvcs: kf.Core().V1().PersistentVolumeClaims().Lister(), pvs: kf.Core().V1().PersistentVolumes().Lister()}
	lp := newLoop("binder", b.sync)
	regs := []struct {
		inf  cache.SharedIndexInformer
		kind string
		enq  func(obj any)
	}{
		{v1.VolumeSnapshots().Informer(), kindSnapshot, func(obj any) {
			m := obj.(metav1.Object)
			lp.Add(objKey(m.GetNamespace(), m.GetName()))
		}},
		{v1.VolumeSnapshotContents().Informer(), kindContent, func(obj any) {
			if c, ok := obj.(*snapv1.VolumeSnapshotContent); ok && c.Spec.VolumeSnapshotRef.Name != "" {
				lp.Add(objKey(c.Spec.VolumeSnapshotRef.Namespace, c.Spec.VolumeSnapshotRef.Name))
			}
		}},
		{v1.VolumeSnapshotClasses().Informer(), "VolumeSnapshotClass", nil},
		{kf.Core().V1().PersistentVolumeClaims().Informer(), kindClaim, nil},
		{kf.Core().V1().PersistentVolumes().Informer(), "PersistentVolume", nil},
	}
	for _, r := range regs {
		if _, err := r.inf.AddEventHandler(handler(tr, r.kind, r.enq)); err != nil {
			return nil, err
		}
	}
	return lp, nil
}

// waitFor is the requeue of a snapshot that waits for something no event
// of ours brings (its claim's volume, a class, our claim write).
const waitFor = 100 * time.Millisecond

func (b *binder) sync(ctx context.Context, key string) (time.Duration, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return 0, nil
	}
	vs, err := b.vss.VolumeSnapshots(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if b.tr.stale(kindSnapshot, vs) || vs.Spec.Source.PersistentVolumeClaimName == nil {
		return 0, nil // our write's event brings it back; pre-provisioned: not handled
	}
	content := b.contentOf(vs)
	if content != nil && b.tr.stale(kindContent, content) {
		return 0, nil
	}
	if content != nil && content.Spec.VolumeSnapshotRef.UID != vs.UID {
		return 0, nil // not this snapshot's
	}
	if vs.DeletionTimestamp != nil {
		return b.deleting(ctx, vs, content)
	}
	if content == nil {
		return b.create(ctx, vs)
	}
	return b.bound(ctx, vs, content)
}

func (b *binder) contentOf(vs *snapv1.VolumeSnapshot) *snapv1.VolumeSnapshotContent {
	name := snapshot.ContentNameFor(vs.UID)
	if vs.Status != nil && vs.Status.BoundVolumeSnapshotContentName != nil {
		name = *vs.Status.BoundVolumeSnapshotContentName
	}
	if c, err := b.contents.Get(name); err == nil {
		return c
	}
	return b.tr.createdContent(name)
}

// create: writes 1 and 2 together, then 3 and 4.
func (b *binder) create(ctx context.Context, vs *snapv1.VolumeSnapshot) (time.Duration, error) {
	pvc, err := b.pvcs.PersistentVolumeClaims(vs.Namespace).Get(*vs.Spec.Source.PersistentVolumeClaimName)
	if err != nil || pvc.Spec.VolumeName == "" || b.tr.stale(kindClaim, pvc) {
		return waitFor, nil
	}
	pv, err := b.pvs.Get(pvc.Spec.VolumeName)
	if err != nil || pv.Spec.CSI == nil {
		return waitFor, nil
	}
	class := b.classFor(vs, pv.Spec.CSI.Driver)
	if class == nil {
		return waitFor, nil
	}
	// (1) and (2), sent together.
	claimErr := make(chan error, 1)
	if fs, changed := finalizersAdded(pvc.Finalizers, snapshot.FinalizerPVCAsSource); changed {
		next := pvc.DeepCopy()
		next.Finalizers = fs
		go func() {
			out, err := b.kube.CoreV1().PersistentVolumeClaims(next.Namespace).Update(ctx, next, metav1.UpdateOptions{})
			if err == nil {
				b.tr.wroteObj(kindClaim, out)
			}
			claimErr <- err
		}()
	} else {
		claimErr <- nil
	}
	meta := map[string]any{}
	body := map[string]any{}
	if fs, changed := finalizersAdded(vs.Finalizers, snapshotFinalizers...); changed {
		meta["finalizers"], meta["resourceVersion"] = fs, vs.ResourceVersion
		body["metadata"] = meta
	}
	if vs.Spec.VolumeSnapshotClassName == nil || *vs.Spec.VolumeSnapshotClassName == "" {
		body["spec"] = map[string]any{"volumeSnapshotClassName": class.Name}
	}
	var vsErr error
	if len(body) > 0 {
		out, err := b.snap.SnapshotV1().VolumeSnapshots(vs.Namespace).Patch(ctx, vs.Name, types.MergePatchType, marshal(body), metav1.PatchOptions{})
		if err == nil {
			b.tr.wroteObj(kindSnapshot, out)
			vs = out
		}
		vsErr = err
	}
	if err := errors.Join(vsErr, <-claimErr); err != nil {
		return 0, err
	}
	// (3) the content, born with its finalizer.
	content := newContent(vs, class, pv)
	out, err := b.snap.SnapshotV1().VolumeSnapshotContents().Create(ctx, content, metav1.CreateOptions{})
	switch {
	case err == nil:
		b.tr.rememberCreated(out)
	case !apierrors.IsAlreadyExists(err):
		return 0, err
	}
	// (4) the binding in the snapshot's status.
	if vs.Status == nil || vs.Status.BoundVolumeSnapshotContentName == nil {
		return 0, b.patchStatus(ctx, vs, content.Name, false, nil)
	}
	return 0, nil
}

// classFor is the snapshot's class, or the driver's default class.
func (b *binder) classFor(vs *snapv1.VolumeSnapshot, driver string) *snapv1.VolumeSnapshotClass {
	if n := vs.Spec.VolumeSnapshotClassName; n != nil && *n != "" {
		c, err := b.classes.Get(*n)
		if err != nil {
			return nil
		}
		return c
	}
	all, err := b.classes.List(labels.Everything())
	if err != nil {
		return nil
	}
	for _, c := range all {
		if c.Driver == driver && c.Annotations[snapshot.AnnDefaultClass] == "true" {
			return c
		}
	}
	return nil
}

func newContent(vs *snapv1.VolumeSnapshot, class *snapv1.VolumeSnapshotClass, pv *corev1.PersistentVolume) *snapv1.VolumeSnapshotContent {
	className, handle := class.Name, pv.Spec.CSI.VolumeHandle
	mode := corev1.PersistentVolumeFilesystem
	if pv.Spec.VolumeMode != nil {
		mode = *pv.Spec.VolumeMode
	}
	return &snapv1.VolumeSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{Name: snapshot.ContentNameFor(vs.UID), Finalizers: []string{snapshot.FinalizerContentBound}},
		Spec: snapv1.VolumeSnapshotContentSpec{
			VolumeSnapshotRef: corev1.ObjectReference{Kind: kindSnapshot, APIVersion: snapshot.GroupName + "/v1",
				Namespace: vs.Namespace, Name: vs.Name, UID: vs.UID, ResourceVersion: vs.ResourceVersion},
			DeletionPolicy:          class.DeletionPolicy,
			Driver:                  class.Driver,
			VolumeSnapshotClassName: &className,
			Source:                  snapv1.VolumeSnapshotContentSource{VolumeHandle: &handle},
			SourceVolumeMode:        &mode,
		},
	}
}

// patchStatus writes the snapshot's status in the shape snapkeeper's binder
// sends (every field, unset ones as null): write 4 (content not ready,
// cs nil) or 8 (ready, from the content's status).
func (b *binder) patchStatus(ctx context.Context, vs *snapv1.VolumeSnapshot, content string, ready bool, cs *snapv1.VolumeSnapshotContentStatus) error {
	var created *metav1.Time
	var size *resource.Quantity
	if cs != nil && cs.CreationTime != nil {
		t := metav1.NewTime(time.Unix(0, *cs.CreationTime).Truncate(time.Second))
		created = &t
	}
	if cs != nil && cs.RestoreSize != nil {
		size = resource.NewQuantity(*cs.RestoreSize, resource.BinarySI)
	}
	status := map[string]any{"status": map[string]any{
		"boundVolumeSnapshotContentName": content,
		"creationTime":                   created,
		"readyToUse":                     ready,
		"restoreSize":                    size,
		"error":                          nil,
		"volumeGroupSnapshotName":        nil,
	}}
	out, err := b.snap.SnapshotV1().VolumeSnapshots(vs.Namespace).Patch(ctx, vs.Name, types.MergePatchType, marshal(status), metav1.PatchOptions{}, "status")
	if err == nil {
		b.tr.wroteObj(kindSnapshot, out)
	}
	return err
}

// bound: write 4 if an earlier sync stopped before it; once the content is
// ready and no cut is in flight, writes 8 and 9.
func (b *binder) bound(ctx context.Context, vs *snapv1.VolumeSnapshot, content *snapv1.VolumeSnapshotContent) (time.Duration, error) {
	st := content.Status
	_, inFlight := content.Annotations[snapshot.AnnBeingCreated]
	contentReady := st != nil && st.ReadyToUse != nil && *st.ReadyToUse && !inFlight
	vsReady := vs.Status != nil && vs.Status.ReadyToUse != nil && *vs.Status.ReadyToUse
	if !contentReady {
		if vs.Status == nil || vs.Status.BoundVolumeSnapshotContentName == nil {
			return 0, b.patchStatus(ctx, vs, content.Name, false, nil)
		}
		return 0, nil // the content's events bring it back
	}
	if !vsReady {
		if err := b.patchStatus(ctx, vs, content.Name, true, st); err != nil {
			return 0, err
		}
	}
	return b.releaseClaim(ctx, vs)
}

// releaseClaim is write 9: the claim loses its finalizer.
func (b *binder) releaseClaim(ctx context.Context, vs *snapv1.VolumeSnapshot) (time.Duration, error) {
	pvc, err := b.pvcs.PersistentVolumeClaims(vs.Namespace).Get(*vs.Spec.Source.PersistentVolumeClaimName)
	if err != nil {
		return 0, nil
	}
	fs, changed := finalizersRemoved(pvc.Finalizers, snapshot.FinalizerPVCAsSource)
	if !changed {
		return 0, nil
	}
	if b.tr.stale(kindClaim, pvc) {
		return waitFor, nil
	}
	next := pvc.DeepCopy()
	next.Finalizers = fs
	out, err := b.kube.CoreV1().PersistentVolumeClaims(next.Namespace).Update(ctx, next, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err == nil {
		b.tr.wroteObj(kindClaim, out)
	}
	return 0, err
}

// deleting: the content gets the being-deleted annotation and is deleted;
// once it is gone, the snapshot loses its finalizers.
func (b *binder) deleting(ctx context.Context, vs *snapv1.VolumeSnapshot, content *snapv1.VolumeSnapshotContent) (time.Duration, error) {
	if !hasAny(vs.Finalizers, snapshotFinalizers...) {
		return 0, nil
	}
	if after, err := b.releaseClaim(ctx, vs); err != nil || after > 0 {
		return after, err
	}
	if content != nil {
		if content.Annotations[snapshot.AnnBeingDeleted] != snapshot.ValueYes {
			p := map[string]any{"metadata": map[string]any{"annotations": map[string]any{snapshot.AnnBeingDeleted: snapshot.ValueYes}}}
			out, err := b.snap.SnapshotV1().VolumeSnapshotContents().Patch(ctx, content.Name, types.MergePatchType, marshal(p), metav1.PatchOptions{})
			switch {
			case apierrors.IsNotFound(err):
				content = nil
			case err != nil:
				return 0, err
			default:
				b.tr.wroteObj(kindContent, out)
				content = out
			}
		}
	}
	if content != nil {
		if content.DeletionTimestamp != nil || b.tr.deleteSent(content.UID) {
			return 0, nil // its delete event brings the snapshot back
		}
		uid := content.UID
		err := b.snap.SnapshotV1().VolumeSnapshotContents().Delete(ctx, content.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err == nil {
			b.tr.rememberDeleted(uid)
			return 0, nil
		}
		if !apierrors.IsNotFound(err) {
			return 0, err
		}
	}
	fs, _ := finalizersRemoved(vs.Finalizers, snapshotFinalizers...)
	p := map[string]any{"metadata": map[string]any{"finalizers": fs, "resourceVersion": vs.ResourceVersion}}
	out, err := b.snap.SnapshotV1().VolumeSnapshots(vs.Namespace).Patch(ctx, vs.Name, types.MergePatchType, marshal(p), metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err == nil {
		b.tr.wroteObj(kindSnapshot, out)
	}
	return 0, err
}

// ---- CSI half ----

type csiSide struct {
	snap        snapclient.Interface
	tr          *tracker
	contents    snaplisters.VolumeSnapshotContentLister
	restoreSize int64
}

func newCSISide(snapCS snapclient.Interface, sf snapinformers.SharedInformerFactory, tr *tracker, restoreSize int64) (*workloop.Loop, error) {
	inf := sf.Snapshot().V1().VolumeSnapshotContents()
	c := &csiSide{snap: snapCS, tr: tr, contents: inf.Lister(), restoreSize: restoreSize}
	lp := newLoop("csi", c.sync)
	_, err := inf.Informer().AddEventHandler(handler(tr, kindContent, func(obj any) {
		lp.Add(obj.(metav1.Object).GetName())
	}))
	return lp, err
}

func (c *csiSide) sync(ctx context.Context, name string) (time.Duration, error) {
	content, err := c.contents.Get(name)
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if c.tr.stale(kindContent, content) || content.Spec.Source.VolumeHandle == nil {
		return 0, nil // our write's event brings it back; pre-provisioned: not handled
	}
	if content.DeletionTimestamp != nil {
		// The content's finalizer goes (there is no backend snapshot).
		fs, changed := finalizersRemoved(content.Finalizers, snapshot.FinalizerContentBound)
		if !changed {
			return 0, nil
		}
		return 0, c.patchMeta(ctx, content, map[string]any{"finalizers": fs, "resourceVersion": content.ResourceVersion})
	}
	_, marked := content.Annotations[snapshot.AnnBeingCreated]
	if content.Status == nil || content.Status.SnapshotHandle == nil {
		if content.Spec.VolumeSnapshotRef.UID == "" {
			return 0, nil
		}
		// (5) the being-created mark.
		if !marked {
			p := map[string]any{"annotations": map[string]any{snapshot.AnnBeingCreated: snapshot.ValueYes}}
			if err := c.patchMeta(ctx, content, p); err != nil {
				return 0, err
			}
		}
		// (6) what a driver that answers ready at once would say.
		status := map[string]any{"status": map[string]any{
			"snapshotHandle": "writes-only-" + string(content.Spec.VolumeSnapshotRef.UID),
			"creationTime":   time.Now().UnixNano(),
			"restoreSize":    c.restoreSize,
			"readyToUse":     true,
		}}
		out, err := c.snap.SnapshotV1().VolumeSnapshotContents().Patch(ctx, name, types.MergePatchType, marshal(status), metav1.PatchOptions{}, "status")
		if err != nil {
			return 0, err
		}
		c.tr.wroteObj(kindContent, out)
		marked = true
	}
	// (7) the mark goes.
	if marked {
		return 0, c.patchMeta(ctx, content, map[string]any{"annotations": map[string]any{snapshot.AnnBeingCreated: nil}})
	}
	return 0, nil
}

func (c *csiSide) patchMeta(ctx context.Context, content *snapv1.VolumeSnapshotContent, meta map[string]any) error {
	out, err := c.snap.SnapshotV1().VolumeSnapshotContents().Patch(ctx, content.Name, types.MergePatchType, marshal(map[string]any{"metadata": meta}), metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err == nil {
		c.tr.wroteObj(kindContent, out)
	}
	return err
}
