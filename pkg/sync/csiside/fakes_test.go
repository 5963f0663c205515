package csiside

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapfake "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned/fake"
	snapinformers "github.com/kubernetes-csi/external-snapshotter/client/v8/informers/externalversions"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/snapkeeper/snapkeeper/pkg/csi"
	"github.com/snapkeeper/snapkeeper/pkg/sync/workloop"
	"github.com/snapkeeper/snapkeeper/pkg/writer"
)

const (
	testDriver  = "hostpath.csi.k8s.io"
	testUID     = types.UID("11111111-2222-3333-4444-555555555555")
	testCSIName = "snapshot-11111111-2222-3333-4444-555555555555"
	testSecret  = "s3cr3t-value-never-logged"
)

var (
	contentsGVR  = snapv1.SchemeGroupVersion.WithResource("volumesnapshotcontents")
	testTime     = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	testSecrets  = map[string]string{"password": testSecret}
	retryBackoff = workloop.Backoff{Start: time.Second, Max: 8 * time.Second}
)

// ---- scripted CSI driver ----

// call is one expected driver call with its canned answer.
type call struct {
	method  string // CreateSnapshot, GetSnapshot or DeleteSnapshot
	req     csi.CreateRequest
	id      string
	secrets map[string]string
	snap    *csi.Snapshot
	err     error
	// during runs while the call is made, e.g. to look at the API server.
	during func()
}

func createCall(req csi.CreateRequest, snap *csi.Snapshot, err error) call {
	return call{method: "CreateSnapshot", req: req, snap: snap, err: err}
}

func getCall(id string, snap *csi.Snapshot, err error) call {
	return call{method: "GetSnapshot", id: id, snap: snap, err: err}
}

func deleteCall(id string, secrets map[string]string, err error) call {
	return call{method: "DeleteSnapshot", id: id, secrets: secrets, err: err}
}

// fakeDriver answers the calls of its script in order and fails the test on
// any call it does not expect.
type fakeDriver struct {
	t    *testing.T
	caps csi.Capabilities

	mu    sync.Mutex
	calls []call
	made  int
}

func (d *fakeDriver) Name() string                   { return testDriver }
func (d *fakeDriver) Capabilities() csi.Capabilities { return d.caps }

func (d *fakeDriver) script(calls ...call) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, calls...)
}

func (d *fakeDriver) next(ctx context.Context, method string) (call, bool) {
	d.t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.made >= len(d.calls) {
		d.t.Errorf("unexpected call %s (call %d; %d expected)", method, d.made+1, len(d.calls))
		return call{}, false
	}
	c := d.calls[d.made]
	d.made++
	if c.method != method {
		d.t.Errorf("call %d: got %s, want %s", d.made, method, c.method)
		return call{}, false
	}
	return c, true
}

func (d *fakeDriver) CreateSnapshot(ctx context.Context, req csi.CreateRequest) (*csi.Snapshot, error) {
	c, ok := d.next(ctx, "CreateSnapshot")
	if !ok {
		return nil, status.Error(codes.Internal, "unexpected call")
	}
	if diff := cmp.Diff(c.req, req); diff != "" {
		d.t.Errorf("CreateSnapshot request (-want +got):\n%s", diff)
	}
	if c.during != nil {
		c.during()
	}
	return c.snap, c.err
}

func (d *fakeDriver) GetSnapshot(ctx context.Context, id string, secrets map[string]string) (*csi.Snapshot, error) {
	c, ok := d.next(ctx, "GetSnapshot")
	if !ok {
		return nil, status.Error(codes.Internal, "unexpected call")
	}
	if c.id != id || !cmp.Equal(c.secrets, secrets) {
		d.t.Errorf("GetSnapshot(%q, %d secrets), want (%q, %d secrets)", id, len(secrets), c.id, len(c.secrets))
	}
	if c.during != nil {
		c.during()
	}
	return c.snap, c.err
}

func (d *fakeDriver) DeleteSnapshot(ctx context.Context, id string, secrets map[string]string) error {
	c, ok := d.next(ctx, "DeleteSnapshot")
	if !ok {
		return status.Error(codes.Internal, "unexpected call")
	}
	if c.id != id || !cmp.Equal(c.secrets, secrets) {
		d.t.Errorf("DeleteSnapshot(%q, %d secrets), want (%q, %d secrets)", id, len(secrets), c.id, len(c.secrets))
	}
	if c.during != nil {
		c.during()
	}
	return c.err
}

// verify fails the test when scripted calls were not made.
func (d *fakeDriver) verify() {
	d.t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.calls[d.made:] {
		d.t.Errorf("expected call %s was not made", c.method)
	}
}

// grpcErr is an error as the production client returns it: a gRPC status
// wrapped in context.
func grpcErr(code codes.Code, msg string) error {
	return fmt.Errorf("CSI driver %q: call: %w", testDriver, status.Error(code, msg))
}

func snapOf(id string, ready bool) *csi.Snapshot {
	return &csi.Snapshot{ID: id, SourceVolumeID: "vol-1", CreationTime: testTime, SizeBytes: 1 << 30, ReadyToUse: ready}
}

