package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// TestRestoreThroughProvisioner: a claim provisioned by the csi-provisioner
// and bound by the PersistentVolume controller is snapshotted; claims with
// dataSource and with dataSourceRef restore from the snapshot (CreateVolume
// with it as content source at the driver); a restore smaller than the
// snapshot's restoreSize is refused by the webhook; a restore from a
// snapshot that is not ready yet waits and then succeeds.
func TestRestoreThroughProvisioner(t *testing.T) { forPairings(t, restoreThroughProvisioner) }

func restoreThroughProvisioner(t *testing.T, p pairing) {
	// The second snapshot's driver answers "not ready" to its first 3 polls.
	w := newWorld(t, p, worldOptions{Faults: []framework.FaultRule{{Method: "CreateSnapshot", Match: "snapshot-*", NotReady: 3, Times: 0}}})
	w.source(t, "data")
	_, pv := w.Env.WaitClaimBound(t, w.NS, "data", 10*time.Second)
	if pv.Annotations["pv.kubernetes.io/provisioned-by"] != w.Drv.Name {
		t.Fatalf("PV %s not provisioned by %s: %v", pv.Name, w.Drv.Name, pv.Annotations)
	}
	w.Snapshot(t, "snap", "data", nil)
	vs := w.WaitReady(t, "snap", 60*time.Second)
	if vs.Status.RestoreSize == nil || vs.Status.RestoreSize.Value() != gi {
		t.Fatalf("restoreSize %v, want 1Gi", vs.Status.RestoreSize)
	}
	_, handle := w.handleOf(t, "snap")

	w.restore(t, "from-datasource", "snap", false)
	w.restore(t, "from-datasourceref", "snap", true)
	for _, c := range []string{"from-datasource", "from-datasourceref"} {
		_, pv := w.Env.WaitClaimBound(t, w.NS, c, 60*time.Second)
		if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != w.Drv.Name {
			t.Fatalf("restored PV %s is not of driver %s: %s", pv.Name, w.Drv.Name, framework.JSON(pv.Spec))
		}
	}
	if got := w.restoresFrom(t, handle); got["OK"] != 2 {
		t.Fatalf("CreateVolume from snapshot %s: %v, want 2 OK", handle, got)
	}

	// Smaller than the restoreSize: the webhook refuses the claim at apply
	// time, so the provisioner never sees it.
	small := framework.Claim(w.NS, "too-small", framework.ClaimOptions{StorageClass: w.Prov.StorageClass, Size: "512Mi", RestoreFrom: "snap"})
	_, err := w.Env.Kube.CoreV1().PersistentVolumeClaims(w.NS).Create(context.Background(), small, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "restoreSize 1Gi") || !strings.Contains(err.Error(), "request 1Gi or more") {
		t.Fatalf("a restore smaller than the snapshot: %v, want the webhook's restoreSize refusal", err)
	}

	// Not ready yet: the claim is admitted (with a warning), stays Pending,
	// and is restored once the snapshot is ready.
	w.Snapshot(t, "late", "data", nil)
	w.restore(t, "from-late", "late", false)
	time.Sleep(time.Second)
	if late := w.GetSnapshot(t, "late"); late.Status != nil && late.Status.ReadyToUse != nil && *late.Status.ReadyToUse {
		t.Log("snapshot late was ready within a second: the wait was not exercised")
	} else if ph := w.claimPhase(t, "from-late"); ph != corev1.ClaimPending {
		t.Fatalf("claim from-late is %q before its snapshot is ready, want Pending", ph)
	}
	w.WaitReady(t, "late", 60*time.Second)
	// The provisioner retries with its exponential backoff (1 s doubling).
	w.Env.WaitClaimBound(t, w.NS, "from-late", 90*time.Second)
	_, lateHandle := w.handleOf(t, "late")
	if got := w.restoresFrom(t, lateHandle); got["OK"] != 1 {
		t.Fatalf("CreateVolume from snapshot %s: %v, want 1 OK", lateHandle, got)
	}
	for _, name := range []string{"snap", "late"} {
		framework.Eventually(t, 30*time.Second, "no provisioner finalizer on "+name, func() (bool, error) {
			f := w.finalizers(t, name)
			return !hasString(f, framework.ProvisionerFinalizer), nil
		})
	}
	// Snapshots go with their backend snapshots; the restored volumes stay.
	for _, name := range []string{"snap", "late"} {
		w.DeleteSnapshot(t, name)
	}
	for _, name := range []string{"snap", "late"} {
		w.WaitSnapshotGone(t, name)
	}
	w.invariants(t)
	if b := w.Drv.Created(t); len(b) != 0 {
		t.Fatalf("driver still holds %+v", b)
	}
}

// TestDeleteDuringRestore: the snapshot is deleted while the provisioner
// restores from it (a slow CreateVolume). The restore completes; then
// snapshot, content and backend snapshot go (Delete) or content and backend
// stay (Retain); neither our finalizers nor the provisioner's is left.
func TestDeleteDuringRestore(t *testing.T) {
	forPairings(t, func(t *testing.T, p pairing) {
		for _, policy := range []snapv1.DeletionPolicy{snapv1.VolumeSnapshotContentDelete, snapv1.VolumeSnapshotContentRetain} {
			t.Run(string(policy), func(t *testing.T) { deleteDuringRestore(t, p, policy) })
		}
	})
}

