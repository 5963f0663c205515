package binder

import (
	"context"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/sync/workloop"
	"github.com/snapkeeper/snapkeeper/pkg/writer"
)

// syncContent protects a Delete content that holds a backend snapshot, bound
// or not. Backup tools (Velero) create such a content and delete it seconds
// later to remove the backend snapshot; without the finalizer the object
// could vanish before the CSI side calls DeleteSnapshot.
func (c *Controller) syncContent(ctx context.Context, name string) (workloop.Result, error) {
	content, err := c.contents.Get(name)
	if apierrors.IsNotFound(err) {
		return workloop.Result{}, nil
	}
	if err != nil {
		return workloop.Result{}, err
	}
	if c.vanished.has(content.Spec.VolumeSnapshotRef.UID) {
		return c.orphaned(ctx, content)
	}
	if !NeedsContentFinalizer(content) {
		return workloop.Result{}, nil
	}
	p := &writer.Patch{}
	p.Meta.AddFinalizers(content, snapshot.FinalizerContentBound)
	_, err = c.cfg.Writer.PatchContent(ctx, content, p)
	return workloop.Result{}, err
}

// NeedsContentFinalizer reports whether a content that lacks the bound
// finalizer must get it now: Delete policy, a backend handle, not deleted.
func NeedsContentFinalizer(content *snapv1.VolumeSnapshotContent) bool {
	if content.DeletionTimestamp != nil || snapshot.HasFinalizer(content, snapshot.FinalizerContentBound) {
		return false
	}
	if content.Spec.DeletionPolicy != snapv1.VolumeSnapshotContentDelete {
		return false
	}
	hasHandle := content.Spec.Source.SnapshotHandle != nil ||
		(content.Status != nil && content.Status.SnapshotHandle != nil)
	return hasHandle
}
