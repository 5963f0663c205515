package csiside

import (
	"context"
	"strings"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/snapkeeper/snapkeeper/pkg/csi/csitest"
	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

// A driver that reports a snapshot not ready for its first answers is
// polled until it is ready; the snapshot is cut exactly once, under the
// deterministic name, and deleting the VolumeSnapshot deletes it.
func TestNotReadyIsPolledUntilReadyThenDeleted(t *testing.T) {
	const notReady = 3 // polls 1, 3 and 7 s after the cut
	s := newWorld(t, framework.ScenarioOptions{Faults: []framework.FaultRule{{Method: "*", NotReady: notReady}}})
	vs, contentName := s.snapData(t)

	// The cut is stored at once, not ready, and the mark is gone.
	s.Env.WaitContent(t, contentName, "cut but not ready", 30*time.Second, func(c *snapv1.VolumeSnapshotContent) bool {
		return handleOf(c) != "" && c.Status.ReadyToUse != nil && !*c.Status.ReadyToUse
	})
	got := s.WaitReady(t, "snap", 30*time.Second)
	if got.Status.CreationTime == nil {
		t.Error("ready snapshot has no creationTime")
	}
	if got.Status.Error != nil {
		t.Errorf("ready snapshot still shows an error: %s", framework.JSON(got.Status))
	}
	content := s.Content(t, contentName)
	if beingCreated(content) {
		t.Error("ready content still marked being-created")
	}
	backend := s.Drv.Created(t)
	if len(backend) != 1 {
		t.Fatalf("driver holds %+v, want one snapshot", backend)
	}
	if want := csiName("snapshot", string(vs.UID), -1); backend[0].Name != want {
		t.Errorf("backend snapshot named %q, want %q", backend[0].Name, want)
	}
	if backend[0].ID != handleOf(content) {
		t.Errorf("content handle %q, backend id %q", handleOf(content), backend[0].ID)
	}
	if want := s.Handle("data"); backend[0].SourceVolumeID != want {
		t.Errorf("snapshot of volume %q, want %q", backend[0].SourceVolumeID, want)
	}
	// A dynamic snapshot is polled with CreateSnapshot (same name, same
	// parameters and secret), as the community sidecar polls it.
	s.wantCalls(t, mList, "OK", 0, "dynamic snapshots are polled with CreateSnapshot")
	if polls := s.calls(t, mCreate, "OK"); polls < notReady+1 {
		t.Errorf("driver answered %d CreateSnapshot calls, want at least %d (not ready %d times, then ready)", polls, notReady+1, notReady)
	}
	s.BackendMatchesContents(t)

	s.DeleteAndExpectNothingLeft(t, "snap", contentName)
	s.wantCalls(t, mDelete, "OK", 1, "")
}

// A final CreateSnapshot error is shown on the VolumeSnapshot with the
// driver's message; the content drops its being-created mark (nothing was
// cut), and deleting the snapshot leaves nothing anywhere.
func TestFinalErrorShownOnSnapshot(t *testing.T) {
	const msg = "volume cannot be snapshotted: unsupported filesystem xfs-legacy"
	s := newWorld(t, framework.ScenarioOptions{Faults: []framework.FaultRule{{Method: "CreateSnapshot", Code: "InvalidArgument", Message: msg}}})
	_, contentName := s.snapData(t)

	got := s.WaitSnapshotError(t, "snap", msg, 30*time.Second)
	if !strings.Contains(*got.Status.Error.Message, "InvalidArgument") {
		t.Errorf("error %q does not name the gRPC code", *got.Status.Error.Message)
	}
	if got.Status.ReadyToUse != nil && *got.Status.ReadyToUse {
		t.Error("failed snapshot reports ready")
	}
	s.Env.WaitContent(t, contentName, "without mark, handle, with the error", 30*time.Second, func(c *snapv1.VolumeSnapshotContent) bool {
		return !beingCreated(c) && handleOf(c) == "" &&
			c.Status != nil && c.Status.Error != nil && c.Status.Error.Message != nil && strings.Contains(*c.Status.Error.Message, msg)
	})
	if n := s.calls(t, mCreate, "InvalidArgument"); n < 1 {
		t.Errorf("CreateSnapshot failed %d times, want at least once", n)
	}
	if b := s.Drv.Created(t); len(b) != 0 {
		t.Fatalf("driver holds %+v after a final error", b)
	}
	s.BackendMatchesContents(t)

	s.DeleteAndExpectNothingLeft(t, "snap", contentName)
	s.wantCalls(t, mCreate, "OK", 0, "")
}

// An error that means "may still be in progress" (Unavailable, here after
// the backend already cut the snapshot) keeps the being-created mark, is
// shown to the user, and recovers to ready without a second snapshot.
func TestInProgressErrorRecovers(t *testing.T) {
	const msg = "backend busy, try later"
	s := newWorld(t, framework.ScenarioOptions{
		Faults:         []framework.FaultRule{{Method: "CreateSnapshot", Code: "Unavailable", Message: msg, Times: 3, AfterCall: true}},
		ControllerArgs: []string{"--retry-interval-start=500ms"},
	})
	_, contentName := s.snapData(t)

	// Every version of the content that shows the error still carries the
	// mark and no handle: the handle and the cleared error come in one
	// status write, the mark goes only after it.
	c := s.Env.WaitContent(t, contentName, "showing the in-progress error", 30*time.Second, func(c *snapv1.VolumeSnapshotContent) bool {
		return c.Status != nil && c.Status.Error != nil && c.Status.Error.Message != nil && strings.Contains(*c.Status.Error.Message, msg)
	})
	if !beingCreated(c) {
		t.Errorf("content lost its being-created mark on an in-progress error: %v", c.Annotations)
	}
	if handleOf(c) != "" {
		t.Errorf("content shows an error and a handle %q", handleOf(c))
	}
	s.WaitSnapshotError(t, "snap", msg, 30*time.Second)

	got := s.WaitReady(t, "snap", 30*time.Second)
	if got.Status.Error != nil {
		t.Errorf("ready snapshot still shows the error: %s", framework.JSON(got.Status))
	}
	c = s.Content(t, contentName)
	if beingCreated(c) {
		t.Error("ready content still marked being-created")
	}
	s.wantCalls(t, mCreate, "Unavailable", 3, "")
	if b := s.Drv.Created(t); len(b) != 1 || b[0].ID != handleOf(c) {
		t.Fatalf("driver holds %+v, want exactly the content's %q", b, handleOf(c))
	}
	s.BackendMatchesContents(t)

	s.DeleteAndExpectNothingLeft(t, "snap", contentName)
}

// A VolumeSnapshot deleted while its CreateSnapshot call is still in flight
// (the backend already cut the snapshot, the answer has not come) leaves
// nothing behind: the create is finished, then the snapshot deleted
// (external-snapshotter issue 1388).
func TestDeleteWhileCreateInFlight(t *testing.T) {
	cases := []struct {
		name  string
		fault framework.FaultRule
		args  []string
	}{
		{"answer comes after the delete", framework.FaultRule{Method: "CreateSnapshot", Hang: csitest.Duration(6 * time.Second), Times: 1}, nil},
		{"call times out after the delete", framework.FaultRule{Method: "CreateSnapshot", HangUntilDeadline: true, Times: 1}, []string{"--timeout=5s"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newWorld(t, framework.ScenarioOptions{Faults: []framework.FaultRule{tc.fault}, ControllerArgs: tc.args})
			_, contentName := s.snapData(t)

			// The backend has cut it; the controller is still waiting.
			s.WaitBackend(t, 1, 30*time.Second)
			c := s.Content(t, contentName)
			if !beingCreated(c) || handleOf(c) != "" {
				t.Fatalf("in-flight content: annotations %v, handle %q", c.Annotations, handleOf(c))
			}
			s.DeleteSnapshot(t, "snap")
			c = s.Env.WaitContent(t, contentName, "deleted", 10*time.Second, func(c *snapv1.VolumeSnapshotContent) bool {
				return c.DeletionTimestamp != nil
			})
			if !snapshot.HasFinalizer(c, snapshot.FinalizerContentBound) {
				t.Fatalf("deleted in-flight content lacks the bound finalizer: %v", c.Finalizers)
			}
			s.WaitSnapshotGone(t, "snap")
			s.WaitContentGone(t, contentName)
			if b := s.Drv.Created(t); len(b) != 0 {
				t.Fatalf("driver still holds %+v", b)
			}
			if n := s.calls(t, mDelete, "OK"); n < 1 {
				t.Errorf("DeleteSnapshot answered OK %d times", n)
			}
			s.BackendMatchesContents(t)
		})
	}
}

// A CreateSnapshot that times out while the backend cuts the snapshot is
// retried under the same name: ready, exactly one backend snapshot
// (external-snapshotter issue 134).
func TestCreateTimeoutRetriedWithoutDuplicate(t *testing.T) {
	s := newWorld(t, framework.ScenarioOptions{
		Faults: []framework.FaultRule{{Method: "CreateSnapshot", HangUntilDeadline: true, Times: 1}},
		// A slow first retry, so the timed-out state can be looked at.
		ControllerArgs: []string{"--timeout=2s", "--retry-interval-start=3s"},
	})
	_, contentName := s.snapData(t)

	// Timed out: the backend has the snapshot, the content keeps the mark
	// (the call may still be cutting), has no handle and says why.
	c := s.Env.WaitContent(t, contentName, "showing the timeout", 30*time.Second, func(c *snapv1.VolumeSnapshotContent) bool {
		return c.Status != nil && c.Status.Error != nil && c.Status.Error.Message != nil &&
			strings.Contains(*c.Status.Error.Message, "DeadlineExceeded")
	})
	if !beingCreated(c) || handleOf(c) != "" {
		t.Errorf("timed-out content: annotations %v, handle %q; want the mark and no handle", c.Annotations, handleOf(c))
	}
	if b := s.Drv.Created(t); len(b) != 1 {
		t.Fatalf("driver holds %+v during the timeout, want the one snapshot it cut", b)
	}
	s.WaitSnapshotError(t, "snap", "DeadlineExceeded", 10*time.Second)

	got := s.WaitReady(t, "snap", 30*time.Second)
	if got.Status.Error != nil {
		t.Errorf("ready snapshot still shows an error: %s", framework.JSON(got.Status))
	}
	timeouts, err := s.Ctrl.Metric(context.Background(), "csi_sidecar_operations_seconds_count",
		`method_name="`+mCreate+`"`, `grpc_status_code="DeadlineExceeded"`)
	if err != nil {
		t.Fatal(err)
	}
	if timeouts < 1 {
		t.Errorf("controller saw %v CreateSnapshot timeouts, want at least 1", timeouts)
	}
	calls := s.Drv.Calls(t)[mCreate]
	var total int64
	for _, n := range calls {
		total += n
	}
	if total < 2 {
		t.Errorf("CreateSnapshot called %d times (%v), want a retry after the timeout", total, calls)
	}
	c = s.Content(t, contentName)
	if beingCreated(c) {
		t.Error("ready content still marked being-created")
	}
	if b := s.Drv.Created(t); len(b) != 1 || b[0].ID != handleOf(c) {
		t.Fatalf("driver holds %+v, want exactly the content's %q", b, handleOf(c))
	}
	s.BackendMatchesContents(t)

	s.DeleteAndExpectNothingLeft(t, "snap", contentName)
}

// Retain: deleting the VolumeSnapshot keeps the content and the backend
// snapshot. An admin who later switches the content to Delete and deletes
// it removes the backend snapshot.
func TestRetainKeepsContentAndBackendSnapshot(t *testing.T) {
	s := newWorld(t, framework.ScenarioOptions{Policy: snapv1.VolumeSnapshotContentRetain})
	ctx := context.Background()
	_, contentName := s.snapData(t)
	s.WaitReady(t, "snap", 30*time.Second)
	s.DeleteSnapshot(t, "snap")
	s.WaitSnapshotGone(t, "snap")

	c := s.Content(t, contentName)
	if c.DeletionTimestamp != nil {
		t.Fatal("Retain content is being deleted")
	}
	if !snapshot.HasAnnotation(c, snapshot.AnnBeingDeleted, snapshot.ValueYes) {
		t.Errorf("Retain content lacks the being-deleted mark: %v", c.Annotations)
	}
	if b := s.Drv.Created(t); len(b) != 1 || b[0].ID != handleOf(c) {
		t.Fatalf("driver holds %+v, want the retained %q", b, handleOf(c))
	}
	s.wantCalls(t, mDelete, "OK", 0, "a Retain content")
	s.BackendMatchesContents(t)

	// The admin's clean-up.
	patch := []byte(`{"spec":{"deletionPolicy":"Delete"}}`)
	if _, err := s.Env.Snap.SnapshotV1().VolumeSnapshotContents().Patch(ctx, contentName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	s.DeleteContent(t, contentName)
	s.WaitContentGone(t, contentName)
	if b := s.Drv.Created(t); len(b) != 0 {
		t.Fatalf("driver still holds %+v", b)
	}
	s.BackendMatchesContents(t)
}

// A snapshot cut outside Kubernetes is imported through a content with its
// handle and a VolumeSnapshot naming that content: its status is read with
// ListSnapshots (polled while not ready) and nothing is cut.
func TestPreProvisionedImport(t *testing.T) {
	s := newWorld(t, framework.ScenarioOptions{Faults: []framework.FaultRule{{Method: "ListSnapshots", NotReady: 2}}})
	snap := s.cutBackendSnapshot(t, "imported-"+s.NS, "vol-external")
	contentName := "imported-" + s.NS
	s.PreProvisionedContent(t, contentName, snap.SnapshotId, "snap", snapv1.VolumeSnapshotContentDelete)
	vs := &snapv1.VolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: "snap", Namespace: s.NS},
		Spec:       snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{VolumeSnapshotContentName: &contentName}},
	}
	framework.MustCreate(t, s.Env.Snap.SnapshotV1().VolumeSnapshots(s.NS).Create, vs)
	got := s.WaitReady(t, "snap", 30*time.Second)
	c := s.Content(t, contentName)
	created := snap.CreationTime.AsTime()
	switch {
	case handleOf(c) != snap.SnapshotId:
		t.Errorf("content handle %q, want %q", handleOf(c), snap.SnapshotId)
	case c.Status.CreationTime == nil || *c.Status.CreationTime != created.UnixNano():
		t.Errorf("content creationTime %v, want %d from ListSnapshots", c.Status.CreationTime, created.UnixNano())
	case got.Status.CreationTime == nil || !got.Status.CreationTime.Time.Equal(created.Truncate(time.Second)):
		t.Errorf("snapshot creationTime %v, want %v", got.Status.CreationTime, created.Truncate(time.Second))
	case got.Status.BoundVolumeSnapshotContentName == nil || *got.Status.BoundVolumeSnapshotContentName != contentName:
		t.Errorf("snapshot bound to %v", got.Status.BoundVolumeSnapshotContentName)
	}
	// The mock reports size_bytes 0, which CSI defines as "unknown": no
	// restoreSize then (as the community sidecar). A size it did report
	// must arrive unchanged.
	switch {
	case snap.SizeBytes == 0 && (got.Status.RestoreSize != nil || c.Status.RestoreSize != nil):
		t.Errorf("unknown size shown as restoreSize %v / %v", got.Status.RestoreSize, c.Status.RestoreSize)
	case snap.SizeBytes > 0 && (got.Status.RestoreSize == nil || got.Status.RestoreSize.Value() != snap.SizeBytes):
		t.Errorf("restoreSize %v, want %d", got.Status.RestoreSize, snap.SizeBytes)
	}
	if n := s.calls(t, mList, "OK"); n < 3 {
		t.Errorf("ListSnapshots answered %d times, want at least 3 (2 not ready, then ready)", n)
	}
	s.wantCalls(t, mCreate, "OK", 1, "only the test's own call")
	s.BackendMatchesContents(t)

	s.DeleteAndExpectNothingLeft(t, "snap", contentName)
}

// --snapshot-name-prefix and --snapshot-name-uuid-length are honoured
// exactly: "<prefix>-<first N hex characters of the UID, dashes removed>".
func TestSnapshotNameFlags(t *testing.T) {
	s := newWorld(t, framework.ScenarioOptions{ControllerArgs: []string{"--snapshot-name-prefix=snap", "--snapshot-name-uuid-length=8"}})
	s.PVC(t, "data")
	vs := s.Snapshot(t, "snap", "data", &s.Class)
	s.WaitReady(t, "snap", 30*time.Second)
	b := s.Drv.Created(t)
	want := "snap-" + strings.ReplaceAll(string(vs.UID), "-", "")[:8]
	if len(b) != 1 || b[0].Name != want {
		t.Fatalf("driver holds %+v, want one snapshot named %q", b, want)
	}
	s.BackendMatchesContents(t)

	s.DeleteAndExpectNothingLeft(t, "snap", snapshot.ContentNameFor(vs.UID))
}
