package controller

import (
	"context"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/snapkeeper/snapkeeper/pkg/csi/csitest"
	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

func (s *world) addClass(t *testing.T, name string, isDefault bool) {
	t.Helper()
	s.Env.CreateSnapshotClass(t, framework.SnapshotClass(name, s.Drv.Name, snapv1.VolumeSnapshotContentDelete, isDefault))
}

func (s *world) deleteClass(t *testing.T, name string) {
	t.Helper()
	if err := s.Env.Snap.SnapshotV1().VolumeSnapshotClasses().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestDefaultClassNoneOneTwo(t *testing.T) {
	s := newWorld(t, framework.ScenarioOptions{}) // its class is not a default
	s.PVC(t, "data")
	s.Snapshot(t, "none", "data", nil)
	s.WaitSnapshotError(t, "none", "no default VolumeSnapshotClass for driver", 30*time.Second)

	// One default appears: the waiting snapshot is re-evaluated at once,
	// records the class and loses its error.
	s.addClass(t, s.NS+"-a", true)
	got := s.WaitReady(t, "none", 30*time.Second)
	if *got.Spec.VolumeSnapshotClassName != s.NS+"-a" {
		t.Fatalf("class %q, want %q", *got.Spec.VolumeSnapshotClassName, s.NS+"-a")
	}
	if got.Status.Error != nil {
		t.Errorf("stale error kept: %v", *got.Status.Error.Message)
	}

	// Two defaults: the message names both and the fix.
	s.addClass(t, s.NS+"-b", true)
	// The binder learns of classes through its informer: give the watch
	// event time to arrive before the snapshot's on a loaded machine.
	time.Sleep(time.Second)
	s.Snapshot(t, "two", "data", nil)
	s.WaitSnapshotError(t, "two", "2 VolumeSnapshotClasses are the default", 30*time.Second)
	s.WaitSnapshotError(t, "two", s.NS+"-a, "+s.NS+"-b", 30*time.Second)
	s.deleteClass(t, s.NS+"-b")
	s.WaitReady(t, "two", 30*time.Second)
	s.BackendMatchesContents(t)
}

func TestLateDependencies(t *testing.T) {
	s := newWorld(t, framework.ScenarioOptions{})
	ctx := context.Background()

	t.Run("class created after the snapshot", func(t *testing.T) {
		s.PVC(t, "c1")
		late := "late-" + s.NS
		s.Snapshot(t, "late-class", "c1", &late)
		s.WaitSnapshotError(t, "late-class", "does not exist yet", 30*time.Second)
		s.addClass(t, late, false)
		s.WaitReady(t, "late-class", 30*time.Second)
	})
	t.Run("claim created and bound after the snapshot", func(t *testing.T) {
		s.Snapshot(t, "late-pvc", "c2", &s.Class)
		s.WaitSnapshotError(t, "late-pvc", "does not exist yet", 30*time.Second)
		s.PVC(t, "c2")
		s.WaitReady(t, "late-pvc", 30*time.Second)
	})
	t.Run("claim bound late", func(t *testing.T) {
		storageClass := ""
		qty := resource.MustParse("1Gi")
		pvc := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "c3", Namespace: s.NS},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: &storageClass,
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: qty}},
			},
		}
		framework.MustCreate(t, s.Env.Kube.CoreV1().PersistentVolumeClaims(s.NS).Create, pvc)
		s.Snapshot(t, "late-bind", "c3", &s.Class)
		s.WaitSnapshotError(t, "late-bind", "is not bound yet", 30*time.Second)
		// Bind it now, as the PV controller would: a PV, the claim's
		// volumeName, then both statuses.
		s.Env.BindClaim(t, s.NS, "c3", framework.PVCOptions{Driver: s.Drv.Name, VolumeHandle: "vol-late"})
		s.WaitReady(t, "late-bind", 30*time.Second)
	})
	t.Run("pre-provisioned content created after the snapshot", func(t *testing.T) {
		name := "pre-" + s.NS
		vs := &snapv1.VolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "late-content", Namespace: s.NS},
			Spec: snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{VolumeSnapshotContentName: &name}}}
		framework.MustCreate(t, s.Env.Snap.SnapshotV1().VolumeSnapshots(s.NS).Create, vs)
		s.WaitSnapshotError(t, "late-content", "does not exist yet", 30*time.Second)
		// A backend snapshot to import: cut one through a dynamic snapshot
		// with Retain semantics is overkill; the mock's built-in "1" exists.
		s.PreProvisionedContent(t, name, "1", "late-content", snapv1.VolumeSnapshotContentRetain)
		got := s.WaitReady(t, "late-content", 30*time.Second)
		if *got.Status.BoundVolumeSnapshotContentName != name {
			t.Fatalf("bound to %v", *got.Status.BoundVolumeSnapshotContentName)
		}
		c, err := s.Env.Snap.SnapshotV1().VolumeSnapshotContents().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if c.Spec.VolumeSnapshotRef.UID != got.UID {
			t.Fatalf("content ref uid %q, want %q", c.Spec.VolumeSnapshotRef.UID, got.UID)
		}
	})
}

