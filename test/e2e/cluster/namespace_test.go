package cluster

import (
	"context"
	"testing"
	"time"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// namespaceBound is how long the namespace controller may take to tear
// down a namespace of claims, snapshots, a group and a restore: the
// slowest measured here was well under it (docs/testing.md).
const namespaceBound = 90 * time.Second

// TestNamespaceTeardown deletes a namespace holding claims, ready snapshots
// of a Delete and of a Retain class, an in-flight snapshot, a group
// snapshot and a claim still restoring: the namespace is gone within
// namespaceBound, every Delete backend snapshot and group is deleted, the
// Retain content and its backend snapshot are kept and importable into
// another namespace, and the webhook denies nothing on the way.
func TestNamespaceTeardown(t *testing.T) { forPairings(t, namespaceTeardown) }

func namespaceTeardown(t *testing.T, p pairing) {
	slowRestore := framework.FaultRule{Method: "CreateVolume", Match: "snapshot-*", Latency: framework.Duration(3 * time.Second)}
	w := newWorld(t, p, worldOptions{Faults: []framework.FaultRule{slowRestore}})
	ctx := context.Background()
	retain := "retain-" + w.NS
	w.Env.CreateSnapshotClass(t, framework.SnapshotClass(retain, w.Drv.Name, snapv1.VolumeSnapshotContentRetain, false))
	t.Cleanup(func() {
		_ = w.Env.Snap.SnapshotV1().VolumeSnapshotClasses().Delete(ctx, retain, metav1.DeleteOptions{})
	})

	for _, c := range []string{"data", "db-0", "db-1"} {
		w.source(t, c)
	}
	w.label(t, "db-0", "db-1")
	w.Snapshot(t, "delete-ready", "data", nil)
	w.Snapshot(t, "retain-ready", "data", &retain)
	w.group(t, "db")
	w.WaitReady(t, "delete-ready", 60*time.Second)
	w.WaitReady(t, "retain-ready", 60*time.Second)
	w.Env.WaitGroupReady(t, w.NS, "db", 60*time.Second)
	retainContent, retainHandle := w.handleOf(t, "retain-ready")

	// From here on new snapshots stay not ready: "in-flight" is cut but
	// never ready when the namespace goes.
	w.Drv.SetFaults(t, framework.Faults{Rules: []framework.FaultRule{slowRestore, {Method: "CreateSnapshot", NotReady: 1 << 20}}})
	w.Snapshot(t, "in-flight", "data", nil)
	framework.Eventually(t, 30*time.Second, "in-flight cut", func() (bool, error) {
		vs := w.GetSnapshot(t, "in-flight")
		return vs.Status != nil && vs.Status.BoundVolumeSnapshotContentName != nil && vs.Status.CreationTime != nil, nil
	})
	w.restore(t, "restoring", "delete-ready", false)
	framework.Eventually(t, 30*time.Second, "the restore started", func() (bool, error) {
		return hasString(w.finalizers(t, "delete-ready"), framework.ProvisionerFinalizer), nil
	})

	before, err := w.wh.Scrape(ctx)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := w.Env.Kube.CoreV1().Namespaces().Delete(ctx, w.NS, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, namespaceBound, "namespace "+w.NS+" gone", func() (bool, error) {
		ns, err := w.Env.Kube.CoreV1().Namespaces().Get(ctx, w.NS, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		return false, &nsStatus{ns}
	})
	took := time.Since(start)
	t.Logf("%s: namespace gone %v after its delete", p, took.Round(10*time.Millisecond))
	after, err := w.wh.Scrape(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, verdict := range []string{`verdict="denied"`, `verdict="error"`} {
		if n := after.Sum("snapkeeper_webhook_requests_total", verdict) - before.Sum("snapkeeper_webhook_requests_total", verdict); n != 0 {
			t.Errorf("the webhook answered %v requests %s during the teardown", n, verdict)
		}
	}

	// Only the Retain content is left, released, with its backend snapshot.
	retained(t, w, retainContent, retainHandle)
	w.BackendMatchesContents(t)
	w.Env.WaitBackendGroupsMatchGroupContents(t, w.Drv)
	if g := w.Drv.Groups(t); len(g) != 0 {
		t.Fatalf("backend groups left: %+v", g)
	}
	if b := w.Drv.Created(t); len(b) != 1 || b[0].ID != retainHandle {
		t.Fatalf("backend after the teardown %+v, want only %s", b, retainHandle)
	}
	for id, n := range w.deleteCalls(t) {
		if n > 1 {
			t.Errorf("DeleteSnapshot of %s answered OK %d times", id, n)
		}
	}
	w.noPanic(t)
	importRetained(t, w, retainContent, retainHandle)
}

// importRetained imports the backend snapshot of a released Retain content
// into a new namespace as a pre-provisioned pair, waits until it is ready,
// deletes the old content, then the new pair (Delete) with its backend
// snapshot.
func importRetained(t *testing.T, w *world, oldContent, handle string) {
	t.Helper()
	ctx := context.Background()
	if err := w.Env.Snap.SnapshotV1().VolumeSnapshotContents().Delete(ctx, oldContent, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w.Env.WaitContentGone(t, oldContent, 30*time.Second)
	ns := w.Env.Namespace(t)
	name := "imported-" + ns
	c := &snapv1.VolumeSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: snapv1.VolumeSnapshotContentSpec{
			VolumeSnapshotRef: corev1.ObjectReference{Namespace: ns, Name: "imported"},
			DeletionPolicy:    snapv1.VolumeSnapshotContentDelete, Driver: w.Drv.Name,
			Source: snapv1.VolumeSnapshotContentSource{SnapshotHandle: &handle},
		},
	}
	framework.MustCreate(t, w.Env.Snap.SnapshotV1().VolumeSnapshotContents().Create, c)
	vs := &snapv1.VolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "imported"},
		Spec: snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{VolumeSnapshotContentName: &name}}}
	w.Env.CreateSnapshot(t, vs)
	w.Env.WaitSnapshotReady(t, ns, "imported", 60*time.Second)
	if err := w.Env.Snap.SnapshotV1().VolumeSnapshots(ns).Delete(ctx, "imported", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w.Env.WaitSnapshotGone(t, ns, "imported", 30*time.Second)
	w.Env.WaitContentGone(t, name, 30*time.Second)
	if b := w.Drv.Created(t); len(b) != 0 {
		t.Fatalf("driver still holds %+v", b)
	}
}

// label gives claims the label app=<world's namespace>, the selector of
// group.
func (w *world) label(t *testing.T, claims ...string) {
	t.Helper()
	for _, c := range claims {
		patch := []byte(`{"metadata":{"labels":{"app":"` + w.NS + `"}}}`)
		if _, err := w.Env.Kube.CoreV1().PersistentVolumeClaims(w.NS).Patch(context.Background(), c, "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// group creates a VolumeGroupSnapshot of the labelled claims (default
// group class).
func (w *world) group(t *testing.T, name string) *groupv1.VolumeGroupSnapshot {
	t.Helper()
	g := &groupv1.VolumeGroupSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.NS},
		Spec: groupv1.VolumeGroupSnapshotSpec{Source: groupv1.VolumeGroupSnapshotSource{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": w.NS}}}},
	}
	out, err := w.Env.Snap.GroupsnapshotV1().VolumeGroupSnapshots(w.NS).Create(context.Background(), g, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// nsStatus shows a terminating namespace's conditions in a timeout.
type nsStatus struct{ ns *corev1.Namespace }

func (s *nsStatus) Error() string {
	return string(s.ns.Status.Phase) + " " + framework.JSON(s.ns.Status.Conditions)
}