// ---- an API server for contents ----

// injection fails the next times matching requests with err.
type injection struct {
	verb, resource, subresource string
	err                         error
	times                       int
}

// fakeAPI makes the fake clientsets behave like an API server for
// contents: merge patches split between the object and its status
// subresource, resourceVersion preconditions (conflicts), fresh
// resourceVersions on every write, finalizers that hold a deleted object,
// and injected errors.
type fakeAPI struct {
	snap *snapfake.Clientset
	kube *kubefake.Clientset

	mu     sync.Mutex
	rv     int
	inject []*injection
}

func newFakeAPI(snapObjs, kubeObjs []runtime.Object) *fakeAPI {
	//lint:ignore SA1019 client/v8 generates no apply configurations, so it has no NewClientset
	snap := snapfake.NewSimpleClientset(snapObjs...)
	a := &fakeAPI{snap: snap, kube: kubefake.NewClientset(kubeObjs...), rv: 100}
	a.snap.PrependReactor("patch", "volumesnapshotcontents", a.patchContent)
	a.snap.PrependReactor("delete", "volumesnapshotcontents", a.deleteContent)
	// Prepended last, so the injections run first.
	a.snap.PrependReactor("*", "*", a.injected)
	a.kube.PrependReactor("*", "*", a.injected)
	return a
}

func (a *fakeAPI) failNext(verb, resource, subresource string, err error, times int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.inject = append(a.inject, &injection{verb, resource, subresource, err, times})
}

func (a *fakeAPI) injected(action k8stesting.Action) (bool, runtime.Object, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, in := range a.inject {
		if in.times > 0 && action.Matches(in.verb, in.resource) && action.GetSubresource() == in.subresource {
			in.times--
			return true, nil, in.err
		}
	}
	return false, nil, nil
}

func (a *fakeAPI) nextRV() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rv++
	return strconv.Itoa(a.rv)
}

func (a *fakeAPI) patchContent(action k8stesting.Action) (bool, runtime.Object, error) {
	pa := action.(k8stesting.PatchAction)
	if pa.GetPatchType() != types.MergePatchType {
		return true, nil, fmt.Errorf("unexpected patch type %s", pa.GetPatchType())
	}
	obj, err := a.snap.Tracker().Get(contentsGVR, "", pa.GetName())
	if err != nil {
		return true, nil, err
	}
	cur := obj.(*snapv1.VolumeSnapshotContent)
	var patch map[string]any
	if err := json.Unmarshal(pa.GetPatch(), &patch); err != nil {
		return true, nil, apierrors.NewBadRequest(err.Error())
	}
	if meta, ok := patch["metadata"].(map[string]any); ok {
		if rv, ok := meta["resourceVersion"].(string); ok && rv != cur.ResourceVersion {
			return true, nil, apierrors.NewConflict(contentsGVR.GroupResource(), cur.Name,
				fmt.Errorf("the object has been modified (resourceVersion %s, patch %s)", cur.ResourceVersion, rv))
		}
		delete(meta, "resourceVersion")
	}
	if pa.GetSubresource() == "status" {
		patch = map[string]any{"status": patch["status"]}
	} else {
		delete(patch, "status")
	}
	next, err := applyMergePatch(cur, patch)
	if err != nil {
		return true, nil, err
	}
	next.ResourceVersion = a.nextRV()
	if next.DeletionTimestamp != nil && len(next.Finalizers) == 0 {
		return true, next, a.snap.Tracker().Delete(contentsGVR, "", next.Name)
	}
	return true, next, a.snap.Tracker().Update(contentsGVR, next, "")
}

func (a *fakeAPI) deleteContent(action k8stesting.Action) (bool, runtime.Object, error) {
	name := action.(k8stesting.DeleteAction).GetName()
	obj, err := a.snap.Tracker().Get(contentsGVR, "", name)
	if err != nil {
		return true, nil, err
	}
	content := obj.(*snapv1.VolumeSnapshotContent)
	if len(content.Finalizers) == 0 {
		return true, nil, a.snap.Tracker().Delete(contentsGVR, "", name)
	}
	if content.DeletionTimestamp == nil {
		now := metav1.NewTime(testTime)
		content.DeletionTimestamp = &now
		content.ResourceVersion = a.nextRV()
		return true, nil, a.snap.Tracker().Update(contentsGVR, content, "")
	}
	return true, nil, nil
}

// applyMergePatch applies an RFC 7386 merge patch to a content.
func applyMergePatch(cur *snapv1.VolumeSnapshotContent, patch map[string]any) (*snapv1.VolumeSnapshotContent, error) {
	raw, err := json.Marshal(cur)
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	merged, err := json.Marshal(mergeValue(doc, patch))
	if err != nil {
		return nil, err
	}
	out := &snapv1.VolumeSnapshotContent{}
	return out, json.Unmarshal(merged, out)
}

