package validation

import (
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
)

var (
	contentSourcePath    = field.NewPath("spec", "source")
	contentVolumePath    = contentSourcePath.Child("volumeHandle")
	contentSnapshotPath  = contentSourcePath.Child("snapshotHandle")
	contentModePath      = field.NewPath("spec", "sourceVolumeMode")
	contentRefPath       = field.NewPath("spec", "volumeSnapshotRef")
	contentDriverPath    = field.NewPath("spec", "driver")
	contentPolicyPath    = field.NewPath("spec", "deletionPolicy")
	contentFixNewContent = "create a new VolumeSnapshotContent instead"
)

// Content validates a VolumeSnapshotContent. old is the stored object on
// UPDATE. A content is the only record of a backend snapshot: every rule
// here keeps it pointing at the same snapshot, driver and VolumeSnapshot,
// because a silently re-pointed content deletes or leaks the wrong data.
func (v Validator) Content(op Operation, c, old *snapv1.VolumeSnapshotContent) (field.ErrorList, []string) {
	if op != Update || old == nil {
		return contentSpecErrors(c), nil
	}
	if beingDeleted(c, old) || equality.Semantic.DeepEqual(c.Spec, old.Spec) {
		return nil, nil
	}
	errs := contentImmutableErrors(c, old)
	return append(errs, ratchet(contentSpecErrors(c), contentSpecErrors(old))...), nil
}

func contentObj(c *snapv1.VolumeSnapshotContent) string {
	return clusterObj("VolumeSnapshotContent", c.Name)
}

// contentSpecErrors are the rules that depend on the content alone.
func contentSpecErrors(c *snapv1.VolumeSnapshotContent) field.ErrorList {
	var errs field.ErrorList
	self := contentObj(c)
	vh, sh := c.Spec.Source.VolumeHandle, c.Spec.Source.SnapshotHandle
	switch {
	case vh != nil && sh != nil:
		errs = append(errs, invalid(contentSourcePath, "volumeHandle and snapshotHandle",
			"%s sets both spec.source.volumeHandle and spec.source.snapshotHandle: volumeHandle asks the driver to cut a new snapshot, snapshotHandle imports an existing one; keep exactly one",
			self))
	case vh == nil && sh == nil:
		errs = append(errs, required(contentSourcePath,
			"%s has no source: set spec.source.snapshotHandle to import an existing snapshot, or spec.source.volumeHandle to cut a new one",
			self))
	case vh != nil && *vh == "":
		errs = append(errs, required(contentVolumePath, "%s has an empty spec.source.volumeHandle: set the CSI volume id", self))
	case sh != nil && *sh == "":
		errs = append(errs, required(contentSnapshotPath, "%s has an empty spec.source.snapshotHandle: set the CSI snapshot id", self))
	}
	errs = append(errs, refRequiredErrors(self, contentRefPath, snapshot.KindSnapshot, c.Spec.VolumeSnapshotRef)...)
	errs = append(errs, driverPolicyErrors(self, c.Spec.Driver, c.Spec.DeletionPolicy)...)
	if m := c.Spec.SourceVolumeMode; m != nil && *m != corev1.PersistentVolumeFilesystem && *m != corev1.PersistentVolumeBlock {
		errs = append(errs, invalid(contentModePath, *m,
			"%s has spec.sourceVolumeMode %q: it must be %q or %q; set the mode of the volume the snapshot was cut from",
			self, *m, corev1.PersistentVolumeFilesystem, corev1.PersistentVolumeBlock))
	}
	return errs
}

