package controller

import (
	"context"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

// Behaviours that keep backend snapshots where the community controllers
// keep them (docs/contract.md, docs/compatibility.md).

// A content copied from another cluster names a VolumeSnapshot (with a UID)
// that does not exist here. Deleting it must never delete the backend
// snapshot: it belongs to the other cluster. It stays Terminating until
// someone decides: the being-deleted mark deletes the backend snapshot.
func TestCopiedContentKeepsItsBackendSnapshot(t *testing.T) {
	s := newWorld(t, framework.ScenarioOptions{})
	ctx := context.Background()
	s.PVC(t, "data")
	s.Snapshot(t, "snap", "data", &s.Class)
	vs := s.WaitReady(t, "snap", 30*time.Second)
	src, err := s.Env.Snap.SnapshotV1().VolumeSnapshotContents().Get(ctx, *vs.Status.BoundVolumeSnapshotContentName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	handle := *src.Status.SnapshotHandle
	copied := &snapv1.VolumeSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{Name: "copied-" + s.NS, Finalizers: []string{snapshot.FinalizerContentBound}},
		Spec: snapv1.VolumeSnapshotContentSpec{
			VolumeSnapshotRef: corev1.ObjectReference{Namespace: s.NS, Name: "elsewhere", UID: types.UID("0e1f2a3b-0000-4000-8000-000000000001")},
			DeletionPolicy:    snapv1.VolumeSnapshotContentDelete,
			Driver:            s.Drv.Name,
			Source:            snapv1.VolumeSnapshotContentSource{SnapshotHandle: &handle},
		},
	}
	framework.MustCreate(t, s.Env.Snap.SnapshotV1().VolumeSnapshotContents().Create, copied)
	if err := s.Env.Snap.SnapshotV1().VolumeSnapshotContents().Delete(ctx, copied.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Give the CSI side time to (wrongly) act on the deletion event.
	time.Sleep(3 * time.Second)
	got, err := s.Env.Snap.SnapshotV1().VolumeSnapshotContents().Get(ctx, copied.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("copied content released: %v", err)
	}
	if !snapshot.HasFinalizer(got, snapshot.FinalizerContentBound) {
		t.Fatal("copied content lost its finalizer")
	}
	if n := s.Drv.Calls(t).Count("DeleteSnapshot", ""); n != 0 {
		t.Fatalf("DeleteSnapshot called %d times for a copied content", n)
	}
	if b := s.Drv.Created(t); len(b) != 1 {
		t.Fatalf("backend %+v, want the snapshot kept", b)
	}
	// The snapshot the original content belongs to is unaffected.
	s.WaitReady(t, "snap", 5*time.Second)
}

// A bound content deleted by hand while its VolumeSnapshot lives keeps its
// finalizer (Retain and Delete alike) until the snapshot is deleted.
func TestBoundContentDeletedByHandWaitsForItsSnapshot(t *testing.T) {
	for _, policy := range []snapv1.DeletionPolicy{snapv1.VolumeSnapshotContentRetain, snapv1.VolumeSnapshotContentDelete} {
		t.Run(string(policy), func(t *testing.T) {
			s := newWorld(t, framework.ScenarioOptions{Policy: policy})
			ctx := context.Background()
			s.PVC(t, "data")
			s.Snapshot(t, "snap", "data", &s.Class)
			vs := s.WaitReady(t, "snap", 30*time.Second)
			name := *vs.Status.BoundVolumeSnapshotContentName
			if err := s.Env.Snap.SnapshotV1().VolumeSnapshotContents().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(3 * time.Second)
			c, err := s.Env.Snap.SnapshotV1().VolumeSnapshotContents().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("bound %s content released while its snapshot lives: %v", policy, err)
			}
			if !snapshot.HasFinalizer(c, snapshot.FinalizerContentBound) {
				t.Fatalf("bound %s content lost its finalizer", policy)
			}
			if b := s.Drv.Created(t); len(b) != 1 {
				t.Fatalf("backend %+v, want the snapshot kept", b)
			}
			s.DeleteSnapshot(t, "snap")
			s.WaitSnapshotGone(t, "snap")
			s.WaitContentGone(t, name)
			want := 0
			if policy == snapv1.VolumeSnapshotContentRetain {
				want = 1
			}
			s.WaitBackend(t, want, 10*time.Second)
		})
	}
}

// With no CSI side running for its driver, a snapshot still shows at once
// which content it is bound to, and that it is not ready.
func TestSnapshotShowsItsContentBeforeTheCSISideReports(t *testing.T) {
	s := newWorld(t, framework.ScenarioOptions{NoController: true})
	s.Env.StartController(t, "--components=binder")
	s.PVC(t, "data")
	vs := s.Snapshot(t, "snap", "data", &s.Class)
	framework.Eventually(t, 20*time.Second, "status names the content, readyToUse=false", func() (bool, error) {
		got := s.GetSnapshot(t, "snap")
		st := got.Status
		return st != nil && st.BoundVolumeSnapshotContentName != nil &&
			*st.BoundVolumeSnapshotContentName == snapshot.ContentNameFor(vs.UID) &&
			st.ReadyToUse != nil && !*st.ReadyToUse, nil
	})
	c, err := s.Env.Snap.SnapshotV1().VolumeSnapshotContents().Get(context.Background(), snapshot.ContentNameFor(vs.UID), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if snapshot.HasAnnotation(c, snapshot.AnnBeingCreated, snapshot.ValueYes) {
		t.Error("content born with the being-created mark: only the CSI side sets it, right before its call")
	}
	// Deleted before any CSI side ran, it costs no CreateSnapshot when one
	// starts: nothing was cut.
	s.DeleteSnapshot(t, "snap")
	s.Env.StartController(t, "--components=csi", "--csi-address="+s.Drv.Socket)
	s.WaitSnapshotGone(t, "snap")
	s.WaitContentGone(t, c.Name)
	if n := s.Drv.Calls(t).Count("CreateSnapshot", ""); n != 0 {
		t.Errorf("CreateSnapshot called %d times for a snapshot deleted before any cut", n)
	}
	s.BackendMatchesContents(t)
}
