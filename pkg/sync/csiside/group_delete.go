package csiside

import (
	"context"
	"fmt"
	"sort"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"github.com/snapkeeper/snapkeeper/pkg/csi"
	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/sync/workloop"
	"github.com/snapkeeper/snapkeeper/pkg/writer"
)

// groupDeleting handles a deleted group content that still holds our
// finalizer, as syncDeleting does a content: nothing without the binder's
// being-deleted mark (or a pre-provisioned content never bound); never
// while a create may be in flight; Retain releases; Delete calls
// DeleteVolumeGroupSnapshot with every member's snapshot id, then releases.
func (c *Controller) groupDeleting(ctx context.Context, content *groupv1.VolumeGroupSnapshotContent) (workloop.Result, error) {
	logger := klog.FromContext(ctx)
	key := groupKey(content.Name)
	c.polls.forget(key)
	if !snapshot.HasFinalizer(content, snapshot.FinalizerGroupContentBound) {
		return workloop.Result{}, nil
	}
	pre := content.Spec.Source.GroupSnapshotHandles != nil
	switch {
	case pre && content.Spec.VolumeGroupSnapshotRef.UID == "":
	case snapshot.HasAnnotation(content, snapshot.AnnGroupBeingCreated, snapshot.ValueYes):
		// Finish the create first: its answer names the group to delete.
		logger.V(2).Info("Group content deleted while its create may be in flight; finishing the create first")
		return c.groupUnready(ctx, content)
	case !snapshot.HasAnnotation(content, snapshot.AnnGroupBeingDeleted, snapshot.ValueYes):
		logger.V(2).Info("Group content deleted without the binder's being-deleted mark: keeping the backend group and the finalizer")
		return workloop.Result{}, nil
	}
	handle := groupHandle(content)
	if content.Spec.DeletionPolicy == snapv1.VolumeSnapshotContentDelete && handle != "" {
		if left, ok := c.retries.wait(key); ok {
			return workloop.Result{RequeueAfter: left}, nil
		}
		ids := c.memberIDs(content)
		secrets, err := c.secret(ctx, content.Annotations[snapshot.AnnGroupDeletionSecretNamespace], content.Annotations[snapshot.AnnGroupDeletionSecretName])
		if err == nil {
			logger.V(2).Info("Calling DeleteVolumeGroupSnapshot", "groupSnapshotID", handle, "snapshotIDs", ids)
			err = c.groups.driver.DeleteGroupSnapshot(ctx, handle, ids, secrets)
		}
		if err != nil {
			res, ferr := c.groupFailed(ctx, content, snapshot.ReasonGroupDeleteError, "Failed to delete group snapshot: "+csi.DriverMessage(err))
			if ferr != nil {
				return res, ferr
			}
			return workloop.Result{}, fmt.Errorf("deleting backend group %s of %s: %w", handle, content.Name, err)
		}
		c.retries.forget(key)
		if len(content.Finalizers) > 1 && content.Status != nil && content.Status.VolumeGroupSnapshotHandle != nil {
			// Other finalizers keep the object: nothing may read the id
			// of a deleted group from it.
			if content, err = c.cfg.Writer.PatchGroupContentStatus(ctx, content, map[string]any{"volumeGroupSnapshotHandle": nil, "readyToUse": nil}); err != nil {
				return workloop.Result{}, ignoreNotFound(err)
			}
		}
	}
	p := &writer.Patch{}
	p.Meta.RemoveFinalizers(content, snapshot.FinalizerGroupContentBound)
	_, err := c.cfg.Writer.PatchGroupContent(ctx, content, p)
	return workloop.Result{}, ignoreNotFound(err)
}

// memberIDs are the snapshot ids of a group's members: from the status
// member list, from a pre-provisioned source, or, for a group stored
// before the member list existed (v1beta1 objects upgraded in place), from
// the member contents that carry the group's id.
func (c *Controller) memberIDs(content *groupv1.VolumeGroupSnapshotContent) []string {
	var ids []string
	if st := content.Status; st != nil {
		for _, info := range st.VolumeSnapshotInfoList {
			if info.SnapshotHandle != "" {
				ids = append(ids, info.SnapshotHandle)
			}
		}
	}
	if len(ids) > 0 {
		return ids
	}
	if h := content.Spec.Source.GroupSnapshotHandles; h != nil && len(h.VolumeSnapshotHandles) > 0 {
		return append([]string(nil), h.VolumeSnapshotHandles...)
	}
	handle := groupHandle(content)
	all, err := c.contents.List(labels.Everything())
	if err != nil || handle == "" {
		return nil
	}
	for _, m := range all {
		// Group handles are unique per driver only: another driver's
		// group (or a leftover one) may carry the same handle.
		if m.Spec.Driver == content.Spec.Driver && m.Annotations[snapshot.AnnVolumeGroupSnapshotHandle] == handle &&
			m.Status != nil && m.Status.SnapshotHandle != nil {
			ids = append(ids, *m.Status.SnapshotHandle)
		}
	}
	sort.Strings(ids)
	return ids
}