func deleteDuringRestore(t *testing.T, p pairing, policy snapv1.DeletionPolicy) {
	// Every restore takes 4 s at the driver.
	w := newWorld(t, p, worldOptions{Policy: policy, Faults: []framework.FaultRule{{Method: "CreateVolume", Match: "snapshot-*", Latency: framework.Duration(4 * time.Second)}}})
	w.readySnapshot(t, "snap")
	content, handle := w.handleOf(t, "snap")
	w.restore(t, "restored", "snap", false)
	// The provisioner marks the snapshot right before its CreateVolume.
	framework.Eventually(t, 30*time.Second, "the provisioner's finalizer on snap", func() (bool, error) {
		return hasString(w.finalizers(t, "snap"), framework.ProvisionerFinalizer), nil
	})
	w.DeleteSnapshot(t, "snap")
	start := time.Now()
	w.Env.WaitClaimBound(t, w.NS, "restored", 60*time.Second)
	t.Logf("restore finished %v after the delete", time.Since(start).Round(time.Millisecond))
	if got := w.restoresFrom(t, handle); got["OK"] != 1 {
		t.Fatalf("CreateVolume from %s: %v, want 1 OK", handle, got)
	}
	w.Env.WaitSnapshotGone(t, w.NS, "snap", 60*time.Second)
	t.Logf("snapshot gone %v after the delete", time.Since(start).Round(time.Millisecond))
	if policy == snapv1.VolumeSnapshotContentDelete {
		w.Env.WaitContentGone(t, content, 30*time.Second)
		w.invariants(t)
		if b := w.Drv.Created(t); len(b) != 0 {
			t.Fatalf("driver still holds %+v", b)
		}
		return
	}
	retained(t, w, content, handle)
	w.invariants(t)
}

// retained asserts that a Retain content outlived its snapshot with its
// backend snapshot. It keeps its bound finalizer until it is deleted
// itself: every CSI side (ours and the community's) removes it only from a
// content being deleted, and then without DeleteSnapshot.
func retained(t *testing.T, w *world, content, handle string) {
	t.Helper()
	c := w.Content(t, content)
	if c.DeletionTimestamp != nil || c.Status == nil || c.Status.SnapshotHandle == nil || *c.Status.SnapshotHandle != handle {
		t.Fatalf("Retain content %s: %s", content, framework.JSON(c))
	}
	found := false
	for _, b := range w.Drv.Created(t) {
		found = found || b.ID == handle
	}
	if !found {
		t.Fatalf("backend snapshot %s of Retain content %s is gone", handle, content)
	}
}

// TestFailedRestoreLeavesNoFinalizer: the driver refuses the restore with a
// final error and the claim is deleted. The provisioner's finalizer stays
// on the snapshot (external-provisioner #1507) until its orphan sweep
// (--snapshot-orphan-sweep-interval, 5 min by default, 20 s here) finds no
// Pending claim restoring from it; meanwhile a delete of the snapshot does
// everything that is ours (backend snapshot, content, our finalizers), and
// the snapshot is gone once the sweep has run.
func TestFailedRestoreLeavesNoFinalizer(t *testing.T) {
	w := newWorld(t, oursPair, worldOptions{Faults: []framework.FaultRule{{Method: "CreateVolume", Match: "snapshot-*",
		Code: "InvalidArgument", Message: "cannot restore this snapshot"}}, ProvisionerArgs: []string{"--snapshot-orphan-sweep-interval=20s"}})
	w.readySnapshot(t, "snap")
	content, handle := w.handleOf(t, "snap")
	w.restore(t, "restored", "snap", false)
	framework.Eventually(t, 30*time.Second, "a refused restore", func() (bool, error) {
		return w.restoresFrom(t, handle)["InvalidArgument"] > 0, nil
	})
	if ph := w.claimPhase(t, "restored"); ph != corev1.ClaimPending {
		t.Fatalf("claim restored is %q after a refused restore, want Pending", ph)
	}
	f := w.finalizers(t, "snap")
	t.Logf("snapshot finalizers after the refused restore: %v", f)
	if err := w.Env.Kube.CoreV1().PersistentVolumeClaims(w.NS).Delete(context.Background(), "restored", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "claim restored gone", func() (bool, error) {
		return w.claimPhase(t, "restored") == "", nil
	})
	if !hasString(w.finalizers(t, "snap"), framework.ProvisionerFinalizer) {
		t.Log("the provisioner's finalizer was already gone with the claim")
	}
	w.DeleteSnapshot(t, "snap")
	w.WaitContentGone(t, content)
	framework.Eventually(t, 30*time.Second, "only the provisioner's finalizer, if any, left", func() (bool, error) {
		f := w.finalizers(t, "snap")
		return len(f) == 0 || (len(f) == 1 && f[0] == framework.ProvisionerFinalizer), fmt.Errorf("finalizers %v", f)
	})
	if hasString(w.finalizers(t, "snap"), framework.ProvisionerFinalizer) {
		l := w.doctorLine(t, "snap")
		held := hasString(w.finalizers(t, "snap"), framework.ProvisionerFinalizer)
		if (l == "" && held) || (l != "" && !strings.Contains(l, "orphan sweep")) {
			t.Errorf("snapctl doctor about a snapshot held by the provisioner alone: %q, want its orphan sweep named", l)
		}
		t.Logf("snapctl doctor: %s", l)
	}
	start := time.Now()
	w.Env.WaitSnapshotGone(t, w.NS, "snap", 60*time.Second)
	t.Logf("snapshot gone %v after our finalizers (the provisioner's sweep)", time.Since(start).Round(10*time.Millisecond))
	w.invariants(t)
	if b := w.Drv.Created(t); len(b) != 0 {
		t.Fatalf("driver still holds %+v", b)
	}
}
