package controller

import (
	"context"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/pkg/csi/csitest"
	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

func (s *setup) addClass(t *testing.T, name string, isDefault bool) {
	t.Helper()
	class := &snapv1.VolumeSnapshotClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Driver: s.drv.Name,
		DeletionPolicy: snapv1.VolumeSnapshotContentDelete}
	if isDefault {
		class.Annotations = map[string]string{snapshot.AnnDefaultClass: "true"}
	}
	if _, err := s.env.Snap.SnapshotV1().VolumeSnapshotClasses().Create(context.Background(), class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (s *setup) deleteClass(t *testing.T, name string) {
	t.Helper()
	if err := s.env.Snap.SnapshotV1().VolumeSnapshotClasses().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestDefaultClassNoneOneTwo(t *testing.T) {
	s := newSetup(t, setupOpts{}) // its class is not a default
	s.pvc(t, "data")
	s.snapshot(t, "none", "data", nil)
	s.waitError(t, "none", "no default VolumeSnapshotClass for driver")

	// One default appears: the waiting snapshot is re-evaluated at once,
	// records the class and loses its error.
	s.addClass(t, s.ns+"-a", true)
	got := s.waitReady(t, "none", 30*time.Second)
	if *got.Spec.VolumeSnapshotClassName != s.ns+"-a" {
		t.Fatalf("class %q, want %q", *got.Spec.VolumeSnapshotClassName, s.ns+"-a")
	}
	if got.Status.Error != nil {
		t.Errorf("stale error kept: %v", *got.Status.Error.Message)
	}

	// Two defaults: the message names both and the fix.
	s.addClass(t, s.ns+"-b", true)
	s.snapshot(t, "two", "data", nil)
	s.waitError(t, "two", "2 VolumeSnapshotClasses are the default")
	s.waitError(t, "two", s.ns+"-a, "+s.ns+"-b")
	s.deleteClass(t, s.ns+"-b")
	s.waitReady(t, "two", 30*time.Second)
	s.backendMatchesContents(t)
}

func TestLateDependencies(t *testing.T) {
	s := newSetup(t, setupOpts{})
	ctx := context.Background()

	t.Run("class created after the snapshot", func(t *testing.T) {
		s.pvc(t, "c1")
		late := "late-" + s.ns
		s.snapshot(t, "late-class", "c1", &late)
		s.waitError(t, "late-class", "does not exist yet")
		s.addClass(t, late, false)
		s.waitReady(t, "late-class", 30*time.Second)
	})
	t.Run("claim created and bound after the snapshot", func(t *testing.T) {
		s.snapshot(t, "late-pvc", "c2", &s.class)
		s.waitError(t, "late-pvc", "does not exist yet")
		s.pvc(t, "c2")
		s.waitReady(t, "late-pvc", 30*time.Second)
	})
	t.Run("claim bound late", func(t *testing.T) {
		storageClass := ""
		qty := resource.MustParse("1Gi")
		pvc := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "c3", Namespace: s.ns},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: &storageClass,
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: qty}},
			},
		}
		pvc, err := s.env.Kube.CoreV1().PersistentVolumeClaims(s.ns).Create(ctx, pvc, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.snapshot(t, "late-bind", "c3", &s.class)
		s.waitError(t, "late-bind", "is not bound yet")
		// Bind it now, as the PV controller would: a PV, the claim's
		// volumeName, then both statuses.
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: "pv-late-" + s.ns},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:               corev1.ResourceList{corev1.ResourceStorage: qty},
				AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: s.drv.Name, VolumeHandle: "vol-late"}},
				ClaimRef:               &corev1.ObjectReference{Namespace: s.ns, Name: "c3", UID: pvc.UID},
			},
		}
		if _, err := s.env.Kube.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pvc.Spec.VolumeName = pv.Name
		if pvc, err = s.env.Kube.CoreV1().PersistentVolumeClaims(s.ns).Update(ctx, pvc, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		pvc.Status.Phase = corev1.ClaimBound
		if _, err := s.env.Kube.CoreV1().PersistentVolumeClaims(s.ns).UpdateStatus(ctx, pvc, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		s.waitReady(t, "late-bind", 30*time.Second)
	})
	t.Run("pre-provisioned content created after the snapshot", func(t *testing.T) {
		name := "pre-" + s.ns
		vs := &snapv1.VolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "late-content", Namespace: s.ns},
			Spec: snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{VolumeSnapshotContentName: &name}}}
		if _, err := s.env.Snap.SnapshotV1().VolumeSnapshots(s.ns).Create(ctx, vs, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		s.waitError(t, "late-content", "does not exist yet")
		// A backend snapshot to import: cut one through a dynamic snapshot
		// with Retain semantics is overkill; the mock's built-in "1" exists.
		handle := "1"
		content := &snapv1.VolumeSnapshotContent{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: snapv1.VolumeSnapshotContentSpec{
				VolumeSnapshotRef: corev1.ObjectReference{Namespace: s.ns, Name: "late-content"},
				DeletionPolicy:    snapv1.VolumeSnapshotContentRetain,
				Driver:            s.drv.Name,
				Source:            snapv1.VolumeSnapshotContentSource{SnapshotHandle: &handle},
			},
		}
		if _, err := s.env.Snap.SnapshotV1().VolumeSnapshotContents().Create(ctx, content, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		got := s.waitReady(t, "late-content", 30*time.Second)
		if *got.Status.BoundVolumeSnapshotContentName != name {
			t.Fatalf("bound to %v", *got.Status.BoundVolumeSnapshotContentName)
		}
		c, err := s.env.Snap.SnapshotV1().VolumeSnapshotContents().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if c.Spec.VolumeSnapshotRef.UID != got.UID {
			t.Fatalf("content ref uid %q, want %q", c.Spec.VolumeSnapshotRef.UID, got.UID)
		}
	})
}

