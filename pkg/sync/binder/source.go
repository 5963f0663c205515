package binder

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
)

// snapshotSource returns claim ns/name of a dynamic snapshot and its bound
// CSI volume, or the problem that keeps them from being snapshotted.
//
// The informer cache may lag a claim created or bound a moment before the
// snapshot (one manifest with both, a provisioner that has just bound it):
// before a problem that may only be that lag is reported (a Warning event
// and status error the user would read as real), the claim and its volume
// are read once from the API server. Only a snapshot that waits pays that
// read; one whose claim the cache shows bound pays nothing.
func (c *Controller) snapshotSource(ctx context.Context, ns, name string) (*corev1.PersistentVolumeClaim, *corev1.PersistentVolume, *problem) {
	var pv *corev1.PersistentVolume
	pvc, err := c.pvcs.PersistentVolumeClaims(ns).Get(name)
	prob := missingClaim(ns, name)
	if err == nil {
		pv, prob = c.claimVolume(pvc, c.pvs.Get)
	}
	if prob == nil || !prob.mayBeLag || c.cfg.Kube == nil {
		return pvc, pv, prob
	}
	core := c.cfg.Kube.CoreV1()
	live, err := core.PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, prob // the cache's word stands; the next sync reads again
	}
	pv, prob = c.claimVolume(live, func(pvName string) (*corev1.PersistentVolume, error) {
		return core.PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
	})
	return live, pv, prob
}

func missingClaim(ns, name string) *problem {
	p := problemf(snapshot.ReasonSnapshotContentCreationFailed,
		"PersistentVolumeClaim %s/%s does not exist yet; create it or fix spec.source.persistentVolumeClaimName", ns, name)
	p.mayBeLag = true
	return p
}

// claimVolume returns the CSI volume bound to a claim, looked up by
// getPV, or the problem that keeps it from being snapshotted.
func (c *Controller) claimVolume(pvc *corev1.PersistentVolumeClaim, getPV func(string) (*corev1.PersistentVolume, error)) (*corev1.PersistentVolume, *problem) {
	key := pvc.Namespace + "/" + pvc.Name
	if pvc.DeletionTimestamp != nil {
		return nil, problemf(snapshot.ReasonSnapshotContentCreationFailed,
			"PersistentVolumeClaim %s is being deleted; a snapshot cannot be taken from it", key)
	}
	if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName == "" {
		p := problemf(snapshot.ReasonSnapshotContentCreationFailed,
			"PersistentVolumeClaim %s is not bound yet; the snapshot is taken once it is", key)
		p.mayBeLag = true
		return nil, p
	}
	pv, err := getPV(pvc.Spec.VolumeName)
	if err != nil {
		p := problemf(snapshot.ReasonSnapshotContentCreationFailed,
			"PersistentVolume %q of claim %s does not exist yet", pvc.Spec.VolumeName, key)
		p.mayBeLag = true
		return nil, p
	}
	if ref := pv.Spec.ClaimRef; ref == nil || ref.Name != pvc.Name || ref.Namespace != pvc.Namespace || (ref.UID != "" && ref.UID != pvc.UID) {
		return nil, problemf(snapshot.ReasonSnapshotContentCreationFailed,
			"PersistentVolume %q is not bound to claim %s (its spec.claimRef names another claim); the snapshot is taken once the volume and the claim are bound to each other",
			pv.Name, key)
	}
	if pv.Spec.CSI == nil {
		return nil, problemf(snapshot.ReasonSnapshotContentCreationFailed,
			"PersistentVolume %q is not a CSI volume; only CSI volumes can be snapshotted", pv.Name)
	}
	return pv, nil
}
