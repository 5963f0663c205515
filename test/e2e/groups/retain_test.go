package groups

import (
	"context"
	"testing"
	"time"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// TestGroupRetainThenPreProvisioned: with Retain, deleting a group keeps
// the backend group and its contents; the kept backend group is then
// imported as a pre-provisioned VolumeGroupSnapshotContent (Delete), becomes
// ready through GetVolumeGroupSnapshot, and deleting it removes the backend
// group with DeleteVolumeGroupSnapshot.
func TestGroupRetainThenPreProvisioned(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, framework.ScenarioOptions{ClaimSizes: dbSizes, Policy: snapv1.VolumeSnapshotContentRetain})
	dbClaims(t, w)
	w.Group(t, "db", dbSelector)
	g := w.WaitGroupReady(t, "db", 60*time.Second)
	contentName := *g.Status.BoundVolumeGroupSnapshotContentName
	members := w.Members(t, "db")

	w.DeleteGroup(t, "db")
	w.WaitGroupGone(t, "db")
	for _, m := range members {
		w.WaitSnapshotGone(t, m.Name)
	}
	groupContents := w.Env.Snap.GroupsnapshotV1().VolumeGroupSnapshotContents()
	if _, err := groupContents.Get(ctx, contentName, metav1.GetOptions{}); err != nil {
		t.Fatalf("Retain: group content %s gone: %v", contentName, err)
	}
	backend := w.Drv.Groups(t)
	if len(backend) != 1 || len(backend[0].SnapshotIDs) != 3 {
		t.Fatalf("Retain: backend groups %s, want the group kept", framework.JSON(backend))
	}
	if b := w.Drv.Created(t); len(b) != 3 {
		t.Fatalf("Retain: backend snapshots %s, want the three members kept", framework.JSON(b))
	}

	// Retained objects go without touching the backend.
	if err := groupContents.Delete(ctx, contentName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w.Env.WaitGroupContentGone(t, contentName, 30*time.Second)
	for _, m := range members {
		name := *m.Status.BoundVolumeSnapshotContentName
		if err := w.Env.Snap.SnapshotV1().VolumeSnapshotContents().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		w.WaitContentGone(t, name)
	}
	if b := w.Drv.Groups(t); len(b) != 1 {
		t.Fatalf("deleting retained objects touched the backend: %s", framework.JSON(b))
	}

	// Import the backend group.
	imported := &groupv1.VolumeGroupSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{Name: "imported-" + w.NS},
		Spec: groupv1.VolumeGroupSnapshotContentSpec{
			VolumeGroupSnapshotRef: corev1.ObjectReference{Name: "imported", Namespace: w.NS},
			DeletionPolicy:         snapv1.VolumeSnapshotContentDelete,
			Driver:                 w.Drv.Name,
			Source: groupv1.VolumeGroupSnapshotContentSource{GroupSnapshotHandles: &groupv1.GroupSnapshotHandles{
				VolumeGroupSnapshotHandle: backend[0].ID,
				VolumeSnapshotHandles:     backend[0].SnapshotIDs,
			}},
		},
	}
	framework.MustCreate(t, groupContents.Create, imported)
	source := imported.Name
	vgs := &groupv1.VolumeGroupSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: "imported", Namespace: w.NS},
		Spec:       groupv1.VolumeGroupSnapshotSpec{Source: groupv1.VolumeGroupSnapshotSource{VolumeGroupSnapshotContentName: &source}},
	}
	framework.MustCreate(t, w.Env.Snap.GroupsnapshotV1().VolumeGroupSnapshots(w.NS).Create, vgs)
	got := w.WaitGroupReady(t, "imported", 60*time.Second)
	if n := got.Status.BoundVolumeGroupSnapshotContentName; n == nil || *n != source {
		t.Fatalf("imported group bound to %v, want %s", n, source)
	}
	w.DeleteGroup(t, "imported")
	w.WaitGroupGone(t, "imported")
	w.Env.WaitGroupContentGone(t, source, 30*time.Second)
	w.NothingLeft(t)
}