func TestPreProvisionedContentOfAnotherSnapshotIsNeverBound(t *testing.T) {
	s := newSetup(t, setupOpts{})
	ctx := context.Background()
	name := "other-" + s.ns
	handle := "2"
	content := &snapv1.VolumeSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: snapv1.VolumeSnapshotContentSpec{
			VolumeSnapshotRef: corev1.ObjectReference{Namespace: s.ns, Name: "someone-else"},
			DeletionPolicy:    snapv1.VolumeSnapshotContentRetain,
			Driver:            s.drv.Name,
			Source:            snapv1.VolumeSnapshotContentSource{SnapshotHandle: &handle},
		},
	}
	if _, err := s.env.Snap.SnapshotV1().VolumeSnapshotContents().Create(ctx, content, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	vs := &snapv1.VolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "thief", Namespace: s.ns},
		Spec: snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{VolumeSnapshotContentName: &name}}}
	if _, err := s.env.Snap.SnapshotV1().VolumeSnapshots(s.ns).Create(ctx, vs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.waitError(t, "thief", "is bound to VolumeSnapshot "+s.ns+"/someone-else")
	c, _ := s.env.Snap.SnapshotV1().VolumeSnapshotContents().Get(ctx, name, metav1.GetOptions{})
	if c.Spec.VolumeSnapshotRef.UID != "" {
		t.Fatalf("content was bound: uid %q", c.Spec.VolumeSnapshotRef.UID)
	}
}

