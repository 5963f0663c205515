package csiside

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapinformers "github.com/kubernetes-csi/external-snapshotter/client/v8/informers/externalversions"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/snapkeeper/snapkeeper/pkg/csi"
	"github.com/snapkeeper/snapkeeper/pkg/sync/testkit"
	"github.com/snapkeeper/snapkeeper/pkg/sync/workloop"
	"github.com/snapkeeper/snapkeeper/pkg/writer"
)

const (
	testDriver  = testkit.DriverName
	testUID     = types.UID("11111111-2222-3333-4444-555555555555")
	testCSIName = "snapshot-11111111-2222-3333-4444-555555555555"
	testSecret  = "s3cr3t-value-never-logged"
)

var (
	testTime     = testkit.Time
	testSecrets  = map[string]string{"password": testSecret}
	retryBackoff = workloop.Backoff{Start: time.Second, Max: 8 * time.Second}
)

// ---- scripted CSI driver ----

// call is one expected driver call with its canned answer.
type call struct {
	// method is CreateSnapshot, GetSnapshot or DeleteSnapshot, or a group
	// call: CreateGroupSnapshot, GetGroupSnapshot or DeleteGroupSnapshot.
	method   string
	req      csi.CreateRequest
	groupReq csi.CreateGroupRequest
	id       string
	// members are the member snapshot ids a group call names.
	members []string
	secrets map[string]string
	snap    *csi.Snapshot
	group   *csi.GroupSnapshot
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

func createGroupCall(req csi.CreateGroupRequest, group *csi.GroupSnapshot, err error) call {
	return call{method: "CreateGroupSnapshot", groupReq: req, group: group, err: err}
}

func deleteGroupCall(id string, members []string, secrets map[string]string, err error) call {
	return call{method: "DeleteGroupSnapshot", id: id, members: members, secrets: secrets, err: err}
}

// fakeDriver answers the calls of its script in order and fails the test on
// any call it does not expect. It offers the group controller service too,
// when its capabilities say so.
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

func (d *fakeDriver) CreateGroupSnapshot(ctx context.Context, req csi.CreateGroupRequest) (*csi.GroupSnapshot, error) {
	c, ok := d.next(ctx, "CreateGroupSnapshot")
	if !ok {
		return nil, status.Error(codes.Internal, "unexpected call")
	}
	if diff := cmp.Diff(c.groupReq, req, cmpopts.EquateEmpty()); diff != "" {
		d.t.Errorf("CreateGroupSnapshot request (-want +got):\n%s", diff)
	}
	if c.during != nil {
		c.during()
	}
	return c.group, c.err
}

func (d *fakeDriver) GetGroupSnapshot(ctx context.Context, id string, ids []string, secrets map[string]string) (*csi.GroupSnapshot, error) {
	c, ok := d.next(ctx, "GetGroupSnapshot")
	if !ok {
		return nil, status.Error(codes.Internal, "unexpected call")
	}
	if c.id != id || !slices.Equal(c.members, ids) || !cmp.Equal(c.secrets, secrets) {
		d.t.Errorf("GetGroupSnapshot(%q, %v, %d secrets), want (%q, %v, %d secrets)", id, ids, len(secrets), c.id, c.members, len(c.secrets))
	}
	return c.group, c.err
}

func (d *fakeDriver) DeleteGroupSnapshot(ctx context.Context, id string, ids []string, secrets map[string]string) error {
	c, ok := d.next(ctx, "DeleteGroupSnapshot")
	if !ok {
		return status.Error(codes.Internal, "unexpected call")
	}
	if c.id != id || !slices.Equal(c.members, ids) || !cmp.Equal(c.secrets, secrets) {
		d.t.Errorf("DeleteGroupSnapshot(%q, %v, %d secrets), want (%q, %v, %d secrets)", id, ids, len(secrets), c.id, c.members, len(c.secrets))
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

// ---- harness ----

type harness struct {
	t      *testing.T
	ctx    context.Context
	logs   ktesting.Buffer
	api    *testkit.API
	driver *fakeDriver
	rec    *record.FakeRecorder
	ctrl   *Controller
	cache  cache.Indexer
	// groupCache is the group content informer's store, when the group
	// loop runs (caps.GroupSnapshots).
	groupCache cache.Indexer
	now        time.Time
}

// setup is what a harness starts with. With caps.GroupSnapshots the group
// loop runs too, as with a driver of the group controller service.
type setup struct {
	contents []*snapv1.VolumeSnapshotContent
	objects  []runtime.Object // classes, snapshots, group contents, group classes
	secrets  []runtime.Object
	caps     csi.Capabilities
	config   func(*Config)
}

func newHarness(t *testing.T, s setup) *harness {
	t.Helper()
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true), ktesting.Verbosity(10)))
	objs := slices.Concat(s.objects, s.secrets)
	for _, c := range s.contents {
		objs = append(objs, c)
	}
	h := &harness{
		t:      t,
		ctx:    klog.NewContext(context.Background(), logger),
		logs:   logger.GetSink().(ktesting.Underlier).GetBuffer(),
		api:    testkit.NewAPI(t, objs...),
		driver: &fakeDriver{t: t, caps: s.caps},
		rec:    record.NewFakeRecorder(100),
		now:    testTime,
	}
	if h.driver.caps == (csi.Capabilities{}) {
		h.driver.caps = csi.Capabilities{CreateDeleteSnapshot: true}
	}
	factory := snapinformers.NewSharedInformerFactory(h.api.Snap, 0)
	cfg := Config{
		Driver:                 h.driver,
		Kube:                   h.api.Kube,
		Snap:                   h.api.Snap,
		Writer:                 writer.New(h.api.Kube, h.api.Snap, nil),
		ContentInformer:        factory.Snapshot().V1().VolumeSnapshotContents(),
		ClassInformer:          factory.Snapshot().V1().VolumeSnapshotClasses(),
		Recorder:               h.rec,
		SnapshotNameUUIDLength: -1,
		Backoff:                retryBackoff,
	}
	if s.caps.GroupSnapshots {
		cfg.Groups = &GroupConfig{
			ContentInformer: factory.Groupsnapshot().V1().VolumeGroupSnapshotContents(),
			ClassInformer:   factory.Groupsnapshot().V1().VolumeGroupSnapshotClasses(),
			NameUUIDLength:  -1,
		}
	}
	if s.config != nil {
		s.config(&cfg)
	}
	h.ctrl = New(cfg)
	h.ctrl.now = func() time.Time { return h.now }
	h.cache = cfg.ContentInformer.Informer().GetIndexer()
	if cfg.Groups != nil {
		h.groupCache = cfg.Groups.ContentInformer.Informer().GetIndexer()
	}
	for _, o := range s.objects {
		var err error
		switch class := o.(type) {
		case *snapv1.VolumeSnapshotClass:
			err = cfg.ClassInformer.Informer().GetIndexer().Add(class)
		case *groupv1.VolumeGroupSnapshotClass:
			if cfg.Groups != nil {
				err = cfg.Groups.ClassInformer.Informer().GetIndexer().Add(class)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	h.refresh()
	h.api.ClearActions()
	t.Cleanup(h.driver.verify)
	return h
}

// refresh delivers the API server's contents (and group contents) to the
// informer caches, as the watches would.
func (h *harness) refresh() {
	h.t.Helper()
	var contents, groups []runtime.Object
	for _, c := range h.api.Contents() {
		contents = append(contents, c)
	}
	h.deliver(h.cache, contents)
	if h.groupCache != nil {
		for _, c := range h.api.GroupContents() {
			groups = append(groups, c)
		}
		h.deliver(h.groupCache, groups)
	}
}

// deliver makes store hold live, and nothing else.
func (h *harness) deliver(store cache.Indexer, live []runtime.Object) {
	h.t.Helper()
	names := map[string]bool{}
	for _, o := range live {
		if err := store.Update(o); err != nil {
			h.t.Fatal(err)
		}
		key, _ := cache.MetaNamespaceKeyFunc(o)
		names[key] = true
	}
	for _, key := range store.ListKeys() {
		if !names[key] {
			obj, _, _ := store.GetByKey(key)
			_ = store.Delete(obj)
		}
	}
}

func (h *harness) sync(name string) (workloop.Result, error) {
	h.t.Helper()
	return h.ctrl.sync(h.ctx, name)
}

// mustSync syncs name and stops the test if the sync fails.
func (h *harness) mustSync(name string) {
	h.t.Helper()
	if _, err := h.sync(name); err != nil {
		h.t.Fatalf("sync %s: %v", name, err)
	}
}

// writes lists the writes sent since the last call, as "patch" or
// "patch status" for contents and group contents, "verb resource
// [subresource]" for others.
func (h *harness) writes() []string {
	var out []string
	for _, w := range h.api.Writes() {
		s := w.Verb
		if w.Resource != testkit.ContentsGVR.Resource && w.Resource != testkit.GroupContentsGVR.Resource {
			s += " " + w.Resource
		}
		if w.Subresource != "" {
			s += " " + w.Subresource
		}
		out = append(out, s)
	}
	h.api.ClearActions()
	return out
}

// patches returns the bodies of the patches sent so far.
func (h *harness) patches() []string {
	var out []string
	for _, w := range h.api.Writes() {
		if w.Verb == "patch" {
			out = append(out, w.Patch)
		}
	}
	return out
}

// events drains the recorded events.
func (h *harness) events() []string { return testkit.Events(h.rec) }
