package validationtest

import (
	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/snapkeeper/snapkeeper/pkg/apis/snapkeeper/v1alpha1"
	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
)

// NewGroupClass returns a Delete-policy VolumeGroupSnapshotClass of
// DefaultDriver.
func NewGroupClass(name string, opts ...Opt) *groupv1.VolumeGroupSnapshotClass {
	return apply(&groupv1.VolumeGroupSnapshotClass{ObjectMeta: metav1.ObjectMeta{Name: name}}, withDefaults(opts))
}

// AsGroupDefault marks a group class as the default of its driver.
func AsGroupDefault() Opt { return WithAnnotation(snapshot.AnnGroupDefaultClass, "true") }

// NewGroupSnapshot returns a group snapshot with no source: add Selecting,
// WithSelector or FromGroupContent.
func NewGroupSnapshot(namespace, name string, opts ...Opt) *groupv1.VolumeGroupSnapshot {
	return apply(&groupv1.VolumeGroupSnapshot{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID(name + "-uid")},
	}, opts)
}

// Selecting makes a group or a schedule select the claims labelled
// key=value.
func Selecting(key, value string) Opt {
	return WithSelector(&metav1.LabelSelector{MatchLabels: map[string]string{key: value}})
}

// WithSelector sets the selector of a group or the claimSelector of a
// schedule.
func WithSelector(s *metav1.LabelSelector) Opt {
	return func(o metav1.Object) {
		switch o := o.(type) {
		case *groupv1.VolumeGroupSnapshot:
			o.Spec.Source.Selector = s
		case *v1alpha1.SnapshotSchedule:
			o.Spec.ClaimSelector = *s
		default:
			wrongKind("WithSelector", o)
		}
	}
}

// FromGroupContent makes a group bind a pre-provisioned group content.
func FromGroupContent(name string) Opt {
	return func(o metav1.Object) {
		must[*groupv1.VolumeGroupSnapshot]("FromGroupContent", o).Spec.Source.VolumeGroupSnapshotContentName = &name
	}
}

// NewGroupContent returns a Delete-policy group content of DefaultDriver
// with no source and no group reference.
func NewGroupContent(name string, opts ...Opt) *groupv1.VolumeGroupSnapshotContent {
	return apply(&groupv1.VolumeGroupSnapshotContent{ObjectMeta: metav1.ObjectMeta{Name: name}}, withDefaults(opts))
}

// WithVolumeHandles makes a dynamic group content of volumes; no handles
// gives an empty list, as `volumeHandles: []` decodes.
func WithVolumeHandles(h ...string) Opt {
	if h == nil {
		h = []string{}
	}
	return func(o metav1.Object) {
		must[*groupv1.VolumeGroupSnapshotContent]("WithVolumeHandles", o).Spec.Source.VolumeHandles = h
	}
}

// WithGroupHandles makes a pre-provisioned group content.
func WithGroupHandles(group string, snapshots ...string) Opt {
	return func(o metav1.Object) {
		must[*groupv1.VolumeGroupSnapshotContent]("WithGroupHandles", o).Spec.Source.GroupSnapshotHandles = &groupv1.GroupSnapshotHandles{
			VolumeGroupSnapshotHandle: group, VolumeSnapshotHandles: snapshots,
		}
	}
}

// GroupBoundTo points a group content at a group snapshot; uid may be empty.
func GroupBoundTo(namespace, name string, uid types.UID) Opt {
	return func(o metav1.Object) {
		must[*groupv1.VolumeGroupSnapshotContent]("GroupBoundTo", o).Spec.VolumeGroupSnapshotRef = corev1.ObjectReference{
			Kind: "VolumeGroupSnapshot", APIVersion: snapshot.GroupSnapshotName + "/v1",
			Namespace: namespace, Name: name, UID: uid,
		}
	}
}

// BoundClaim binds a claim to volume pv, spec and status, as the PV
// controller does.
func BoundClaim(pv string) Opt {
	return func(o metav1.Object) {
		c := must[*corev1.PersistentVolumeClaim]("BoundClaim", o)
		c.Spec.VolumeName = pv
		c.Status.Phase = corev1.ClaimBound
	}
}