func TestClaimProtectionAndRestoreProtection(t *testing.T) {
	// The driver cuts slowly, so the claim finalizer is observable.
	s := newSetup(t, setupOpts{defaultClass: true, faults: []framework.FaultRule{
		{Method: "CreateSnapshot", Latency: csitest.Duration(2 * time.Second), Times: 1}}})
	ctx := context.Background()
	s.pvc(t, "data")
	s.snapshot(t, "snap", "data", nil)
	framework.Eventually(t, 10*time.Second, "claim protected while the cut is in flight", func() (bool, error) {
		pvc, err := s.env.Kube.CoreV1().PersistentVolumeClaims(s.ns).Get(ctx, "data", metav1.GetOptions{})
		return err == nil && snapshot.HasFinalizer(pvc, snapshot.FinalizerPVCAsSource), err
	})
	s.waitReady(t, "snap", 30*time.Second)
	framework.Eventually(t, 10*time.Second, "claim released once cut", func() (bool, error) {
		pvc, err := s.env.Kube.CoreV1().PersistentVolumeClaims(s.ns).Get(ctx, "data", metav1.GetOptions{})
		return err == nil && !snapshot.HasFinalizer(pvc, snapshot.FinalizerPVCAsSource), err
	})

	// A Pending claim restoring from the snapshot keeps it while deleted.
	group := snapshot.GroupName
	storageClass := ""
	restore := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "restore", Namespace: s.ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &storageClass,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			DataSource:       &corev1.TypedLocalObjectReference{APIGroup: &group, Kind: snapshot.KindSnapshot, Name: "snap"},
		},
	}
	restore, err := s.env.Kube.CoreV1().PersistentVolumeClaims(s.ns).Create(ctx, restore, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.deleteSnapshot(t, "snap")
	// Every finalizer stays and the content is neither marked nor deleted
	// while the claim restores: the backend snapshot is its source.
	framework.Eventually(t, 20*time.Second, "SnapshotDeletePending event", func() (bool, error) {
		evs, err := s.env.Kube.CoreV1().Events(s.ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=snap"})
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
	got := s.get(t, "snap")
	for _, f := range []string{snapshot.FinalizerSnapshotAsSource, snapshot.FinalizerSnapshotBound} {
		if !snapshot.HasFinalizer(got, f) {
			t.Fatalf("snapshot lost %s while a claim restores from it", f)
		}
	}
	content, err := s.env.Snap.SnapshotV1().VolumeSnapshotContents().Get(ctx, *got.Status.BoundVolumeSnapshotContentName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if content.DeletionTimestamp != nil || snapshot.HasAnnotation(content, snapshot.AnnBeingDeleted, snapshot.ValueYes) {
		t.Fatal("the content of a snapshot a claim restores from was marked or deleted")
	}
	if b, err := s.drv.Snapshots(ctx); err != nil || len(b) != 1 {
		t.Fatalf("backend snapshots %+v (%v), want the restore source kept", b, err)
	}
	// The restore finishes: the snapshot goes.
	restore.Status.Phase = corev1.ClaimBound
	if _, err := s.env.Kube.CoreV1().PersistentVolumeClaims(s.ns).UpdateStatus(ctx, restore, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.waitSnapshotGone(t, "snap")
	s.backendMatchesContents(t)
}

func TestSnapshotOfClaimBeingDeletedNeverBlocksIt(t *testing.T) {
	s := newSetup(t, setupOpts{defaultClass: true})
	ctx := context.Background()
	s.pvc(t, "data")
	pvc, _ := s.env.Kube.CoreV1().PersistentVolumeClaims(s.ns).Get(ctx, "data", metav1.GetOptions{})
	pvc.Finalizers = append(pvc.Finalizers, "test.snapkeeper.io/hold")
	if _, err := s.env.Kube.CoreV1().PersistentVolumeClaims(s.ns).Update(ctx, pvc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.env.Kube.CoreV1().PersistentVolumeClaims(s.ns).Delete(ctx, "data", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s.snapshot(t, "snap", "data", nil)
	s.waitError(t, "snap", "is being deleted")
	got, _ := s.env.Kube.CoreV1().PersistentVolumeClaims(s.ns).Get(ctx, "data", metav1.GetOptions{})
	if snapshot.HasFinalizer(got, snapshot.FinalizerPVCAsSource) {
		t.Fatal("a claim being deleted got our finalizer")
	}
	s.deleteSnapshot(t, "snap")
	s.waitSnapshotGone(t, "snap")
}

func TestDeletionWhileUnreadyAndClassDeletedFirst(t *testing.T) {
	s := newSetup(t, setupOpts{faults: []framework.FaultRule{{Method: "CreateSnapshot", NotReady: 1000}}})
	ctx := context.Background()
	s.pvc(t, "data")
	vs := s.snapshot(t, "snap", "data", &s.class)
	framework.Eventually(t, 20*time.Second, "content cut but not ready", func() (bool, error) {
		c, err := s.env.Snap.SnapshotV1().VolumeSnapshotContents().Get(ctx, snapshot.ContentNameFor(vs.UID), metav1.GetOptions{})
		return err == nil && c.Status != nil && c.Status.SnapshotHandle != nil, err
	})
	// The class goes first; the snapshot (unready) is deleted afterwards.
	s.deleteClass(t, s.class)
	s.deleteSnapshot(t, "snap")
	s.waitSnapshotGone(t, "snap")
	s.waitContentGone(t, snapshot.ContentNameFor(vs.UID))
	s.backendMatchesContents(t)
}

func TestRestartCostsNoWrites(t *testing.T) {
	s := newSetup(t, setupOpts{defaultClass: true, noController: true})
	ctx := context.Background()
	ctrl := s.env.StartController(t, s.args...)
	for _, n := range []string{"a", "b", "c"} {
		s.pvc(t, n)
		s.snapshot(t, n, n, nil)
	}
	for _, n := range []string{"a", "b", "c"} {
		s.waitReady(t, n, 30*time.Second)
	}
	// Every claim released: the last write of the workload is done.
	framework.Eventually(t, 20*time.Second, "claims released", func() (bool, error) {
		for _, n := range []string{"a", "b", "c"} {
			pvc, err := s.env.Kube.CoreV1().PersistentVolumeClaims(s.ns).Get(ctx, n, metav1.GetOptions{})
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
	before, err := s.env.APIWrites(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.env.StartController(t, s.args...)
	time.Sleep(3 * time.Second)
	after, err := s.env.APIWrites(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ours := func(k framework.WriteKey) bool { return framework.IsContractWrite(k) || framework.IsEventWrite(k) }
	if d := after.Sub(before); d.Total(ours) != 0 {
		t.Fatalf("restart with 3 ready snapshots cost writes: %s", d)
	}
}
