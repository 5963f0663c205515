package binder

import (
	"fmt"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/sync/workloop"
)

// wireGroups requests the group informers and makes the group loop.
func (c *Controller) wireGroups() ([]informerHandler, error) {
	gv1 := c.cfg.SnapInformers.Groupsnapshot().V1()
	c.groups = gv1.VolumeGroupSnapshots().Lister()
	c.groupContents = gv1.VolumeGroupSnapshotContents().Lister()
	c.groupClasses = gv1.VolumeGroupSnapshotClasses().Lister()
	contentInf := gv1.VolumeGroupSnapshotContents().Informer()
	if err := contentInf.AddIndexers(groupContentIndexers); err != nil {
		return nil, fmt.Errorf("group content indexers: %w", err)
	}
	c.groupContentIndex = contentInf.GetIndexer()
	c.groupLoop = workloop.NewLoop("snapshot-controller-group", c.cfg.Backoff, c.syncGroup)
	return []informerHandler{
		{gv1.VolumeGroupSnapshots().Informer(), c.onGroup, c.onGroupGone},
		{contentInf, c.onGroupContent, nil},
		{gv1.VolumeGroupSnapshotClasses().Informer(), c.onGroupClass, nil},
	}, nil
}

func (c *Controller) onGroup(obj any) {
	g, ok := obj.(*groupv1.VolumeGroupSnapshot)
	if !ok {
		return
	}
	key := objKey(g.Namespace, g.Name)
	c.groupLoop.Add(key)
	// Members wait for their group to go before they are released.
	c.enqueueIndexed(c.snapIndex, indexByGroup, key)
}

func (c *Controller) onGroupContent(obj any) {
	content, ok := obj.(*groupv1.VolumeGroupSnapshotContent)
	if !ok {
		return
	}
	if ref := content.Spec.VolumeGroupSnapshotRef; ref.Name != "" {
		c.groupLoop.Add(objKey(ref.Namespace, ref.Name))
	}
}

func (c *Controller) onGroupClass(obj any) {
	if _, ok := obj.(*groupv1.VolumeGroupSnapshotClass); ok {
		c.enqueueWaitingGroups("")
	}
}

// enqueueWaitingGroups queues the unbound groups of a namespace ("" for
// all): a claim or class change may let them go on.
func (c *Controller) enqueueWaitingGroups(namespace string) {
	if c.groupLoop == nil {
		return
	}
	all, err := c.groups.VolumeGroupSnapshots(namespace).List(labels.Everything())
	if err != nil {
		return
	}
	for _, g := range all {
		if g.Status == nil || g.Status.BoundVolumeGroupSnapshotContentName == nil {
			c.groupLoop.Add(objKey(g.Namespace, g.Name))
		}
	}
}

// enqueueGroupOfMember queues the group that owns the snapshot with key
// namespace/name, if any: a group being deleted waits for claims that
// restore from its members.
func (c *Controller) enqueueGroupOfMember(key string) {
	if c.groupLoop == nil {
		return
	}
	obj, ok, err := c.snapIndex.GetByKey(key)
	if err != nil || !ok {
		return
	}
	if vs, isVS := obj.(*snapv1.VolumeSnapshot); isVS {
		if g := snapshot.GroupOwner(vs); g != "" {
			c.groupLoop.Add(objKey(vs.Namespace, g))
		}
	}
}
