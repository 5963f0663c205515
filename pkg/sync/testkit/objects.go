package testkit

import (
	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
)

// Snapshot is a VolumeSnapshot in Namespace with UID "uid-<name>" and
// resourceVersion 1, of the claim "pvc1" (as BoundClaim("pvc1") makes it),
// without class, finalizers or status.
func Snapshot(name string, opts ...SnapshotOption) *snapv1.VolumeSnapshot {
	vs := &snapv1.VolumeSnapshot{
		ObjectMeta: objectMeta(name, Namespace),
		Spec:       snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{PersistentVolumeClaimName: ptr.To("pvc1")}},
	}
	for _, o := range opts {
		o.applySnapshot(vs)
	}
	return vs
}

// FromContent makes the snapshot (or group) one of a pre-provisioned
// content, instead of its claim (or selector).
func FromContent(content string) SubjectFunc {
	return SubjectFunc{
		Snapshot: func(vs *snapv1.VolumeSnapshot) {
			vs.Spec.Source = snapv1.VolumeSnapshotSource{VolumeSnapshotContentName: &content}
		},
		Group: func(g *groupv1.VolumeGroupSnapshot) {
			g.Spec.Source = groupv1.VolumeGroupSnapshotSource{VolumeGroupSnapshotContentName: &content}
		},
	}
}

// BoundTo gives the snapshot (or group) a status that names its content,
// and nothing else.
func BoundTo(content string) SubjectFunc {
	return SubjectFunc{
		Snapshot: func(vs *snapv1.VolumeSnapshot) {
			vs.Status = &snapv1.VolumeSnapshotStatus{BoundVolumeSnapshotContentName: &content}
		},
		Group: func(g *groupv1.VolumeGroupSnapshot) {
			g.Status = &groupv1.VolumeGroupSnapshotStatus{BoundVolumeGroupSnapshotContentName: &content}
		},
	}
}

// Content is a dynamic VolumeSnapshotContent of DriverName with UID
// "uid-<name>" and resourceVersion 1: policy Delete, source volume
// VolumeHandle, the binder's bound finalizer, no class, no status, and a
// reference to a VolumeSnapshot that RefTo fills in.
func Content(name string, opts ...ContentOption) *snapv1.VolumeSnapshotContent {
	md := objectMeta(name, "")
	md.Finalizers = []string{snapshot.FinalizerContentBound}
	c := &snapv1.VolumeSnapshotContent{
		ObjectMeta: md,
		Spec: snapv1.VolumeSnapshotContentSpec{
			VolumeSnapshotRef: corev1.ObjectReference{Kind: snapshot.KindSnapshot, APIVersion: snapv1.SchemeGroupVersion.String()},
			DeletionPolicy:    snapv1.VolumeSnapshotContentDelete,
			Driver:            DriverName,
			Source:            snapv1.VolumeSnapshotContentSource{VolumeHandle: ptr.To(VolumeHandle)},
		},
	}
	for _, o := range opts {
		o.applyContent(c)
	}
	return c
}

// RefTo points the content at a VolumeSnapshot (a group content at a
// VolumeGroupSnapshot).
func RefTo(namespace, name string, uid types.UID) Ref {
	return func(ref *corev1.ObjectReference) { ref.Namespace, ref.Name, ref.UID = namespace, name, uid }
}

// RefUID changes only the UID the content's reference names ("" for a
// content no snapshot claimed yet).
func RefUID(uid types.UID) Ref {
	return func(ref *corev1.ObjectReference) { ref.UID = uid }
}

// PreProvisioned makes the source of the content the existing snapshot
// handle; of a group content the existing group handle and its members'
// snapshot handles (a single content has no members).
func PreProvisioned(handle string, members ...string) AnyContentFunc {
	return AnyContentFunc{
		Content: func(c *snapv1.VolumeSnapshotContent) {
			c.Spec.Source = snapv1.VolumeSnapshotContentSource{SnapshotHandle: &handle}
		},
		Group: func(c *groupv1.VolumeGroupSnapshotContent) {
			c.Spec.Source = groupv1.VolumeGroupSnapshotContentSource{GroupSnapshotHandles: &groupv1.GroupSnapshotHandles{
				VolumeGroupSnapshotHandle: handle, VolumeSnapshotHandles: members}}
		},
	}
}

// Retain sets the deletion policy Retain.
func Retain() Policy { return Policy(snapv1.VolumeSnapshotContentRetain) }

// Status sets the content's status.
func Status(st snapv1.VolumeSnapshotContentStatus) ContentFunc {
	return func(c *snapv1.VolumeSnapshotContent) { c.Status = &st }
}

// Ready is Status(Cut(handle, true)), for a group content
// GroupStatus(GroupCut(handle, true)): cut and ready, without members.
func Ready(handle string) AnyContentFunc {
	return AnyContentFunc{Content: Status(Cut(handle, true)), Group: GroupStatus(GroupCut(handle, true))}
}

// Cut is the status of a content whose snapshot handle was cut at Time,
// 1 GiB large.
func Cut(handle string, ready bool) snapv1.VolumeSnapshotContentStatus {
	return snapv1.VolumeSnapshotContentStatus{
		SnapshotHandle: &handle,
		CreationTime:   ptr.To(Time.UnixNano()),
		RestoreSize:    ptr.To(int64(1 << 30)),
		ReadyToUse:     &ready,
	}
}

// SnapshotClass is a VolumeSnapshotClass of DriverName with policy Delete,
// not the default, without parameters.
func SnapshotClass(name string, opts ...ClassOption) *snapv1.VolumeSnapshotClass {
	c := &snapv1.VolumeSnapshotClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Driver: DriverName,
		DeletionPolicy: snapv1.VolumeSnapshotContentDelete}
	for _, o := range opts {
		o.applyClass(c)
	}
	return c
}

// DefaultClass makes the class (or group class) the default of its driver.
func DefaultClass() AnyClassFunc {
	return AnyClassFunc{
		Class: func(c *snapv1.VolumeSnapshotClass) { Annotated(snapshot.AnnDefaultClass, "true")(c) },
		Group: func(c *groupv1.VolumeGroupSnapshotClass) { Annotated(snapshot.AnnGroupDefaultClass, "true")(c) },
	}
}

// BoundClaim is a claim in Namespace bound to its CSI volume "pv-<name>" of
// DriverName and VolumeHandle, 1 GiB, with resourceVersion 1.
func BoundClaim(name string) (*corev1.PersistentVolumeClaim, *corev1.PersistentVolume) {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace, ResourceVersion: "1"},
		Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: "pv-" + name},
		Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound},
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-" + name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				CSI: &corev1.CSIPersistentVolumeSource{Driver: DriverName, VolumeHandle: VolumeHandle},
			},
			ClaimRef: &corev1.ObjectReference{Namespace: Namespace, Name: name},
		},
	}
	return pvc, pv
}

// Secret is a Secret with data.
func Secret(namespace, name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func objectMeta(name, namespace string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: namespace, UID: types.UID("uid-" + name), ResourceVersion: "1"}
}
