package csiside

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	snapinformers "github.com/kubernetes-csi/external-snapshotter/client/v8/informers/externalversions"
	"google.golang.org/grpc/codes"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/snapkeeper/snapkeeper/pkg/csi"
	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/sync/testkit"
	"github.com/snapkeeper/snapkeeper/pkg/writer"
)

func TestAPIErrors(t *testing.T) {
	runKindCases(t, map[string]kindCase{
		"a failed status write after a create keeps the mark: the snapshot is not forgotten": func(k kind) syncCase {
			return syncCase{
				content:        k.content(),
				setup:          setup{objects: k.classes()},
				calls:          []call{k.create(nil, "snap-id", true)},
				inject:         []testkit.Fault{{Verb: "patch", Resource: k.resource(), Subresource: "status", Err: apierrors.NewServiceUnavailable("etcd"), Times: 1}},
				wantErr:        true,
				wantWrites:     []string{"patch status"},
				wantMark:       true,
				wantFinalizers: k.bound(),
			}
		},
		"a failed unmark after the status write keeps the handle; the mark goes next time": func(k kind) syncCase {
			return syncCase{
				content:        k.content(),
				setup:          setup{objects: k.classes()},
				calls:          []call{k.create(nil, "snap-id", true)},
				inject:         []testkit.Fault{{Verb: "patch", Resource: k.resource(), Err: apierrors.NewTimeoutError("slow", 1), Times: 1}},
				wantErr:        true,
				wantWrites:     []string{"patch status", "patch"},
				wantMark:       true,
				wantFinalizers: k.bound(),
				wantStatus:     k.cut("snap-id", true),
			}
		},
		"a conflict while marking a community content calls nothing": func(k kind) syncCase {
			return syncCase{
				content:    k.content(unmarked(), testkit.Finalizers()),
				setup:      setup{objects: k.classes()},
				inject:     []testkit.Fault{{Verb: "patch", Resource: k.resource(), Err: conflict(), Times: 1}},
				wantErr:    true,
				wantWrites: []string{"patch"},
			}
		},
		"a failed status.error write is returned and sends no event": func(k kind) syncCase {
			return syncCase{
				content:        k.content(),
				setup:          setup{objects: k.classes()},
				calls:          []call{k.createFails(nil, grpcErr(codes.Internal, "boom"))},
				inject:         []testkit.Fault{{Verb: "patch", Resource: k.resource(), Subresource: "status", Err: apierrors.NewServiceUnavailable("etcd"), Times: 1}},
				wantErr:        true,
				wantWrites:     []string{"patch status"},
				wantMark:       true,
				wantFinalizers: k.bound(),
			}
		},
		"a failed secret read is shown and nothing is called": func(k kind) syncCase {
			msg := k.Says(`Failed to prepare the CreateSnapshot call: reading secret secrets/creds: secrets "creds" is forbidden: no access; fix: ` + secretGrantHint("secrets", "no access"))
			return syncCase{
				content:        k.content(withSecret()),
				setup:          setup{objects: k.classes(), secrets: credsSecrets},
				inject:         []testkit.Fault{{Verb: "get", Resource: "secrets", Err: apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "creds", errors.New("no access")), Times: 1}},
				wantRequeue:    retryBackoff.Start,
				wantWrites:     []string{"patch status"},
				wantEvents:     k.SaysAll("Warning SnapshotCreationFailed " + msg),
				wantMark:       true,
				wantFinalizers: k.bound(),
				wantStatus:     k.failed(msg),
			}
		},
	})
}

