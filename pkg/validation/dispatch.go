package validation

import (
	"fmt"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/snapkeeper/snapkeeper/pkg/apis/snapkeeper/v1alpha1"
)

// Validate applies the rules of obj's kind. old is the stored object on
// UPDATE (nil on CREATE) and must be of the same type. An object of a kind
// without rules is an error, so a caller never mistakes "not checked" for
// "admitted".
func (v Validator) Validate(op Operation, obj, old any) (field.ErrorList, []string, error) {
	var errs field.ErrorList
	var warnings []string
	ok := true
	switch o := obj.(type) {
	case *snapv1.VolumeSnapshotClass:
		var prev *snapv1.VolumeSnapshotClass
		if prev, ok = oldAs[*snapv1.VolumeSnapshotClass](old); ok {
			errs, warnings = v.Class(op, o, prev)
		}
	case *snapv1.VolumeSnapshot:
		var prev *snapv1.VolumeSnapshot
		if prev, ok = oldAs[*snapv1.VolumeSnapshot](old); ok {
			errs, warnings = v.Snapshot(op, o, prev)
		}
	case *snapv1.VolumeSnapshotContent:
		var prev *snapv1.VolumeSnapshotContent
		if prev, ok = oldAs[*snapv1.VolumeSnapshotContent](old); ok {
			errs, warnings = v.Content(op, o, prev)
		}
	case *groupv1.VolumeGroupSnapshotClass:
		var prev *groupv1.VolumeGroupSnapshotClass
		if prev, ok = oldAs[*groupv1.VolumeGroupSnapshotClass](old); ok {
			errs, warnings = v.GroupClass(op, o, prev)
		}
	case *groupv1.VolumeGroupSnapshot:
		var prev *groupv1.VolumeGroupSnapshot
		if prev, ok = oldAs[*groupv1.VolumeGroupSnapshot](old); ok {
			errs, warnings = v.GroupSnapshot(op, o, prev)
		}
	case *groupv1.VolumeGroupSnapshotContent:
		var prev *groupv1.VolumeGroupSnapshotContent
		if prev, ok = oldAs[*groupv1.VolumeGroupSnapshotContent](old); ok {
			errs, warnings = v.GroupContent(op, o, prev)
		}
	case *v1alpha1.SnapshotSchedule:
		var prev *v1alpha1.SnapshotSchedule
		if prev, ok = oldAs[*v1alpha1.SnapshotSchedule](old); ok {
			errs, warnings = v.Schedule(op, o, prev)
		}
	case *corev1.PersistentVolumeClaim:
		var prev *corev1.PersistentVolumeClaim
		if prev, ok = oldAs[*corev1.PersistentVolumeClaim](old); ok {
			errs, warnings = v.PVC(op, o, prev)
		}
	default:
		return nil, nil, fmt.Errorf("no admission rules for %T", obj)
	}
	if !ok {
		return nil, nil, fmt.Errorf("old object is a %T, want the type of the new object, %T", old, obj)
	}
	return errs, warnings, nil
}

// oldAs converts old to T; a nil interface or nil pointer gives T's zero.
func oldAs[T any](old any) (T, bool) {
	var zero T
	if old == nil {
		return zero, true
	}
	t, ok := old.(T)
	return t, ok
}
