package csiside

import (
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/snapkeeper/snapkeeper/pkg/csi"
	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/sync/testkit"
)

// groupCaps are those of a driver with the group controller service.
var groupCaps = csi.Capabilities{CreateDeleteSnapshot: true, GroupSnapshots: true}

// newGroupHarness wires the CSI side with the group loop over a fake API
// server that holds objs.
func newGroupHarness(t *testing.T, objs ...runtime.Object) *harness {
	t.Helper()
	return newHarness(t, setup{objects: objs, caps: groupCaps})
}

// syncGroup delivers the API server's contents to the caches first, as the
// watches would, then syncs group content name and returns when it asks to
// be synced again.
func (h *harness) syncGroup(name string) time.Duration {
	h.t.Helper()
	h.refresh()
	res, err := h.ctrl.syncGroupContent(h.ctx, name)
	if err != nil {
		h.t.Fatal(err)
	}
	return res.RequeueAfter
}

// newDynamicGroup is a harness holding group content gc1 of class groups,
// dynamic, of volumes vol-1 and vol-2 and bound to ns/g1, with the
// CreateVolumeGroupSnapshot request that cuts it.
func newDynamicGroup(t *testing.T) (*harness, csi.CreateGroupRequest) {
	t.Helper()
	content := testkit.GroupContent("gc1", testkit.Finalizers(), testkit.ClassName("groups"),
		testkit.RefTo("ns", "g1", testUID), testkit.Volumes("vol-1", "vol-2"))
	h := newGroupHarness(t, testkit.GroupClass("groups"), content)
	return h, csi.CreateGroupRequest{Name: "groupsnapshot-" + string(testUID), SourceVolumeIDs: []string{"vol-1", "vol-2"}}
}