// TestStaleCacheConflict: the finalizer list is written with the cached
// copy's resourceVersion, so a cache behind the server gets a conflict and
// nobody's finalizer is lost.
func TestStaleCacheConflict(t *testing.T) {
	h := newHarness(t, setup{contents: contents(newContent("c1", unmarked(), testkit.Finalizers())), objects: classes})
	p := []byte(`{"metadata":{"finalizers":["` + veleroFinal + `"]}}`)
	if _, err := h.api.Snap.SnapshotV1().VolumeSnapshotContents().Patch(h.ctx, "c1", types.MergePatchType, p, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := h.sync("c1")
	if !apierrors.IsConflict(err) {
		t.Fatalf("sync with a stale cache: %v, want a conflict", err)
	}
	h.refresh()
	h.driver.script(createCall(goldRequest(nil), snapOf("snap-id", true), nil))
	h.mustSync("c1")
	if got, want := h.api.Content("c1").Finalizers, []string{veleroFinal, snapshot.FinalizerContentBound}; !slices.Equal(got, want) {
		t.Errorf("finalizers %v, want %v", got, want)
	}
}

// TestOwnWritesAreNotRepeated: a sync woken before the informer delivered
// our last write does not write the same change again.
func TestOwnWritesAreNotRepeated(t *testing.T) {
	h := newHarness(t, setup{contents: contents(newContent("c1")), objects: classes})
	h.driver.script(createCall(goldRequest(nil), snapOf("snap-id", true), nil))
	h.mustSync("c1")
	h.writes()
	// The cache still holds the copy before our writes.
	res, err := h.sync("c1")
	if err != nil || res.RequeueAfter != staleRecheck {
		t.Errorf("sync on the stale copy: %v, %v; want a recheck after %v", res, err, staleRecheck)
	}
	if w := h.writes(); len(w) != 0 {
		t.Errorf("sync on the stale copy wrote %v", w)
	}
	h.refresh()
	if res, err := h.sync("c1"); err != nil || res.RequeueAfter != 0 {
		t.Errorf("sync on the fresh copy: %v, %v", res, err)
	}
	if w := h.writes(); len(w) != 0 {
		t.Errorf("sync on the fresh copy wrote %v", w)
	}
	if n := h.ctrl.cfg.Writer.Lag().Len(); n != 0 {
		t.Errorf("%d write records remain after the cache caught up", n)
	}
}

// TestSecretsNeverLeak: the secret's values reach the driver and nothing
// else: not the log (at the highest verbosity), events, status or patches.
func TestSecretsNeverLeak(t *testing.T) {
	h := newHarness(t, setup{contents: contents(newContent("c1", withSecret())), objects: classes, secrets: credsSecrets})
	h.driver.script(
		createCall(goldRequest(testSecrets), nil, grpcErr(codes.Unauthenticated, "credentials rejected")),
	)
	h.mustSync("c1")
	h.now = h.now.Add(time.Minute)
	h.refresh()
	h.driver.script(createCall(goldRequest(testSecrets), snapOf("snap-id", true), nil))
	h.mustSync("c1")
	mark := []byte(`{"metadata":{"annotations":{"` + snapshot.AnnBeingDeleted + `":"yes"}}}`)
	if _, err := h.api.Snap.SnapshotV1().VolumeSnapshotContents().Patch(h.ctx, "c1", types.MergePatchType, mark, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := h.api.Snap.SnapshotV1().VolumeSnapshotContents().Delete(h.ctx, "c1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.refresh()
	h.driver.script(deleteCall("snap-id", testSecrets, nil))
	h.mustSync("c1")

	if strings.Contains(h.logs.String(), testSecret) {
		t.Error("the secret's value appears in the log")
	}
	for _, e := range h.events() {
		if strings.Contains(e, testSecret) {
			t.Errorf("the secret's value appears in event %q", e)
		}
	}
	for _, p := range h.patches() {
		if strings.Contains(p, testSecret) {
			t.Errorf("the secret's value appears in patch %s", p)
		}
	}
	if !strings.Contains(h.logs.String(), "DeleteSnapshot") {
		t.Error("the log is empty: the check above proves nothing")
	}
}

// TestRun wires the loop to running informers: a content created on the
// API server is cut, and deleted by the binder's protocol (mark, delete).
func TestRun(t *testing.T) {
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(4)))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	defer cancel()
	api := testkit.NewAPI(t, goldClass())
	drv := &fakeDriver{t: t, caps: csi.Capabilities{CreateDeleteSnapshot: true}}
	t.Cleanup(drv.verify)
	factory := fakeFactory(api)
	ctrl := New(Config{
		Driver: drv, Kube: api.Kube, Snap: api.Snap, Writer: writer.New(api.Kube, api.Snap, nil),
		ContentInformer: factory.Snapshot().V1().VolumeSnapshotContents(),
		ClassInformer:   factory.Snapshot().V1().VolumeSnapshotClasses(),
		Recorder:        record.NewFakeRecorder(100), SnapshotNameUUIDLength: -1, Backoff: retryBackoff,
		ResyncPeriod: time.Hour,
	})
	factory.Start(ctx.Done())
	done := make(chan error, 1)
	go func() { done <- ctrl.Run(ctx, 2) }()

	drv.script(createCall(goldRequest(nil), snapOf("snap-id", true), nil))
	if _, err := api.Snap.SnapshotV1().VolumeSnapshotContents().Create(ctx, newContent("c1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "the content to be ready and unmarked", func() bool {
		c, err := api.Snap.SnapshotV1().VolumeSnapshotContents().Get(ctx, "c1", metav1.GetOptions{})
		return err == nil && isReady(c) && !markedCreating(ctrl.single(c))
	})

	drv.script(deleteCall("snap-id", nil, nil))
	mark := []byte(`{"metadata":{"annotations":{"` + snapshot.AnnBeingDeleted + `":"yes"}}}`)
	if _, err := api.Snap.SnapshotV1().VolumeSnapshotContents().Patch(ctx, "c1", types.MergePatchType, mark, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := api.Snap.SnapshotV1().VolumeSnapshotContents().Delete(ctx, "c1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "the content to be gone", func() bool {
		_, err := api.Snap.SnapshotV1().VolumeSnapshotContents().Get(ctx, "c1", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	// Give stray syncs a moment to make an unexpected call.
	time.Sleep(100 * time.Millisecond)
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

// fakeFactory is an informer factory over the fake clientset. The
// snapshot.storage v1 informers of client/v8 v8.7.0 do not pass on the fake
// clientset's "no WatchList" flag, so the reflector would wait for a
// bookmark the fake never sends; the content and class informers are made
// here with the flag passed on.
func fakeFactory(api *testkit.API) snapinformers.SharedInformerFactory {
	factory := snapinformers.NewSharedInformerFactory(api.Snap, 0)
	v1 := api.Snap.SnapshotV1()
	factory.InformerFor(&snapv1.VolumeSnapshotContent{}, fakeInformer(api, &snapv1.VolumeSnapshotContent{},
		v1.VolumeSnapshotContents().List, v1.VolumeSnapshotContents().Watch))
	factory.InformerFor(&snapv1.VolumeSnapshotClass{}, fakeInformer(api, &snapv1.VolumeSnapshotClass{},
		v1.VolumeSnapshotClasses().List, v1.VolumeSnapshotClasses().Watch))
	return factory
}

// fakeInformer makes the informer of one kind from its list and watch,
// with the fake clientset's "no WatchList" flag passed on.
func fakeInformer[L runtime.Object](api *testkit.API, obj runtime.Object,
	list func(context.Context, metav1.ListOptions) (L, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error),
) func(snapclient.Interface, time.Duration) cache.SharedIndexInformer {
	return func(_ snapclient.Interface, resync time.Duration) cache.SharedIndexInformer {
		return cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return list(ctx, o)
			},
			WatchFuncWithContext: watchFn,
		}, api.Snap), obj, resync, cache.Indexers{})
	}
}

func waitFor(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func TestHandles(t *testing.T) {
	cases := map[string]struct {
		node    string
		content *snapv1.VolumeSnapshotContent
		want    bool
	}{
		"a content of our driver":                        {content: newContent("c1"), want: true},
		"a content of another driver":                    {content: newContent("c1", testkit.Driver("x")), want: false},
		"a group member (released on deletion)":          {content: newContent("c1", testkit.Annotated(snapshot.AnnVolumeGroupSnapshotHandle, "")), want: true},
		"a content of this node in a node deployment":    {node: "n1", content: newContent("c1", testkit.Labelled(snapshot.LabelManagedBy, "n1")), want: true},
		"a content of another node in a node deployment": {node: "n1", content: newContent("c1", testkit.Labelled(snapshot.LabelManagedBy, "n2")), want: false},
		"an unlabelled content in a node deployment":     {node: "n1", content: newContent("c1"), want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := &Controller{driver: testDriver, cfg: Config{NodeName: tc.node}}
			if got := c.handles(tc.content.Spec.Driver, tc.content); got != tc.want {
				t.Errorf("handles = %v, want %v", got, tc.want)
			}
			// The same rule for a group content with the content's driver
			// and labels.
			g := newGroupContent("g1", testkit.Driver(tc.content.Spec.Driver))
			g.Labels = tc.content.Labels
			if got := c.handles(g.Spec.Driver, g); got != tc.want {
				t.Errorf("handles(group content) = %v, want %v", got, tc.want)
			}
		})
	}
}
