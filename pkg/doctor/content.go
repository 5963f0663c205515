package doctor

import (
	"fmt"
	"strings"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
)

const kindContent = "VolumeSnapshotContent"

// NoCSISideFix is the fix of a driver without a CSI side.
func NoCSISideFix(driver string) string {
	return fmt.Sprintf("deploy one next to the driver (csi-snapshotter or snapkeeper --components=csi with --csi-address of %s); "+
		"confirm with: kubectl get lease -A | grep -e %s -e %s%s", driver, snapshot.CSILeaseName(driver), snapshot.HeartbeatLeasePrefix, snapshot.DriverLeaseKey(driver))
}

// contentProblem is what keeps a content from progressing, if known: a
// missing secret, no CSI side for its driver, or the driver's error.
func (w *world) contentProblem(c *snapv1.VolumeSnapshotContent) (code, reason, fix string, ok bool) {
	ns, name := c.Annotations[snapshot.AnnDeletionSecretNamespace], c.Annotations[snapshot.AnnDeletionSecretName]
	if exists, known := w.in.Secrets[key(ns, name)]; name != "" && known && !exists {
		return SecretMissing, fmt.Sprintf("Secret %s/%s named by VolumeSnapshotContent %s (%s) does not exist; the CSI side needs it to create and delete the snapshot",
				ns, name, c.Name, snapshot.AnnDeletionSecretName),
			fmt.Sprintf("create it: kubectl create secret generic -n %s %s --from-literal=KEY=VALUE (the keys the driver expects)", ns, name), true
	}
	finished := c.Status != nil && ready(c.Status.ReadyToUse) && c.DeletionTimestamp == nil
	if !finished && w.csiSideDown(c.Spec.Driver) {
		what := "create"
		if c.DeletionTimestamp != nil {
			what = "delete"
		}
		return NoCSISide, fmt.Sprintf("no CSI side (csi-snapshotter or snapkeeper --components=csi) is running for driver %s, and VolumeSnapshotContent %s waits for it to %s the snapshot",
			c.Spec.Driver, c.Name, what), NoCSISideFix(c.Spec.Driver), true
	}
	if msg := contentErrorOf(c.Status); msg != "" {
		return DriverError, fmt.Sprintf("VolumeSnapshotContent %s: %s", c.Name, msg),
			"follow the driver's message (kubectl describe volumesnapshotcontent " + c.Name + "); the CSI side retries with backoff", true
	}
	return "", "", "", false
}

// content explains a content that is stuck deleting, or not ready with a
// known problem while no snapshot of it explains it.
func (w *world) content(c *snapv1.VolumeSnapshotContent) (Finding, bool) {
	ref := c.Spec.VolumeSnapshotRef
	f := Finding{Kind: kindContent, Name: c.Name, scope: ref.Namespace}
	if c.DeletionTimestamp != nil {
		if len(c.Finalizers) == 0 {
			return Finding{}, false
		}
		if code, reason, fix, ok := w.contentProblem(c); ok {
			f.Code, f.Reason, f.Fix = code, reason, fix
			return f, true
		}
		f.Code = DeletionHeld
		f.Reason = fmt.Sprintf("deletion held by finalizers %s", strings.Join(c.Finalizers, ", "))
		f.Fix = contentFinalizerOwner(c)
		return f, true
	}
	if c.Status != nil && ready(c.Status.ReadyToUse) {
		return Finding{}, false
	}
	if vs := w.snapshots[key(ref.Namespace, ref.Name)]; vs != nil {
		return Finding{}, false // the snapshot's line explains it
	}
	if code, reason, fix, ok := w.contentProblem(c); ok {
		f.Code, f.Reason, f.Fix = code, reason, fix
		return f, true
	}
	return Finding{}, false
}

// contentFinalizerOwner says who removes the finalizer of a deleting content.
func contentFinalizerOwner(c *snapv1.VolumeSnapshotContent) string {
	if c.Spec.DeletionPolicy == snapv1.VolumeSnapshotContentDelete {
		return fmt.Sprintf("the CSI side of %s removes %s after DeleteSnapshot succeeds; read its log and the content's events (kubectl describe volumesnapshotcontent %s)",
			c.Spec.Driver, snapshot.FinalizerContentBound, c.Name)
	}
	return fmt.Sprintf("the binder removes %s once VolumeSnapshot %s/%s is gone; check that the binder runs",
		snapshot.FinalizerContentBound, c.Spec.VolumeSnapshotRef.Namespace, c.Spec.VolumeSnapshotRef.Name)
}
