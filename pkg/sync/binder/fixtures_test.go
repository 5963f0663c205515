package binder

import (
	"context"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapfake "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned/fake"
	snapinformers "github.com/kubernetes-csi/external-snapshotter/client/v8/informers/externalversions"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/sync/workloop"
	"github.com/snapkeeper/snapkeeper/pkg/writer"
)

const (
	testNS     = "ns"
	testDriver = "drv.example.com"
)

func ptr[T any](v T) *T { return &v }

// Snapshot builders.
type snapOpt func(*snapv1.VolumeSnapshot)

func newSnapshot(name string, opts ...snapOpt) *snapv1.VolumeSnapshot {
	vs := &snapv1.VolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, UID: types.UID("uid-" + name), ResourceVersion: "1"},
		Spec:       snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{PersistentVolumeClaimName: ptr("pvc1")}},
	}
	for _, o := range opts {
		o(vs)
	}
	return vs
}

func withClass(c string) snapOpt {
	return func(vs *snapv1.VolumeSnapshot) { vs.Spec.VolumeSnapshotClassName = &c }
}
func fromContent(c string) snapOpt {
	return func(vs *snapv1.VolumeSnapshot) {
		vs.Spec.Source = snapv1.VolumeSnapshotSource{VolumeSnapshotContentName: &c}
	}
}
func withFinalizers(f ...string) snapOpt {
	return func(vs *snapv1.VolumeSnapshot) { vs.Finalizers = f }
}
func deleted() snapOpt {
	return func(vs *snapv1.VolumeSnapshot) { now := metav1.Now(); vs.DeletionTimestamp = &now }
}
func boundTo(c string) snapOpt {
	return func(vs *snapv1.VolumeSnapshot) {
		vs.Status = &snapv1.VolumeSnapshotStatus{BoundVolumeSnapshotContentName: &c}
	}
}

// Content builders.
type contentOpt func(*snapv1.VolumeSnapshotContent)

func newContent(vs *snapv1.VolumeSnapshot, opts ...contentOpt) *snapv1.VolumeSnapshotContent {
	c := &snapv1.VolumeSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{Name: snapshot.ContentNameFor(vs.UID), ResourceVersion: "1",
			Finalizers: []string{snapshot.FinalizerContentBound}},
		Spec: snapv1.VolumeSnapshotContentSpec{
			VolumeSnapshotRef: corev1.ObjectReference{Namespace: vs.Namespace, Name: vs.Name, UID: vs.UID},
			DeletionPolicy:    snapv1.VolumeSnapshotContentDelete,
			Driver:            testDriver,
			Source:            snapv1.VolumeSnapshotContentSource{VolumeHandle: ptr("vol-1")},
		},
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

func ready(handle string) contentOpt {
	return func(c *snapv1.VolumeSnapshotContent) {
		c.Status = &snapv1.VolumeSnapshotContentStatus{SnapshotHandle: &handle, ReadyToUse: ptr(true),
			CreationTime: ptr(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano()), RestoreSize: ptr(int64(1 << 30))}
	}
}

// notReady is a cut snapshot still being processed (uploaded) by the driver.
func notReady(handle string) contentOpt {
	return func(c *snapv1.VolumeSnapshotContent) {
		ready(handle)(c)
		c.Status.ReadyToUse = ptr(false)
	}
}
func marked(ann string) contentOpt {
	return func(c *snapv1.VolumeSnapshotContent) {
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[ann] = snapshot.ValueYes
	}
}
func retain() contentOpt {
	return func(c *snapv1.VolumeSnapshotContent) { c.Spec.DeletionPolicy = snapv1.VolumeSnapshotContentRetain }
}
func named(n string) contentOpt { return func(c *snapv1.VolumeSnapshotContent) { c.Name = n } }
func refUID(u types.UID) contentOpt {
	return func(c *snapv1.VolumeSnapshotContent) { c.Spec.VolumeSnapshotRef.UID = u }
}
func preHandle(h string) contentOpt {
	return func(c *snapv1.VolumeSnapshotContent) {
		c.Spec.Source = snapv1.VolumeSnapshotContentSource{SnapshotHandle: &h}
	}
}
func noFinalizer() contentOpt { return func(c *snapv1.VolumeSnapshotContent) { c.Finalizers = nil } }

func newClass(name, driver string, isDefault bool) *snapv1.VolumeSnapshotClass {
	c := &snapv1.VolumeSnapshotClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Driver: driver,
		DeletionPolicy: snapv1.VolumeSnapshotContentDelete}
	if isDefault {
		c.Annotations = map[string]string{snapshot.AnnDefaultClass: "true"}
	}
	return c
}

