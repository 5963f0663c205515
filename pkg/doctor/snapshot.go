package doctor

import (
	"fmt"
	"strings"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
)

const kindSnapshot = "VolumeSnapshot"

// snapshot explains a VolumeSnapshot that is not ready or is deleting.
func (w *world) snapshot(vs *snapv1.VolumeSnapshot) (Finding, bool) {
	deleting := vs.DeletionTimestamp != nil
	if !deleting && vs.Status != nil && ready(vs.Status.ReadyToUse) {
		return Finding{}, false
	}
	f := Finding{Kind: kindSnapshot, Namespace: vs.Namespace, Name: vs.Name}
	var code, reason, fix string
	switch {
	case deleting:
		code, reason, fix = w.snapshotDeletion(vs)
	case vs.Spec.Source.VolumeSnapshotContentName != nil:
		code, reason, fix = w.preProvisioned(vs)
	default:
		code, reason, fix = w.dynamic(vs)
	}
	f.Code, f.Reason, f.Fix = code, reason, fix
	return f, true
}

// boundContent is the content vs is bound to (or names), or nil.
func (w *world) boundContent(vs *snapv1.VolumeSnapshot) *snapv1.VolumeSnapshotContent {
	if n := vs.Spec.Source.VolumeSnapshotContentName; n != nil {
		return w.contents[*n]
	}
	if vs.Status != nil && vs.Status.BoundVolumeSnapshotContentName != nil {
		return w.contents[*vs.Status.BoundVolumeSnapshotContentName]
	}
	return w.contents[snapshot.ContentNameFor(vs.UID)]
}

func (w *world) dynamic(vs *snapv1.VolumeSnapshot) (code, reason, fix string) {
	if c := w.boundContent(vs); c != nil {
		return w.waitingOnContent(vs, c)
	}
	if n := vs.Spec.VolumeSnapshotClassName; n != nil && w.classes[*n] == nil {
		return ClassNotFound, fmt.Sprintf("VolumeSnapshotClass %q does not exist", *n),
			"create it, or name an existing class (kubectl get volumesnapshotclass) in spec.volumeSnapshotClassName of a new VolumeSnapshot"
	}
	claim := ""
	if vs.Spec.Source.PersistentVolumeClaimName != nil {
		claim = *vs.Spec.Source.PersistentVolumeClaimName
	}
	pvc := w.pvcs[key(vs.Namespace, claim)]
	switch {
	case pvc == nil:
		return PVCMissing, fmt.Sprintf("source PersistentVolumeClaim %s/%s does not exist", vs.Namespace, claim),
			"create the claim, or delete this VolumeSnapshot and snapshot an existing claim"
	case pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName == "":
		return PVCUnbound, fmt.Sprintf("source PersistentVolumeClaim %s/%s is %s, not Bound", vs.Namespace, claim, phaseOf(pvc)),
			fmt.Sprintf("wait for the claim to bind (kubectl describe pvc -n %s %s); the snapshot is cut once it is Bound", vs.Namespace, claim)
	}
	pv := w.pvs[pvc.Spec.VolumeName]
	if pv == nil || pv.Spec.CSI == nil {
		return VolumeNotCSI, fmt.Sprintf("claim %s/%s is bound to PersistentVolume %q, which is not a CSI volume (or is missing)", vs.Namespace, claim, pvc.Spec.VolumeName),
			"only CSI volumes can be snapshotted: migrate the volume to a CSI driver, or use the storage's own backup tool"
	}
	if vs.Spec.VolumeSnapshotClassName == nil {
		switch defaults := w.defaultClasses(pv.Spec.CSI.Driver); len(defaults) {
		case 0:
			return NoDefaultClass, fmt.Sprintf("no class named and no default VolumeSnapshotClass for driver %s", pv.Spec.CSI.Driver),
				fmt.Sprintf("name a class in spec.volumeSnapshotClassName, or mark one class of %s as default: kubectl annotate volumesnapshotclass CLASS %s=true",
					pv.Spec.CSI.Driver, snapshot.AnnDefaultClass)
		case 1:
		default:
			return TwoDefaultClasses, fmt.Sprintf("%d default VolumeSnapshotClasses for driver %s: %s", len(defaults), pv.Spec.CSI.Driver, strings.Join(defaults, ", ")),
				fmt.Sprintf("keep one default: kubectl annotate volumesnapshotclass %s %s- ; or name a class in spec.volumeSnapshotClassName", defaults[1], snapshot.AnnDefaultClass)
		}
	}
	return w.snapshotErrorOr(vs, WaitingForCSISide, "no content yet", "wait; if it lasts, read the binder's log")
}

func phaseOf(pvc *corev1.PersistentVolumeClaim) string {
	if pvc.Status.Phase == "" {
		return "Pending"
	}
	return string(pvc.Status.Phase)
}

func (w *world) preProvisioned(vs *snapv1.VolumeSnapshot) (code, reason, fix string) {
	name := *vs.Spec.Source.VolumeSnapshotContentName
	c := w.contents[name]
	if c == nil {
		return ContentMissing, fmt.Sprintf("pre-provisioned VolumeSnapshotContent %q does not exist", name),
			"create the content (spec.source.snapshotHandle, spec.volumeSnapshotRef pointing at this snapshot), or fix spec.source.volumeSnapshotContentName"
	}
	return w.waitingOnContent(vs, c)
}

