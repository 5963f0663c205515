package snapshot

import (
	"strings"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// KindGroupSnapshot is the kind that owns the member snapshots of a group.
const KindGroupSnapshot = "VolumeGroupSnapshot"

// IsDefaultGroupClass reports whether a group class's annotations mark it as
// the default of its driver.
func IsDefaultGroupClass(annotations map[string]string) bool {
	return annotations[AnnGroupDefaultClass] == "true"
}

// MemberSnapshotName and MemberContentName are the names of the member
// snapshot and content of a dynamic group for one volume.
func MemberSnapshotName(groupUID types.UID, volumeHandle string) string {
	return "snapshot-" + GroupMemberSuffix(groupUID, volumeHandle)
}

// MemberContentName: see MemberSnapshotName.
func MemberContentName(groupUID types.UID, volumeHandle string) string {
	return "snapcontent-" + GroupMemberSuffix(groupUID, volumeHandle)
}

// MemberContentNameOf is the content name of a member snapshot named by
// MemberSnapshotName, or "" for another name.
func MemberContentNameOf(snapshotName string) string {
	suffix, ok := strings.CutPrefix(snapshotName, "snapshot-")
	if !ok || len(suffix) != 64 {
		return ""
	}
	return "snapcontent-" + suffix
}

// GroupOwner is the name of the VolumeGroupSnapshot that owns obj (a member
// snapshot), or "".
func GroupOwner(obj metav1.Object) string {
	apiVersion := groupv1.SchemeGroupVersion.String()
	for _, o := range obj.GetOwnerReferences() {
		if o.Kind == KindGroupSnapshot && o.APIVersion == apiVersion {
			return o.Name
		}
	}
	return ""
}

// GroupOwnerReference is the owner reference of a group's members.
func GroupOwnerReference(g *groupv1.VolumeGroupSnapshot) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: groupv1.SchemeGroupVersion.String(),
		Kind:       KindGroupSnapshot,
		Name:       g.Name,
		UID:        g.UID,
	}
}