// boundPVC returns a bound claim "name" and its CSI volume.
func boundPVC(name string) (*corev1.PersistentVolumeClaim, *corev1.PersistentVolume) {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, ResourceVersion: "1"},
		Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: "pv-" + name},
		Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound},
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-" + name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: testDriver, VolumeHandle: "vol-1"}},
			ClaimRef:               &corev1.ObjectReference{Namespace: testNS, Name: name},
		},
	}
	return pvc, pv
}

// harness is a binder over fake clientsets whose informers hold objs.
type harness struct {
	t        *testing.T
	c        *Controller
	kube     *kubefake.Clientset
	snap     *snapfake.Clientset
	recorder *record.FakeRecorder
}

func newHarness(t *testing.T, objs ...runtime.Object) *harness {
	t.Helper()
	return newHarnessWith(t, nil, objs...)
}

// newHarnessWith is newHarness with a change to the binder's Config.
func newHarnessWith(t *testing.T, configure func(*Config), objs ...runtime.Object) *harness {
	t.Helper()
	var kubeObjs, snapObjs []runtime.Object
	for _, o := range objs {
		switch o.(type) {
		case *corev1.PersistentVolumeClaim, *corev1.PersistentVolume, *corev1.Node:
			kubeObjs = append(kubeObjs, o)
		default:
			snapObjs = append(snapObjs, o)
		}
	}
	//lint:ignore SA1019 client/v8 generates no apply configurations, so it has no NewClientset
	snap := snapfake.NewSimpleClientset(snapObjs...)
	h := &harness{t: t, kube: kubefake.NewClientset(kubeObjs...), snap: snap,
		recorder: record.NewFakeRecorder(100)}
	kubeInf := informers.NewSharedInformerFactory(h.kube, 0)
	snapInf := snapinformers.NewSharedInformerFactory(h.snap, 0)
	cfg := Config{
		Snap: h.snap, Writer: writer.New(h.kube, h.snap, nil), KubeInformers: kubeInf, SnapInformers: snapInf,
		Recorder: h.recorder, Workers: 1, Backoff: workloop.Backoff{Start: time.Millisecond, Max: time.Second},
		SourceVolumeMode: true,
	}
	if configure != nil {
		configure(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	kubeInf.Start(ctx.Done())
	snapInf.Start(ctx.Done())
	kubeInf.WaitForCacheSync(ctx.Done())
	snapInf.WaitForCacheSync(ctx.Done())
	h.c = c
	h.kube.ClearActions()
	h.snap.ClearActions()
	return h
}

// writes lists the write actions sent so far, as "verb resource[/sub]":
// snapshot API writes in order, then core API writes in order.
func (h *harness) writes() []string {
	var out []string
	for _, a := range append(h.snap.Actions(), h.kube.Actions()...) {
		switch a.GetVerb() {
		case "get", "list", "watch":
			continue
		}
		r := a.GetResource().Resource
		if s := a.GetSubresource(); s != "" {
			r += "/" + s
		}
		out = append(out, a.GetVerb()+" "+r)
	}
	return out
}

func (h *harness) syncSnapshot(name string) (workloop.Result, error) {
	return h.c.syncSnapshot(context.Background(), testNS+"/"+name)
}

func (h *harness) getSnapshot(name string) *snapv1.VolumeSnapshot {
	vs, err := h.snap.SnapshotV1().VolumeSnapshots(testNS).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return vs
}

func (h *harness) getContent(name string) *snapv1.VolumeSnapshotContent {
	c, err := h.snap.SnapshotV1().VolumeSnapshotContents().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatalf("content %s: %v", name, err)
	}
	return c
}

func (h *harness) events() []string {
	var out []string
	for {
		select {
		case e := <-h.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// failNext makes the next verb on resource fail with err.
func failNext(f interface {
	PrependReactor(verb, resource string, r k8stesting.ReactionFunc)
}, verb, resource string, err error) {
	done := false
	f.PrependReactor(verb, resource, func(k8stesting.Action) (bool, runtime.Object, error) {
		if done {
			return false, nil, nil
		}
		done = true
		return true, nil, err
	})
}