// contentImmutableErrors are the rules of change on UPDATE.
func contentImmutableErrors(c, old *snapv1.VolumeSnapshotContent) field.ErrorList {
	var errs field.ErrorList
	self := contentObj(c)
	errs = append(errs, fixedOnceSet(self, contentVolumePath, old.Spec.Source.VolumeHandle, c.Spec.Source.VolumeHandle,
		"the source of a content is fixed; "+contentFixNewContent)...)
	errs = append(errs, fixedOnceSet(self, contentSnapshotPath, old.Spec.Source.SnapshotHandle, c.Spec.Source.SnapshotHandle,
		"the source of a content is fixed; "+contentFixNewContent)...)
	errs = append(errs, fixedOnceSet(self, contentModePath, (*string)(old.Spec.SourceVolumeMode), (*string)(c.Spec.SourceVolumeMode),
		"restores rely on the mode the snapshot was cut from; "+contentFixNewContent)...)
	errs = append(errs, fixedOnceSet(self, contentDriverPath, &old.Spec.Driver, &c.Spec.Driver,
		"the backend snapshot belongs to the driver that cut it; "+contentFixNewContent)...)

	return append(errs, refChangeErrors(self, contentRefPath, snapshot.KindSnapshot, "VolumeSnapshotContent",
		old.Spec.VolumeSnapshotRef, c.Spec.VolumeSnapshotRef)...)
}

// refRequiredErrors requires the name and namespace of a content's
// reference to its snapshot (of kind snapKind) at path.
func refRequiredErrors(self string, path *field.Path, snapKind string, ref corev1.ObjectReference) field.ErrorList {
	var errs field.ErrorList
	if ref.Name == "" {
		errs = append(errs, required(path.Child("name"),
			"%s must name its %s: set %s", self, snapKind, path.Child("name")))
	}
	if ref.Namespace == "" {
		errs = append(errs, required(path.Child("namespace"),
			"%s must name the namespace of its %s: set %s", self, snapKind, path.Child("namespace")))
	}
	return errs
}

// driverPolicyErrors checks spec.driver and spec.deletionPolicy of a content.
func driverPolicyErrors(self, driver string, p snapv1.DeletionPolicy) field.ErrorList {
	var errs field.ErrorList
	if why := validCSIDriverName(driver); why != "" {
		errs = append(errs, invalid(contentDriverPath, driver,
			"%s has an invalid spec.driver %q: %s; use the name the CSI driver reports (the name of its CSIDriver object)",
			self, driver, why))
	}
	if p != snapv1.VolumeSnapshotContentDelete && p != snapv1.VolumeSnapshotContentRetain {
		errs = append(errs, invalid(contentPolicyPath, p,
			"%s has spec.deletionPolicy %q: it must be %q or %q; set one of them",
			self, p, snapv1.VolumeSnapshotContentDelete, snapv1.VolumeSnapshotContentRetain))
	}
	return errs
}

// refChangeErrors keeps a content bound to the snapshot (of kind snapKind)
// its reference at path names.
func refChangeErrors(self string, path *field.Path, snapKind, contentKind string, oldRef, ref corev1.ObjectReference) field.ErrorList {
	var errs field.ErrorList
	if oldRef.Name != "" && oldRef.Namespace != "" && (oldRef.Name != ref.Name || oldRef.Namespace != ref.Namespace) {
		errs = append(errs, forbidden(path,
			"%s cannot move %s from %q to %q: a content stays bound to the %s it names; create a new %s for %q",
			self, path, oldRef.Namespace+"/"+oldRef.Name, ref.Namespace+"/"+ref.Name, snapKind, contentKind, ref.Namespace+"/"+ref.Name))
	}
	// The uid may be set once (binding) or cleared (the usual repair of a
	// misbound content), but replacing it in one step would rebind the
	// backend snapshot to another snapshot object behind the binder's back.
	if oldRef.UID != "" && ref.UID != "" && oldRef.UID != ref.UID {
		errs = append(errs, forbidden(path.Child("uid"),
			"%s cannot change %s from %q to %q: the uid may be set once or cleared to repair a misbound content, never replaced; clear it and let the controller bind the content again",
			self, path.Child("uid"), oldRef.UID, ref.UID))
	}
	return errs
}

// fixedOnceSet denies changing or removing a field that was set.
func fixedOnceSet(self string, path *field.Path, old, cur *string, why string) field.ErrorList {
	if old == nil || (cur != nil && *cur == *old) {
		return nil
	}
	if cur == nil {
		return field.ErrorList{forbidden(path, "%s cannot remove %s (it was %q): %s", self, path, *old, why)}
	}
	return field.ErrorList{forbidden(path, "%s cannot change %s from %q to %q: %s", self, path, *old, *cur, why)}
}