func TestPreProvisionedContentOfAnotherSnapshotIsNeverBound(t *testing.T) {
	s := newWorld(t, framework.ScenarioOptions{})
	ctx := context.Background()
	name := "other-" + s.NS
	s.PreProvisionedContent(t, name, "2", "someone-else", snapv1.VolumeSnapshotContentRetain)
	vs := &snapv1.VolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "thief", Namespace: s.NS},
		Spec: snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{VolumeSnapshotContentName: &name}}}
	framework.MustCreate(t, s.Env.Snap.SnapshotV1().VolumeSnapshots(s.NS).Create, vs)
	s.WaitSnapshotError(t, "thief", "is bound to VolumeSnapshot "+s.NS+"/someone-else", 30*time.Second)
	c, _ := s.Env.Snap.SnapshotV1().VolumeSnapshotContents().Get(ctx, name, metav1.GetOptions{})
	if c.Spec.VolumeSnapshotRef.UID != "" {
		t.Fatalf("content was bound: uid %q", c.Spec.VolumeSnapshotRef.UID)
	}
}

func TestClaimProtectionAndRestoreProtection(t *testing.T) {
	// The driver cuts slowly, so the claim finalizer is observable.
	s := newWorld(t, framework.ScenarioOptions{DefaultClass: true, Faults: []framework.FaultRule{
		{Method: "CreateSnapshot", Latency: csitest.Duration(2 * time.Second), Times: 1}}})
	ctx := context.Background()
	s.PVC(t, "data")
	s.Snapshot(t, "snap", "data", nil)
	framework.Eventually(t, 10*time.Second, "claim protected while the cut is in flight", func() (bool, error) {
		pvc, err := s.Env.Kube.CoreV1().PersistentVolumeClaims(s.NS).Get(ctx, "data", metav1.GetOptions{})
		return err == nil && snapshot.HasFinalizer(pvc, snapshot.FinalizerPVCAsSource), err
	})
	s.WaitReady(t, "snap", 30*time.Second)
	framework.Eventually(t, 10*time.Second, "claim released once cut", func() (bool, error) {
		pvc, err := s.Env.Kube.CoreV1().PersistentVolumeClaims(s.NS).Get(ctx, "data", metav1.GetOptions{})
		return err == nil && !snapshot.HasFinalizer(pvc, snapshot.FinalizerPVCAsSource), err
	})

	// A Pending claim restoring from the snapshot keeps it while deleted.
	if _, err := s.RestoreClaim(t, "restore", "snap"); err != nil {
		t.Fatal(err)
	}
	// The binder sees the claim through its informer, as the community
	// binder does: a deletion it handles before its cache has the claim
	// deletes the content (docs/contract.md, "Deleting a snapshot that a claim
	// is restoring from"). Give the watch event time to arrive on a loaded machine.
	time.Sleep(time.Second)
	s.DeleteSnapshot(t, "snap")
	// Every finalizer stays and the content is neither marked nor deleted
	// while the claim restores: the backend snapshot is its source.
	framework.Eventually(t, 20*time.Second, "SnapshotDeletePending event", func() (bool, error) {
		evs, err := s.Env.Kube.CoreV1().Events(s.NS).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=snap"})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Reason == snapshot.ReasonSnapshotDeletePending {
				return true, nil
			}
		}
		return false, nil
	})
	got := s.GetSnapshot(t, "snap")
	for _, f := range []string{snapshot.FinalizerSnapshotAsSource, snapshot.FinalizerSnapshotBound} {
		if !snapshot.HasFinalizer(got, f) {
			t.Fatalf("snapshot lost %s while a claim restores from it", f)
		}
	}
	content, err := s.Env.Snap.SnapshotV1().VolumeSnapshotContents().Get(ctx, *got.Status.BoundVolumeSnapshotContentName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if content.DeletionTimestamp != nil || snapshot.HasAnnotation(content, snapshot.AnnBeingDeleted, snapshot.ValueYes) {
		t.Fatal("the content of a snapshot a claim restores from was marked or deleted")
	}
	if b := s.Drv.Created(t); len(b) != 1 {
		t.Fatalf("backend snapshots %+v, want the restore source kept", b)
	}
	// The restore finishes: the claim is bound to its volume (a phase
	// alone would not last where the PV controller runs), and the
	// snapshot goes.
	s.Env.BindClaim(t, s.NS, "restore", framework.PVCOptions{Driver: s.Drv.Name})
	s.WaitSnapshotGone(t, "snap")
	s.BackendMatchesContents(t)
}

