package binder

import (
	"context"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapinformers "github.com/kubernetes-csi/external-snapshotter/client/v8/informers/externalversions"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/record"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/sync/testkit"
	"github.com/snapkeeper/snapkeeper/pkg/sync/workloop"
	"github.com/snapkeeper/snapkeeper/pkg/writer"
)

const (
	testNS     = testkit.Namespace
	testDriver = testkit.DriverName
)

// newContent is the dynamic content of vs, as the binder creates it.
func newContent(vs *snapv1.VolumeSnapshot, opts ...testkit.ContentOption) *snapv1.VolumeSnapshotContent {
	ref := testkit.RefTo(vs.Namespace, vs.Name, vs.UID)
	return testkit.Content(snapshot.ContentNameFor(vs.UID), append([]testkit.ContentOption{ref}, opts...)...)
}

// harness is a binder over a fake API server whose informers hold objs.
type harness struct {
	t        *testing.T
	c        *Controller
	api      *testkit.API
	recorder *record.FakeRecorder
	kubeInf  informers.SharedInformerFactory
}

func newHarness(t *testing.T, objs ...runtime.Object) *harness {
	t.Helper()
	return newHarnessWith(t, nil, objs...)
}

// newHarnessWith is newHarness with a change to the binder's Config.
func newHarnessWith(t *testing.T, configure func(*Config), objs ...runtime.Object) *harness {
	t.Helper()
	h := &harness{t: t, api: testkit.NewAPI(t, objs...), recorder: record.NewFakeRecorder(100)}
	kubeInf := informers.NewSharedInformerFactory(h.api.Kube, 0)
	snapInf := snapinformers.NewSharedInformerFactory(h.api.Snap, 0)
	cfg := Config{
		Snap: h.api.Snap, Writer: writer.New(h.api.Kube, h.api.Snap, nil), KubeInformers: kubeInf, SnapInformers: snapInf,
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
	h.c, h.kubeInf = c, kubeInf
	h.api.ClearActions()
	return h
}

// writes lists the write actions sent so far, as "verb resource[/sub]":
// snapshot API writes in order, then core API writes in order.
func (h *harness) writes() []string {
	var out []string
	for _, w := range h.api.Writes() {
		out = append(out, w.String())
	}
	return out
}

func (h *harness) syncSnapshot(name string) (workloop.Result, error) {
	return h.c.syncSnapshot(context.Background(), testNS+"/"+name)
}

func (h *harness) getSnapshot(name string) *snapv1.VolumeSnapshot {
	h.t.Helper()
	vs := h.api.Snapshot(testNS, name)
	if vs == nil {
		h.t.Fatalf("snapshot %s not found", name)
	}
	return vs
}

func (h *harness) getContent(name string) *snapv1.VolumeSnapshotContent {
	h.t.Helper()
	c := h.api.Content(name)
	if c == nil {
		h.t.Fatalf("content %s not found", name)
	}
	return c
}

func (h *harness) events() []string { return testkit.Events(h.recorder) }
