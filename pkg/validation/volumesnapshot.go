package validation

import (
	"fmt"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var (
	snapSourcePath  = field.NewPath("spec", "source")
	snapPVCPath     = snapSourcePath.Child("persistentVolumeClaimName")
	snapContentPath = snapSourcePath.Child("volumeSnapshotContentName")
	snapClassPath   = field.NewPath("spec", "volumeSnapshotClassName")
)

// Snapshot validates a VolumeSnapshot. old is the stored object on UPDATE.
func (v Validator) Snapshot(op Operation, s, old *snapv1.VolumeSnapshot) (field.ErrorList, []string) {
	if op == Update && old != nil {
		return v.snapshotUpdate(s, old)
	}
	if errs := snapshotSpecErrors(s); len(errs) > 0 {
		return errs, nil
	}
	return v.snapshotRefs(s, true)
}

func (v Validator) snapshotUpdate(s, old *snapv1.VolumeSnapshot) (field.ErrorList, []string) {
	if beingDeleted(s, old) || equality.Semantic.DeepEqual(s.Spec, old.Spec) {
		return nil, nil
	}
	var errs field.ErrorList
	if !equality.Semantic.DeepEqual(s.Spec.Source, old.Spec.Source) {
		errs = append(errs, forbidden(snapSourcePath,
			"%s cannot change spec.source from %s to %s: the source is fixed when the snapshot is created; create a new VolumeSnapshot instead",
			snapObj(s), describeSnapSource(old.Spec.Source), describeSnapSource(s.Spec.Source)))
	}
	errs = append(errs, ratchet(snapshotSpecErrors(s), snapshotSpecErrors(old))...)
	if len(errs) > 0 {
		return errs, nil
	}
	// The controller fills in the default class name after creation; a
	// class name that changes is looked up again for the warnings.
	if deref(s.Spec.VolumeSnapshotClassName) != deref(old.Spec.VolumeSnapshotClassName) {
		return v.snapshotRefs(s, false)
	}
	return nil, nil
}

func snapObj(s *snapv1.VolumeSnapshot) string { return nsObj("VolumeSnapshot", s.Namespace, s.Name) }

func describeSnapSource(src snapv1.VolumeSnapshotSource) string {
	switch {
	case src.PersistentVolumeClaimName != nil && src.VolumeSnapshotContentName != nil:
		return fmt.Sprintf("persistentVolumeClaimName %q and volumeSnapshotContentName %q",
			*src.PersistentVolumeClaimName, *src.VolumeSnapshotContentName)
	case src.PersistentVolumeClaimName != nil:
		return fmt.Sprintf("persistentVolumeClaimName %q", *src.PersistentVolumeClaimName)
	case src.VolumeSnapshotContentName != nil:
		return fmt.Sprintf("volumeSnapshotContentName %q", *src.VolumeSnapshotContentName)
	}
	return "no source"
}

// snapshotSpecErrors are the rules that depend on the snapshot alone.
func snapshotSpecErrors(s *snapv1.VolumeSnapshot) field.ErrorList {
	var errs field.ErrorList
	self := snapObj(s)
	pvc, content := s.Spec.Source.PersistentVolumeClaimName, s.Spec.Source.VolumeSnapshotContentName
	switch {
	case pvc != nil && content != nil:
		errs = append(errs, invalid(snapSourcePath, describeSnapSource(s.Spec.Source),
			"%s sets both spec.source.persistentVolumeClaimName and spec.source.volumeSnapshotContentName: a snapshot is either cut from a claim or binds an existing content; keep exactly one",
			self))
	case pvc == nil && content == nil:
		errs = append(errs, required(snapSourcePath,
			"%s has no source: set spec.source.persistentVolumeClaimName to snapshot a claim, or spec.source.volumeSnapshotContentName to bind an existing VolumeSnapshotContent",
			self))
	case pvc != nil && *pvc == "":
		errs = append(errs, required(snapPVCPath,
			"%s has an empty spec.source.persistentVolumeClaimName: name the claim to snapshot", self))
	case content != nil && *content == "":
		errs = append(errs, required(snapContentPath,
			"%s has an empty spec.source.volumeSnapshotContentName: name the VolumeSnapshotContent to bind", self))
	}
	if c := s.Spec.VolumeSnapshotClassName; c != nil && *c == "" {
		errs = append(errs, invalid(snapClassPath, "",
			"%s sets spec.volumeSnapshotClassName to the empty string: omit the field to use the default class of the driver, or name a class",
			self))
	}
	return errs
}

// snapshotRefs checks the objects the snapshot names. Only a content bound
// to another snapshot is denied: such a snapshot could never become ready.
// Missing objects are warnings, since GitOps tools create related objects
// in one sync in any order.
func (v Validator) snapshotRefs(s *snapv1.VolumeSnapshot, withSource bool) (field.ErrorList, []string) {
	var warnings []string
	self := snapObj(s)
	if name := deref(s.Spec.Source.VolumeSnapshotContentName); name != "" && withSource {
		content, err := v.Lookup.GetContent(name)
		if err != nil {
			return field.ErrorList{lookupFailed(snapContentPath, fmt.Sprintf("VolumeSnapshotContent %q", name), err)}, nil
		}
		if content == nil {
			warnings = append(warnings, fmt.Sprintf(
				"%s: VolumeSnapshotContent %q does not exist yet; the snapshot stays unready until it does", self, name))
		} else if ref := content.Spec.VolumeSnapshotRef; ref.Name != s.Name || ref.Namespace != s.Namespace {
			return field.ErrorList{invalid(snapContentPath, name,
				"%s cannot bind VolumeSnapshotContent %q: its spec.volumeSnapshotRef names %q, so the snapshot would never become ready; point the content's volumeSnapshotRef at %q or use another content",
				self, name, ref.Namespace+"/"+ref.Name, s.Namespace+"/"+s.Name)}, nil
		}
	}
	var class *snapv1.VolumeSnapshotClass
	if name := deref(s.Spec.VolumeSnapshotClassName); name != "" {
		var err error
		if class, err = v.Lookup.GetClass(name); err != nil {
			warnings = append(warnings, fmt.Sprintf("%s: could not check VolumeSnapshotClass %q: %v", self, name, err))
		} else if class == nil {
			warnings = append(warnings, fmt.Sprintf(
				"%s: VolumeSnapshotClass %q does not exist yet; the snapshot waits until it does", self, name))
		}
	}
	if pvc := deref(s.Spec.Source.PersistentVolumeClaimName); pvc != "" && withSource {
		warnings = append(warnings, v.snapshotDriverWarnings(s, pvc, class)...)
	}
	return nil, warnings
}

// snapshotDriverWarnings warns when the claim is missing, or when the class
// (named or default) does not fit the driver that provisioned the claim.
func (v Validator) snapshotDriverWarnings(s *snapv1.VolumeSnapshot, pvcName string, class *snapv1.VolumeSnapshotClass) []string {
	self := snapObj(s)
	driver, found, err := v.claimDriver(s.Namespace, pvcName)
	switch {
	case err != nil:
		return []string{fmt.Sprintf("%s: could not check PersistentVolumeClaim %q: %v", self, pvcName, err)}
	case !found:
		return []string{fmt.Sprintf(
			"%s: PersistentVolumeClaim %q does not exist yet in namespace %q; the snapshot waits until it does",
			self, pvcName, s.Namespace)}
	case driver == "":
		return nil // not bound yet, or not a CSI volume: nothing to compare
	case class != nil && class.Driver != driver:
		return []string{fmt.Sprintf(
			"%s: VolumeSnapshotClass %q is for driver %q but claim %q is provisioned by %q; the snapshot will fail: use a class of driver %q",
			self, class.Name, class.Driver, pvcName, driver, driver)}
	case s.Spec.VolumeSnapshotClassName == nil:
		return v.defaultClassWarnings(singleClasses, self, driver, "spec.volumeSnapshotClassName")
	}
	return nil
}

// claimDriver returns the CSI driver of the volume bound to a claim, and
// whether the claim exists. The driver is "" while the claim is unbound.
func (v Validator) claimDriver(namespace, name string) (string, bool, error) {
	pvc, err := v.Lookup.GetPVC(namespace, name)
	if err != nil || pvc == nil {
		return "", false, err
	}
	if pvc.Spec.VolumeName == "" {
		return "", true, nil
	}
	pv, err := v.Lookup.GetPV(pvc.Spec.VolumeName)
	if err != nil || pv == nil || pv.Spec.CSI == nil {
		return "", true, err
	}
	return pv.Spec.CSI.Driver, true, nil
}
