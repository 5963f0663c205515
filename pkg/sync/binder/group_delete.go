package binder

import (
	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
)

// groupMembers are the snapshots a group owns (by name, and by UID where
// the owner reference carries one: an earlier group of the same name owns
// its own).
func (c *Controller) groupMembers(g *groupv1.VolumeGroupSnapshot) []*snapv1.VolumeSnapshot {
	objs, err := c.snapIndex.ByIndex(indexByGroup, objKey(g.Namespace, g.Name))
	if err != nil {
		return nil
	}
	out := make([]*snapv1.VolumeSnapshot, 0, len(objs))
	for _, o := range objs {
		if vs, ok := o.(*snapv1.VolumeSnapshot); ok && ownedBy(vs, g) {
			out = append(out, vs)
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
