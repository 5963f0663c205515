package validation

import (
	"fmt"
	"slices"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var (
	groupContentSourcePath  = field.NewPath("spec", "source")
	groupContentVolumesPath = groupContentSourcePath.Child("volumeHandles")
	groupContentHandlesPath = groupContentSourcePath.Child("groupSnapshotHandles")
	groupContentGroupPath   = groupContentHandlesPath.Child("volumeGroupSnapshotHandle")
	groupContentSnapsPath   = groupContentHandlesPath.Child("volumeSnapshotHandles")
	groupContentRefPath     = field.NewPath("spec", "volumeGroupSnapshotRef")
	groupContentFixNew      = "create a new VolumeGroupSnapshotContent instead"
)

// GroupContent validates a VolumeGroupSnapshotContent with the rules of
// VolumeSnapshotContent: one source, a reference to its VolumeGroupSnapshot
// that never moves, a valid driver that never changes.
func (v Validator) GroupContent(op Operation, c, old *groupv1.VolumeGroupSnapshotContent) (field.ErrorList, []string) {
	if op != Update || old == nil {
		return groupContentSpecErrors(c), nil
	}
	if beingDeleted(c, old) || equality.Semantic.DeepEqual(c.Spec, old.Spec) {
		return nil, nil
	}
	errs := groupContentImmutableErrors(c, old)
	return append(errs, ratchet(groupContentSpecErrors(c), groupContentSpecErrors(old))...), nil
}

func groupContentObj(c *groupv1.VolumeGroupSnapshotContent) string {
	return clusterObj("VolumeGroupSnapshotContent", c.Name)
}

// groupContentSpecErrors are the rules that depend on the content alone.
func groupContentSpecErrors(c *groupv1.VolumeGroupSnapshotContent) field.ErrorList {
	var errs field.ErrorList
	self := groupContentObj(c)
	vh, gh := c.Spec.Source.VolumeHandles, c.Spec.Source.GroupSnapshotHandles
	switch {
	case vh != nil && gh != nil:
		errs = append(errs, invalid(groupContentSourcePath, "volumeHandles and groupSnapshotHandles",
			"%s sets both spec.source.volumeHandles and spec.source.groupSnapshotHandles: volumeHandles asks the driver to cut a new group snapshot, groupSnapshotHandles imports an existing one; keep exactly one",
			self))
	case vh == nil && gh == nil:
		errs = append(errs, required(groupContentSourcePath,
			"%s has no source: set spec.source.groupSnapshotHandles to import an existing group snapshot, or spec.source.volumeHandles to cut a new one",
			self))
	case vh != nil:
		errs = append(errs, handleListErrors(self, groupContentVolumesPath, vh, "CSI volume id")...)
	default:
		if gh.VolumeGroupSnapshotHandle == "" {
			errs = append(errs, required(groupContentGroupPath,
				"%s has an empty %s: set the CSI group snapshot id", self, groupContentGroupPath))
		}
		errs = append(errs, handleListErrors(self, groupContentSnapsPath, gh.VolumeSnapshotHandles, "CSI snapshot id")...)
	}
	errs = append(errs, refRequiredErrors(self, groupContentRefPath, "VolumeGroupSnapshot", c.Spec.VolumeGroupSnapshotRef)...)
	return append(errs, driverPolicyErrors(self, c.Spec.Driver, c.Spec.DeletionPolicy)...)
}

// handleListErrors requires a non-empty list of non-empty handles.
func handleListErrors(self string, path *field.Path, handles []string, what string) field.ErrorList {
	if len(handles) == 0 {
		return field.ErrorList{required(path, "%s has an empty %s: list a %s for every member of the group", self, path, what)}
	}
	var errs field.ErrorList
	for i, h := range handles {
		if h == "" {
			errs = append(errs, required(path.Index(i),
				"%s has an empty entry %s: every entry must be a %s; set it or remove the entry", self, path.Index(i), what))
		}
	}
	return errs
}

// groupContentImmutableErrors are the rules of change on UPDATE.
func groupContentImmutableErrors(c, old *groupv1.VolumeGroupSnapshotContent) field.ErrorList {
	var errs field.ErrorList
	self := groupContentObj(c)
	why := "the source of a content is fixed; " + groupContentFixNew
	if o := old.Spec.Source.VolumeHandles; o != nil && !slices.Equal(o, c.Spec.Source.VolumeHandles) {
		errs = append(errs, listChanged(self, groupContentVolumesPath, quoteList(o), quoteListOrNil(c.Spec.Source.VolumeHandles), why))
	}
	if o := old.Spec.Source.GroupSnapshotHandles; o != nil && !equality.Semantic.DeepEqual(o, c.Spec.Source.GroupSnapshotHandles) {
		errs = append(errs, listChanged(self, groupContentHandlesPath, describeGroupHandles(o),
			describeGroupHandles(c.Spec.Source.GroupSnapshotHandles), why))
	}
	errs = append(errs, fixedOnceSet(self, contentDriverPath, &old.Spec.Driver, &c.Spec.Driver,
		"the backend group snapshot belongs to the driver that cut it; "+groupContentFixNew)...)
	return append(errs, refChangeErrors(self, groupContentRefPath, "VolumeGroupSnapshot", "VolumeGroupSnapshotContent",
		old.Spec.VolumeGroupSnapshotRef, c.Spec.VolumeGroupSnapshotRef)...)
}

// listChanged denies changing or removing a source field that was set;
// cur is "" when the field was removed.
func listChanged(self string, path *field.Path, old, cur, why string) *field.Error {
	if cur == "" {
		return forbidden(path, "%s cannot remove %s (it was %s): %s", self, path, old, why)
	}
	return forbidden(path, "%s cannot change %s from %s to %s: %s", self, path, old, cur, why)
}

func quoteList(s []string) string { return "[" + quoteAll(s) + "]" }

func quoteListOrNil(s []string) string {
	if s == nil {
		return ""
	}
	return quoteList(s)
}

func describeGroupHandles(h *groupv1.GroupSnapshotHandles) string {
	if h == nil {
		return ""
	}
	return fmt.Sprintf("group snapshot %q with snapshots %s", h.VolumeGroupSnapshotHandle, quoteList(h.VolumeSnapshotHandles))
}