func mergeValue(doc any, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	d, ok := doc.(map[string]any)
	if !ok {
		d = map[string]any{}
	}
	for k, v := range p {
		if v == nil {
			delete(d, k)
			continue
		}
		d[k] = mergeValue(d[k], v)
	}
	return d
}

// ---- harness ----

type harness struct {
	t      *testing.T
	ctx    context.Context
	logs   ktesting.Buffer
	api    *fakeAPI
	driver *fakeDriver
	rec    *record.FakeRecorder
	ctrl   *Controller
	cache  cache.Indexer
	now    time.Time
}

type setup struct {
	contents []*snapv1.VolumeSnapshotContent
	objects  []runtime.Object // classes, snapshots
	secrets  []runtime.Object
	caps     csi.Capabilities
	config   func(*Config)
}

func newHarness(t *testing.T, s setup) *harness {
	t.Helper()
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true), ktesting.Verbosity(10)))
	snapObjs := slices.Clone(s.objects)
	for _, c := range s.contents {
		snapObjs = append(snapObjs, c)
	}
	h := &harness{
		t:      t,
		ctx:    klog.NewContext(context.Background(), logger),
		logs:   logger.GetSink().(ktesting.Underlier).GetBuffer(),
		api:    newFakeAPI(snapObjs, s.secrets),
		driver: &fakeDriver{t: t, caps: s.caps},
		rec:    record.NewFakeRecorder(100),
		now:    testTime,
	}
	if h.driver.caps == (csi.Capabilities{}) {
		h.driver.caps = csi.Capabilities{CreateDeleteSnapshot: true}
	}
	factory := snapinformers.NewSharedInformerFactory(h.api.snap, 0)
	cfg := Config{
		Driver:                 h.driver,
		Kube:                   h.api.kube,
		Snap:                   h.api.snap,
		Writer:                 writer.New(h.api.kube, h.api.snap, nil),
		ContentInformer:        factory.Snapshot().V1().VolumeSnapshotContents(),
		ClassInformer:          factory.Snapshot().V1().VolumeSnapshotClasses(),
		Recorder:               h.rec,
		SnapshotNameUUIDLength: -1,
		Backoff:                retryBackoff,
	}
	if s.config != nil {
		s.config(&cfg)
	}
	h.ctrl = New(cfg)
	h.ctrl.now = func() time.Time { return h.now }
	h.cache = cfg.ContentInformer.Informer().GetIndexer()
	for _, o := range s.objects {
		if class, ok := o.(*snapv1.VolumeSnapshotClass); ok {
			if err := cfg.ClassInformer.Informer().GetIndexer().Add(class); err != nil {
				t.Fatal(err)
			}
		}
	}
	h.refresh()
	h.api.snap.ClearActions()
	h.api.kube.ClearActions()
	t.Cleanup(h.driver.verify)
	return h
}

// refresh delivers the API server's contents to the informer cache, as the
// watch would.
func (h *harness) refresh() {
	h.t.Helper()
	list, err := h.api.snap.Tracker().List(contentsGVR, snapv1.SchemeGroupVersion.WithKind("VolumeSnapshotContent"), "")
	if err != nil {
		h.t.Fatal(err)
	}
	live := map[string]bool{}
	for _, c := range list.(*snapv1.VolumeSnapshotContentList).Items {
		live[c.Name] = true
		if err := h.cache.Update(c.DeepCopy()); err != nil {
			h.t.Fatal(err)
		}
	}
	for _, key := range h.cache.ListKeys() {
		if !live[key] {
			obj, _, _ := h.cache.GetByKey(key)
			_ = h.cache.Delete(obj)
		}
	}
}

func (h *harness) sync(name string) (workloop.Result, error) {
	h.t.Helper()
	return h.ctrl.sync(h.ctx, name)
}

// server returns the content as the API server holds it, nil when gone.
func (h *harness) server(name string) *snapv1.VolumeSnapshotContent {
	h.t.Helper()
	obj, err := h.api.snap.Tracker().Get(contentsGVR, "", name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		h.t.Fatal(err)
	}
	return obj.(*snapv1.VolumeSnapshotContent)
}

// writes lists the content writes sent since the last call, as
// "patch" or "patch status".
func (h *harness) writes() []string {
	var out []string
	for _, a := range h.api.snap.Actions() {
		if a.GetVerb() == "get" || a.GetVerb() == "list" || a.GetVerb() == "watch" {
			continue
		}
		w := a.GetVerb()
		if a.GetResource().Resource != contentsGVR.Resource {
			w += " " + a.GetResource().Resource
		}
		if a.GetSubresource() != "" {
			w += " " + a.GetSubresource()
		}
		out = append(out, w)
	}
	h.api.snap.ClearActions()
	return out
}

// patches returns the bodies of the content patches sent so far.
func (h *harness) patches() []string {
	var out []string
	for _, a := range h.api.snap.Actions() {
		if pa, ok := a.(k8stesting.PatchAction); ok {
			out = append(out, string(pa.GetPatch()))
		}
	}
	return out
}

// events drains the recorded events.
func (h *harness) events() []string {
	var out []string
	for {
		select {
		case e := <-h.rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}
