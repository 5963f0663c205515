package validation

import (
	"fmt"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var (
	groupSourcePath      = field.NewPath("spec", "source")
	groupSelectorPath    = groupSourcePath.Child("selector")
	groupContentNamePath = groupSourcePath.Child("volumeGroupSnapshotContentName")
	groupClassPath       = field.NewPath("spec", "volumeGroupSnapshotClassName")
)

// GroupSnapshot validates a VolumeGroupSnapshot. old is the stored object on
// UPDATE. The rules mirror those of VolumeSnapshot; on CREATE the claims the
// selector matches must be bound volumes of one CSI driver, the driver of
// the named class (groupmembers.go).
func (v Validator) GroupSnapshot(op Operation, g, old *groupv1.VolumeGroupSnapshot) (field.ErrorList, []string) {
	if op == Update && old != nil {
		return v.groupSnapshotUpdate(g, old)
	}
	if errs := groupSnapshotSpecErrors(g); len(errs) > 0 {
		return errs, nil
	}
	return v.groupSnapshotRefs(g, true)
}

func (v Validator) groupSnapshotUpdate(g, old *groupv1.VolumeGroupSnapshot) (field.ErrorList, []string) {
	if beingDeleted(g, old) || equality.Semantic.DeepEqual(g.Spec, old.Spec) {
		return nil, nil
	}
	var errs field.ErrorList
	if !equality.Semantic.DeepEqual(g.Spec.Source, old.Spec.Source) {
		errs = append(errs, forbidden(groupSourcePath,
			"%s cannot change spec.source from %s to %s: the source is fixed when the group snapshot is created; create a new VolumeGroupSnapshot instead",
			groupObj(g), describeGroupSource(old.Spec.Source), describeGroupSource(g.Spec.Source)))
	}
	errs = append(errs, ratchet(groupSnapshotSpecErrors(g), groupSnapshotSpecErrors(old))...)
	if len(errs) > 0 {
		return errs, nil
	}
	// As for VolumeSnapshot, the class name may be filled in after
	// creation (the default class); a new name is looked up for warnings.
	if deref(g.Spec.VolumeGroupSnapshotClassName) != deref(old.Spec.VolumeGroupSnapshotClassName) {
		return v.groupSnapshotRefs(g, false)
	}
	return nil, nil
}

func groupObj(g *groupv1.VolumeGroupSnapshot) string {
	return nsObj("VolumeGroupSnapshot", g.Namespace, g.Name)
}

func describeGroupSource(src groupv1.VolumeGroupSnapshotSource) string {
	sel := ""
	if src.Selector != nil {
		sel = fmt.Sprintf("selector %q", metav1.FormatLabelSelector(src.Selector))
	}
	switch {
	case src.Selector != nil && src.VolumeGroupSnapshotContentName != nil:
		return fmt.Sprintf("%s and volumeGroupSnapshotContentName %q", sel, *src.VolumeGroupSnapshotContentName)
	case src.Selector != nil:
		return sel
	case src.VolumeGroupSnapshotContentName != nil:
		return fmt.Sprintf("volumeGroupSnapshotContentName %q", *src.VolumeGroupSnapshotContentName)
	}
	return "no source"
}

// groupSnapshotSpecErrors are the rules that depend on the group alone.
func groupSnapshotSpecErrors(g *groupv1.VolumeGroupSnapshot) field.ErrorList {
	var errs field.ErrorList
	self := groupObj(g)
	sel, content := g.Spec.Source.Selector, g.Spec.Source.VolumeGroupSnapshotContentName
	switch {
	case sel != nil && content != nil:
		errs = append(errs, invalid(groupSourcePath, describeGroupSource(g.Spec.Source),
			"%s sets both spec.source.selector and spec.source.volumeGroupSnapshotContentName: a group snapshot either selects claims by label or binds an existing content; keep exactly one",
			self))
	case sel == nil && content == nil:
		errs = append(errs, required(groupSourcePath,
			"%s has no source: set spec.source.selector to snapshot the claims whose labels match, or spec.source.volumeGroupSnapshotContentName to bind an existing VolumeGroupSnapshotContent",
			self))
	case content != nil && *content == "":
		errs = append(errs, required(groupContentNamePath,
			"%s has an empty spec.source.volumeGroupSnapshotContentName: name the VolumeGroupSnapshotContent to bind", self))
	case sel != nil:
		if _, err := metav1.LabelSelectorAsSelector(sel); err != nil {
			errs = append(errs, invalid(groupSelectorPath, metav1.FormatLabelSelector(sel),
				"%s has an invalid spec.source.selector: %v; write matchLabels as valid label keys and values, and matchExpressions with operator In or NotIn (with values) or Exists or DoesNotExist (without)",
				self, err))
		}
	}
	if c := g.Spec.VolumeGroupSnapshotClassName; c != nil && *c == "" {
		errs = append(errs, invalid(groupClassPath, "",
			"%s sets spec.volumeGroupSnapshotClassName to the empty string: omit the field to use the default group class of the driver, or name a class",
			self))
	}
	return errs
}

// groupSnapshotRefs checks the class the group names and, on CREATE
// (withSource), the claims its selector matches. A class that is missing or
// cannot be read is a warning, as for VolumeSnapshot.
func (v Validator) groupSnapshotRefs(g *groupv1.VolumeGroupSnapshot, withSource bool) (field.ErrorList, []string) {
	var warnings []string
	self := groupObj(g)
	var class *groupv1.VolumeGroupSnapshotClass
	if name := deref(g.Spec.VolumeGroupSnapshotClassName); name != "" {
		var err error
		if class, err = v.Lookup.GetGroupClass(name); err != nil {
			warnings = append(warnings, fmt.Sprintf("%s: could not check VolumeGroupSnapshotClass %q: %v", self, name, err))
		} else if class == nil {
			warnings = append(warnings, fmt.Sprintf(
				"%s: VolumeGroupSnapshotClass %q does not exist yet; the group snapshot waits until it does", self, name))
		}
	}
	if !withSource || g.Spec.Source.Selector == nil {
		return nil, warnings
	}
	errs, w := v.groupMembers(g, class)
	return errs, append(warnings, w...)
}
