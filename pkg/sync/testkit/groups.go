package testkit

import (
	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
)

// The group kinds' builders mirror the single kinds' (objects.go), with
// the same defaults where the kinds share a field, so that a table case
// written for one kind builds the other by swapping the builder.

// GroupLabel and GroupLabelValue are the label a GroupSnapshot selects by
// default; label claims with them to put them into the group.
const (
	GroupLabel      = "app"
	GroupLabelValue = "db"
)

// GroupSnapshot is a VolumeGroupSnapshot in Namespace with UID
// "uid-<name>" and resourceVersion 1, of the claims labelled
// GroupLabel=GroupLabelValue, without class, finalizers or status.
func GroupSnapshot(name string, opts ...GroupSnapshotOption) *groupv1.VolumeGroupSnapshot {
	g := &groupv1.VolumeGroupSnapshot{ObjectMeta: objectMeta(name, Namespace)}
	Selects(GroupLabel, GroupLabelValue)(g)
	for _, o := range opts {
		o.applyGroupSnapshot(g)
	}
	return g
}

// Selects makes the group one of the claims labelled key=value, instead of
// a pre-provisioned content or the default label.
func Selects(key, value string) GroupSnapshotFunc {
	return func(g *groupv1.VolumeGroupSnapshot) {
		g.Spec.Source = groupv1.VolumeGroupSnapshotSource{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{key: value}}}
	}
}

// GroupContent is a dynamic VolumeGroupSnapshotContent of DriverName with
// UID "uid-<name>" and resourceVersion 1, as Content is: policy Delete,
// source volume VolumeHandle, the binder's bound finalizer, no class, no
// status, and a reference to a VolumeGroupSnapshot that RefTo fills in.
func GroupContent(name string, opts ...GroupContentOption) *groupv1.VolumeGroupSnapshotContent {
	md := objectMeta(name, "")
	md.Finalizers = []string{snapshot.FinalizerGroupContentBound}
	c := &groupv1.VolumeGroupSnapshotContent{
		ObjectMeta: md,
		Spec: groupv1.VolumeGroupSnapshotContentSpec{
			VolumeGroupSnapshotRef: corev1.ObjectReference{Kind: snapshot.KindGroupSnapshot, APIVersion: groupv1.SchemeGroupVersion.String()},
			DeletionPolicy:         snapv1.VolumeSnapshotContentDelete,
			Driver:                 DriverName,
			Source:                 groupv1.VolumeGroupSnapshotContentSource{VolumeHandles: []string{VolumeHandle}},
		},
	}
	for _, o := range opts {
		o.applyGroupContent(c)
	}
	return c
}

// Volumes makes the source of the group content these volume handles.
func Volumes(handles ...string) GroupContentFunc {
	return func(c *groupv1.VolumeGroupSnapshotContent) {
		c.Spec.Source = groupv1.VolumeGroupSnapshotContentSource{VolumeHandles: handles}
	}
}

// GroupStatus sets the group content's status.
func GroupStatus(st groupv1.VolumeGroupSnapshotContentStatus) GroupContentFunc {
	return func(c *groupv1.VolumeGroupSnapshotContent) { c.Status = &st }
}

// GroupCut is the status of a group content whose group handle was cut at
// Time, with its members (none for a group the driver has not listed yet).
func GroupCut(handle string, ready bool, members ...groupv1.VolumeSnapshotInfo) groupv1.VolumeGroupSnapshotContentStatus {
	return groupv1.VolumeGroupSnapshotContentStatus{
		VolumeGroupSnapshotHandle: &handle,
		CreationTime:              ptr.To(metav1.NewTime(Time)),
		ReadyToUse:                &ready,
		VolumeSnapshotInfoList:    members,
	}
}

// Member is the status of a group's member snapshot of a volume, cut at
// Time, 1 GiB large, as the CSI side stores the driver's answer.
func Member(volume, snapshot string, ready bool) groupv1.VolumeSnapshotInfo {
	return groupv1.VolumeSnapshotInfo{
		VolumeHandle:   volume,
		SnapshotHandle: snapshot,
		CreationTime:   ptr.To(Time.UnixNano()),
		ReadyToUse:     &ready,
		RestoreSize:    ptr.To(int64(1 << 30)),
	}
}

// GroupClass is a VolumeGroupSnapshotClass of DriverName with policy
// Delete, not the default, without parameters.
func GroupClass(name string, opts ...GroupClassOption) *groupv1.VolumeGroupSnapshotClass {
	c := &groupv1.VolumeGroupSnapshotClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Driver: DriverName,
		DeletionPolicy: snapv1.VolumeSnapshotContentDelete}
	for _, o := range opts {
		o.applyGroupClass(c)
	}
	return c
}
