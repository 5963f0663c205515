package binder

import (
	"context"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/sync/workloop"
	"github.com/snapkeeper/snapkeeper/pkg/writer"
)

// groupDeleting tears a group down, as deleting does a snapshot. While a
// claim restores from a member, nothing is touched. Then the content gets
// the being-deleted mark; a Delete content is deleted (the CSI side calls
// DeleteVolumeGroupSnapshot, which removes every member's backend snapshot)
// and the group waits until it is gone; the members are deleted; a Retain
// content is left and the group released at once. Members are released once
// the group is gone (deleting).
func (c *Controller) groupDeleting(ctx context.Context, g *groupv1.VolumeGroupSnapshot) (workloop.Result, error) {
	if !snapshot.HasFinalizer(g, snapshot.FinalizerGroupSnapshotBound) {
		return workloop.Result{}, nil
	}
	c.cfg.Metrics.start(g.UID, OpDeleteGroupSnapshot)
	content, wait, err := c.groupTearDown(ctx, g)
	if err != nil || wait {
		return workloop.Result{}, err
	}
	p := &writer.Patch{}
	p.Meta.RemoveFinalizers(g, snapshot.FinalizerGroupSnapshotBound)
	if _, err := c.cfg.Writer.PatchGroup(ctx, g, p); err != nil && !apierrors.IsNotFound(err) {
		return workloop.Result{}, err
	}
	driver := ""
	if content != nil {
		driver = content.Spec.Driver
	}
	c.cfg.Metrics.released(g.UID, groupOps, driver, groupType(g), g.CreationTimestamp.Time, g.DeletionTimestamp.Time)
	return workloop.Result{}, nil
}

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

// groupTearDown does to a deleted group's content and members what its
// delete asks: while a claim restores from a member, nothing (wait); else
// the content gets the being-deleted mark, a Delete content is deleted
// (wait: its delete event brings the group back) and the members are
// deleted. It returns the group's content (nil when there is none of its
// own). groupDeleting and a vanished group's clean-up share it.
func (c *Controller) groupTearDown(ctx context.Context, g *groupv1.VolumeGroupSnapshot) (content *groupv1.VolumeGroupSnapshotContent, wait bool, err error) {
	members := c.groupMembers(g)
	for _, vs := range members {
		if restoring := c.restoringClaims(vs); len(restoring) > 0 {
			c.cfg.Recorder.Eventf(g, corev1.EventTypeWarning, snapshot.ReasonSnapshotDeletePending,
				"Group snapshot is being deleted; it and its members stay until claim %s finishes restoring from member %s", restoring[0], vs.Name)
			return nil, true, nil // the claim's events bring us back
		}
	}
	content = c.groupContentOf(g)
	if content != nil && content.Spec.VolumeGroupSnapshotRef.UID != g.UID {
		content = nil // not ours: never touch it
	}
	if content != nil && c.cfg.Writer.Stale(content) {
		return content, true, nil
	}
	deleteContent := content != nil && content.Spec.DeletionPolicy == snapv1.VolumeSnapshotContentDelete
	if content != nil {
		if err := c.tearDown(ctx, klog.FromContext(ctx), groupContent{content}); err != nil {
			return content, false, err
		}
	}
	for _, vs := range members {
		if vs.DeletionTimestamp != nil || c.lag.DeleteSent(vs.UID) {
			continue
		}
		if err := c.cfg.Writer.DeleteSnapshot(ctx, vs); err != nil && !apierrors.IsNotFound(err) {
			return content, false, err
		}
	}
	return content, deleteContent, nil
}