func TestSnapshotOfClaimBeingDeletedNeverBlocksIt(t *testing.T) {
	s := newWorld(t, framework.ScenarioOptions{DefaultClass: true})
	ctx := context.Background()
	s.PVC(t, "data")
	claims := s.Env.Kube.CoreV1().PersistentVolumeClaims(s.NS)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error { // the PV controller may write it too
		pvc, err := claims.Get(ctx, "data", metav1.GetOptions{})
		if err != nil {
			return err
		}
		pvc.Finalizers = append(pvc.Finalizers, "test.snapkeeper.io/hold")
		_, err = claims.Update(ctx, pvc, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Env.Kube.CoreV1().PersistentVolumeClaims(s.NS).Delete(ctx, "data", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s.Snapshot(t, "snap", "data", nil)
	s.WaitSnapshotError(t, "snap", "is being deleted", 30*time.Second)
	got, _ := s.Env.Kube.CoreV1().PersistentVolumeClaims(s.NS).Get(ctx, "data", metav1.GetOptions{})
	if snapshot.HasFinalizer(got, snapshot.FinalizerPVCAsSource) {
		t.Fatal("a claim being deleted got our finalizer")
	}
	s.DeleteSnapshot(t, "snap")
	s.WaitSnapshotGone(t, "snap")
}

func TestDeletionWhileUnreadyAndClassDeletedFirst(t *testing.T) {
	s := newWorld(t, framework.ScenarioOptions{Faults: []framework.FaultRule{{Method: "CreateSnapshot", NotReady: 1000}}})
	s.PVC(t, "data")
	vs := s.Snapshot(t, "snap", "data", &s.Class)
	s.Env.WaitContent(t, snapshot.ContentNameFor(vs.UID), "cut but not ready", 20*time.Second, func(c *snapv1.VolumeSnapshotContent) bool {
		return c.Status != nil && c.Status.SnapshotHandle != nil
	})
	// The class goes first; the snapshot (unready) is deleted afterwards.
	s.deleteClass(t, s.Class)
	s.DeleteSnapshot(t, "snap")
	s.WaitSnapshotGone(t, "snap")
	s.WaitContentGone(t, snapshot.ContentNameFor(vs.UID))
	s.BackendMatchesContents(t)
}

func TestRestartCostsNoWrites(t *testing.T) {
	s := newWorld(t, framework.ScenarioOptions{DefaultClass: true, NoController: true})
	ctx := context.Background()
	ctrl := s.StartController(t, s.Args...)
	for _, n := range []string{"a", "b", "c"} {
		s.PVC(t, n)
		s.Snapshot(t, n, n, nil)
	}
	for _, n := range []string{"a", "b", "c"} {
		s.WaitReady(t, n, 30*time.Second)
	}
	// Every claim released: the last write of the workload is done.
	framework.Eventually(t, 20*time.Second, "claims released", func() (bool, error) {
		for _, n := range []string{"a", "b", "c"} {
			pvc, err := s.Env.Kube.CoreV1().PersistentVolumeClaims(s.NS).Get(ctx, n, metav1.GetOptions{})
			if err != nil || snapshot.HasFinalizer(pvc, snapshot.FinalizerPVCAsSource) {
				return false, err
			}
		}
		return true, nil
	})
	ctrl.Proc.Stop(10 * time.Second)
	// Counted at the API server (not by the controller's own counter),
	// events included. No Lease: this controller runs without leader
	// election, and the API server's own Lease renewals are not ours.
	ours := func(k framework.WriteKey) bool { return framework.IsContractWrite(k) || framework.IsEventWrite(k) }
	// The stopped controller flushes its queued events on the way out, and
	// the API server counts a request when it ends: the count starts once
	// it has stood still for a second.
	var before framework.APIWrites
	framework.Eventually(t, 20*time.Second, "API writes standing still after the stop", func() (bool, error) {
		a, err := s.Env.APIWrites(ctx)
		if err != nil {
			return false, err
		}
		time.Sleep(time.Second)
		b, err := s.Env.APIWrites(ctx)
		if err != nil {
			return false, err
		}
		before = b
		return b.Sub(a).Total(ours) == 0, nil
	})
	s.StartController(t, s.Args...)
	time.Sleep(3 * time.Second)
	after, err := s.Env.APIWrites(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := after.Sub(before); d.Total(ours) != 0 {
		t.Fatalf("restart with 3 ready snapshots cost writes: %s", d)
	}
}