// waitingOnContent explains a snapshot whose content exists.
func (w *world) waitingOnContent(vs *snapv1.VolumeSnapshot, c *snapv1.VolumeSnapshotContent) (code, reason, fix string) {
	ref := c.Spec.VolumeSnapshotRef
	if ref.Name != vs.Name || ref.Namespace != vs.Namespace || (ref.UID != "" && ref.UID != vs.UID) {
		return ContentMisbound, fmt.Sprintf("VolumeSnapshotContent %q references VolumeSnapshot %s/%s (uid %q), not this one", c.Name, ref.Namespace, ref.Name, ref.UID),
			fmt.Sprintf("point spec.volumeSnapshotRef of the content at %s/%s (kubectl edit volumesnapshotcontent %s) or use another content", vs.Namespace, vs.Name, c.Name)
	}
	if code, reason, fix, ok := w.contentProblem(c); ok {
		return code, reason, fix
	}
	return w.snapshotErrorOr(vs, WaitingForCSISide, fmt.Sprintf("VolumeSnapshotContent %s is not ready yet; the CSI side of %s is working on it", c.Name, c.Spec.Driver),
		"wait; if it lasts, read the CSI side's log (the csi-snapshotter container next to the driver)")
}

// snapshotErrorOr reports the snapshot's status error, else the newest
// Warning event, else the given default.
func (w *world) snapshotErrorOr(vs *snapv1.VolumeSnapshot, code, reason, fix string) (string, string, string) {
	if msg := errorOf(vs.Status); msg != "" {
		return SnapshotError, "status.error: " + msg, "follow the message; kubectl describe volumesnapshot -n " + vs.Namespace + " " + vs.Name
	}
	if msg := w.lastWarning(kindSnapshot, vs.Namespace, vs.Name); msg != "" {
		return SnapshotError, "event " + msg, "follow the message; kubectl describe volumesnapshot -n " + vs.Namespace + " " + vs.Name
	}
	return code, reason, fix
}

// snapshotDeletion explains a VolumeSnapshot that is being deleted.
func (w *world) snapshotDeletion(vs *snapv1.VolumeSnapshot) (code, reason, fix string) {
	fins := vs.Finalizers
	if foreign := foreignFinalizers(fins); len(foreign) == len(fins) {
		return w.foreignDeletion(vs, foreign)
	}
	if snapshot.HasFinalizer(vs, snapshot.FinalizerSnapshotAsSource) {
		if claims := w.restoringClaims(vs.Namespace, vs.Name); len(claims) > 0 {
			return DeletionHeld, fmt.Sprintf("deletion held by finalizer %s: claim %s restores from it and is not bound yet",
					snapshot.FinalizerSnapshotAsSource, strings.Join(claims, ", ")),
				fmt.Sprintf("the binder removes the finalizer once the claim is bound or deleted: wait, or kubectl delete pvc -n %s %s", vs.Namespace, claims[0])
		}
	}
	if c := w.boundContent(vs); c != nil {
		if code, reason, fix, ok := w.contentProblem(c); ok {
			return code, reason, fix
		}
		return DeletionHeld, fmt.Sprintf("deletion held by finalizers %s until VolumeSnapshotContent %s is gone", strings.Join(fins, ", "), c.Name),
			"the binder removes them once the CSI side has deleted the content; see the content's line"
	}
	return DeletionHeld, fmt.Sprintf("deletion held by finalizers %s", strings.Join(fins, ", ")),
		"the binder (snapshot-controller) removes them: check that it runs (kubectl get lease -A | grep snapshot-controller-leader)"
}

func foreignFinalizers(fins []string) []string {
	var out []string
	for _, f := range fins {
		if !snapshot.IsOurFinalizer(f) {
			out = append(out, f)
		}
	}
	return out
}

// foreignDeletion explains a snapshot whose deletion only other
// components' finalizers hold: everything of ours is done.
func (w *world) foreignDeletion(vs *snapv1.VolumeSnapshot, foreign []string) (code, reason, fix string) {
	reason = fmt.Sprintf("the snapshot controllers are done; deletion held only by finalizers of other components: %s", strings.Join(foreign, ", "))
	remove := fmt.Sprintf(`kubectl patch volumesnapshot -n %s %s --type=merge -p '{"metadata":{"finalizers":null}}'`, vs.Namespace, vs.Name)
	if len(foreign) == 1 && foreign[0] == snapshot.FinalizerProvisionerSource {
		if claims := w.restoringClaims(vs.Namespace, vs.Name); len(claims) > 0 {
			return DeletionHeld, reason + fmt.Sprintf(" (claim %s restores from it)", strings.Join(claims, ", ")),
				fmt.Sprintf("the csi-provisioner removes it once the restore finished: wait, or kubectl delete pvc -n %s %s", vs.Namespace, claims[0])
		}
		return DeletionHeld, reason + " (no claim restores from it any more)",
			"the csi-provisioner's orphan sweep removes it within its --snapshot-orphan-sweep-interval (5m by default); " +
				"if no csi-provisioner of the driver runs any more: " + remove
	}
	return DeletionHeld, reason, "the component that owns each finalizer removes it (check that it runs); if it is uninstalled: " + remove
}
