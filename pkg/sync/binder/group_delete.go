package binder

import (
	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
)

// groupMembers are the snapshots a group owns: by owner reference (by
// name, and by UID where the reference carries one: an earlier group of
// the same name owns its own), and, for a dynamic group, the members named
// after its UID and the volumes its content lists. The names matter when
// the group is deleted with Orphan propagation: the garbage collector
// strips the owner references while the binder deletes the members, and a
// member it stripped first would otherwise stay behind.
func (c *Controller) groupMembers(g *groupv1.VolumeGroupSnapshot) []*snapv1.VolumeSnapshot {
	objs, err := c.snapIndex.ByIndex(indexByGroup, objKey(g.Namespace, g.Name))
	if err != nil {
		return nil
	}
	out := make([]*snapv1.VolumeSnapshot, 0, len(objs))
	seen := map[string]bool{}
	for _, o := range objs {
		if vs, ok := o.(*snapv1.VolumeSnapshot); ok && ownedBy(vs, g) {
			out = append(out, vs)
			seen[vs.Name] = true
		}
	}
	content := c.groupContentOf(g)
	if content == nil || content.Spec.Source.GroupSnapshotHandles != nil || content.Status == nil {
		return out // none, or pre-provisioned: its members are the user's
	}
	for _, info := range content.Status.VolumeSnapshotInfoList {
		name := snapshot.MemberSnapshotName(g.UID, info.VolumeHandle)
		if seen[name] {
			continue
		}
		if vs, err := c.snapshots.VolumeSnapshots(g.Namespace).Get(name); err == nil {
			out = append(out, vs)
			seen[name] = true
		}
	}
	return out
}

func ownedBy(vs *snapv1.VolumeSnapshot, g *groupv1.VolumeGroupSnapshot) bool {
	for _, o := range vs.OwnerReferences {
		if o.Kind == snapshot.KindGroupSnapshot && o.Name == g.Name {
			return o.UID == "" || g.UID == "" || o.UID == g.UID
		}
	}
	return false
}