// A group content goes through the same steps as a content: a final
// create error is shown once and clears the being-created mark, the next
// attempt after the backoff stores the group and its members and unmarks,
// and the binder's being-deleted mark lets the deletion call
// DeleteVolumeGroupSnapshot with every member's id and release.
func TestGroupContentGoesThroughTheSameLifecycle(t *testing.T) {
	h, req := newDynamicGroup(t)

	h.driver.script(createGroupCall(req, nil, grpcErr(codes.InvalidArgument, "no such volumes")))
	h.syncGroup("gc1")
	got := h.api.GroupContent("gc1")
	if msg := h.ctrl.group(got).errorMessage; msg != "Failed to create group snapshot: InvalidArgument: no such volumes" {
		t.Errorf("status.error = %q", msg)
	}
	if _, marked := got.Annotations[snapshot.AnnGroupBeingCreated]; marked {
		t.Error("a final error of the first attempt must clear the being-created mark")
	}
	if !snapshot.HasFinalizer(got, snapshot.FinalizerGroupContentBound) {
		t.Error("a Delete group content must get its finalizer before the call")
	}
	if ev := h.events(); len(ev) != 1 || !slices.ContainsFunc(ev, func(e string) bool { return strings.Contains(e, snapshot.ReasonGroupCreationFailed) }) {
		t.Errorf("events = %v, want one %s", ev, snapshot.ReasonGroupCreationFailed)
	}

	h.syncGroup("gc1") // within the backoff: no call
	h.now = h.now.Add(retryBackoff.Max)
	h.driver.script(createGroupCall(req, &csi.GroupSnapshot{ID: "group-1", ReadyToUse: true, Snapshots: []*csi.Snapshot{
		{ID: "s1", SourceVolumeID: "vol-1", ReadyToUse: true}, {ID: "s2", SourceVolumeID: "vol-2", ReadyToUse: true},
	}}, nil))
	h.syncGroup("gc1")
	got = h.api.GroupContent("gc1")
	if st := got.Status; st == nil || ptr.Deref(st.VolumeGroupSnapshotHandle, "") != "group-1" || !ptr.Deref(st.ReadyToUse, false) ||
		len(st.VolumeSnapshotInfoList) != 2 || st.Error != nil {
		t.Fatalf("status after the create = %+v", st)
	}
	if _, marked := got.Annotations[snapshot.AnnGroupBeingCreated]; marked {
		t.Error("the being-created mark must go once the group id is stored")
	}

	// Deleted without the binder's mark: the backend group and the
	// finalizer stay (the driver fails the test on any call).
	if err := h.api.Snap.GroupsnapshotV1().VolumeGroupSnapshotContents().Delete(h.ctx, "gc1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.syncGroup("gc1")
	if !snapshot.HasFinalizer(h.api.GroupContent("gc1"), snapshot.FinalizerGroupContentBound) {
		t.Fatal("deleted without the being-deleted mark: the finalizer must stay")
	}
	marked := h.api.GroupContent("gc1")
	marked.Annotations[snapshot.AnnGroupBeingDeleted] = snapshot.ValueYes
	if _, err := h.api.Snap.GroupsnapshotV1().VolumeGroupSnapshotContents().Update(h.ctx, marked, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// DeleteVolumeGroupSnapshot with every member's id, once.
	h.driver.script(deleteGroupCall("group-1", []string{"s1", "s2"}, nil, nil))
	h.syncGroup("gc1")
	if h.api.GroupContent("gc1") != nil {
		t.Error("the group content must be gone once its finalizer is released")
	}
}

// A cut group the driver reports not ready is polled again with a
// per-content backoff that doubles up to the retry maximum, and the events
// of our own status writes, coming back within the delay, call nothing and
// leave the delay as it is (what v8.7.0's sidecar fixed: its requeue of a
// not-ready group content, reset by its own updates).
func TestGroupNotReadyPollsWithBackoffOwnWritesKeepIt(t *testing.T) {
	h, req := newDynamicGroup(t)
	group := func(ready bool) *csi.GroupSnapshot {
		return &csi.GroupSnapshot{ID: "group-1", ReadyToUse: ready, Snapshots: []*csi.Snapshot{
			{ID: "s1", SourceVolumeID: "vol-1", ReadyToUse: ready}, {ID: "s2", SourceVolumeID: "vol-2", ReadyToUse: ready}}}
	}
	h.driver.script(createGroupCall(req, group(false), nil))
	if d := h.syncGroup("gc1"); d != minPollStart {
		t.Fatalf("the cut requeues after %v, want %v", d, minPollStart)
	}
	if st := h.api.GroupContent("gc1").Status; st == nil || ptr.Deref(st.ReadyToUse, true) {
		t.Fatalf("status after a not-ready cut = %+v", st)
	}
	h.writes()
	// Our own writes come back as update events: no call (the driver
	// fails the test on an unscripted one), the remaining delay.
	for range 3 {
		if d := h.syncGroup("gc1"); d != minPollStart {
			t.Fatalf("an event within the delay requeues after %v, want %v", d, minPollStart)
		}
	}
	want := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second}
	wait := minPollStart
	for i, w := range want {
		h.now = h.now.Add(wait)
		h.driver.script(createGroupCall(req, group(false), nil))
		if d := h.syncGroup("gc1"); d != w {
			t.Fatalf("poll %d requeues after %v, want %v", i+1, d, w)
		}
		h.now = h.now.Add(w / 2)
		if d := h.syncGroup("gc1"); d != w/2 {
			t.Fatalf("an event halfway through poll %d's delay requeues after %v, want %v", i+1, d, w/2)
		}
		wait = w / 2
	}
	if w := h.writes(); len(w) != 0 {
		t.Errorf("unchanged polls wrote %v", w)
	}
	h.now = h.now.Add(wait)
	h.driver.script(createGroupCall(req, group(true), nil))
	if d := h.syncGroup("gc1"); d != 0 {
		t.Fatalf("the ready poll requeues after %v, want done", d)
	}
	if st := h.api.GroupContent("gc1").Status; st == nil || !ptr.Deref(st.ReadyToUse, false) {
		t.Errorf("status after the ready poll = %+v", st)
	}
	if n := h.ctrl.polls.len(); n != 0 {
		t.Errorf("%d poll states remain after ready", n)
	}
}
