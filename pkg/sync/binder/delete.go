package binder

import (
	"context"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/sync/workloop"
	"github.com/snapkeeper/snapkeeper/pkg/writer"
)

// deleting tears a snapshot down. While a claim still restores from it,
// nothing is touched: every finalizer stays and the content is neither
// marked nor deleted (SnapshotDeletePending), for Delete and Retain alike.
// Then its content gets the being-deleted mark whatever its policy; a Delete
// content is deleted and the snapshot waits until it is gone; a Retain
// content is left and the snapshot released at once.
func (c *Controller) deleting(ctx context.Context, vs *snapv1.VolumeSnapshot) (workloop.Result, error) {
	if pvc := vs.Spec.Source.PersistentVolumeClaimName; pvc != nil {
		c.pvcLoop.Add(objKey(vs.Namespace, *pvc))
	}
	if !snapshot.HasFinalizer(vs, snapshot.FinalizerSnapshotAsSource) && !snapshot.HasFinalizer(vs, snapshot.FinalizerSnapshotBound) &&
		!snapshot.HasFinalizer(vs, snapshot.FinalizerSnapshotInGroup) {
		return workloop.Result{}, nil
	}
	c.cfg.Metrics.start(vs.UID, OpDeleteSnapshot)
	if restoring := c.restoringClaims(vs); len(restoring) > 0 {
		c.cfg.Recorder.Eventf(vs, corev1.EventTypeWarning, snapshot.ReasonSnapshotDeletePending,
			"Snapshot is being deleted; it and its content stay until claim %s finishes restoring from it", restoring[0])
		return workloop.Result{}, nil // the claim's events bring us back
	}
	if g := c.groupOf(vs, c.contentOf(vs)); c.liveGroup(vs.Namespace, g) != nil {
		c.cfg.Recorder.Eventf(vs, corev1.EventTypeWarning, snapshot.ReasonSnapshotDeletePending,
			"Snapshot %s/%s is a member of group snapshot %s and cannot be deleted on its own; delete VolumeGroupSnapshot %s/%s to delete all its members",
			vs.Namespace, vs.Name, g, vs.Namespace, g)
		return workloop.Result{}, nil // the group's events bring us back
	}
	content, err := c.ownContent(ctx, vs)
	if err != nil {
		return workloop.Result{}, err
	}
	if content != nil && c.cfg.Writer.Stale(content) {
		return workloop.Result{}, nil // our mark is on its way back as an event
	}
	logger := klog.FromContext(ctx).WithValues("snapshot", objKey(vs.Namespace, vs.Name))
	if content != nil {
		if err := c.tearDown(ctx, logger, snapContent{content}); err != nil {
			return workloop.Result{}, err
		}
		if content.Spec.DeletionPolicy == snapv1.VolumeSnapshotContentDelete {
			// The content's delete event brings us back once the CSI side
			// removed the backend snapshot and its finalizer.
			return workloop.Result{}, nil
		}
	}
	p := &writer.Patch{}
	p.Meta.RemoveFinalizers(vs, snapshot.FinalizerSnapshotBound, snapshot.FinalizerSnapshotAsSource, snapshot.FinalizerSnapshotInGroup)
	if _, err := c.cfg.Writer.PatchSnapshot(ctx, vs, p); err != nil {
		if apierrors.IsNotFound(err) {
			return workloop.Result{}, nil
		}
		return workloop.Result{}, err
	}
	// Without a content (a Delete content is gone by now) the driver is
	// the class's, as for the gauges.
	driver, why := "", "no content exists for it"
	if vs.Spec.VolumeSnapshotClassName != nil {
		driver = c.classDriver(*vs.Spec.VolumeSnapshotClassName)
	}
	if content != nil {
		driver, why = content.Spec.Driver, "its content is retained"
	}
	// Said at -v=2: a snapshot released while its content lives would
	// leave the content and its backend snapshot behind for good.
	logger.V(2).Info("Released the deleted VolumeSnapshot", "content", contentNameOf(vs), "why", why)
	c.cfg.Metrics.released(vs.UID, snapshotOps, driver, snapType(vs), vs.CreationTimestamp.Time, vs.DeletionTimestamp.Time)
	return workloop.Result{}, nil
}

// tearDown puts the being-deleted mark on the content of a deleted
// snapshot or group, whatever its policy, and deletes a Delete content: the
// CSI side then removes its backend snapshot (or group) and its finalizer.
func (c *Controller) tearDown(ctx context.Context, logger klog.Logger, content boundContent) error {
	obj := content.object()
	mark := &writer.Patch{}
	mark.Meta.SetAnnotation(obj, content.beingDeleted(), snapshot.ValueYes)
	if err := content.patchMeta(ctx, c.cfg.Writer, mark); err != nil {
		return err
	}
	// The cache may show it undeleted a moment after our delete: the
	// writer remembers the delete until it does.
	if !content.deletePolicy() || obj.GetDeletionTimestamp() != nil || c.lag.DeleteSent(obj.GetUID()) {
		return nil
	}
	if err := content.delete(ctx, c.cfg.Writer); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	logger.V(2).Info("Deleted the content of a deleted snapshot", "content", obj.GetName())
	return nil
}

func snapType(vs *snapv1.VolumeSnapshot) string {
	if vs.Spec.Source.VolumeSnapshotContentName != nil {
		return typePreProvisioned
	}
	return typeDynamic
}

// ownContent returns the content bound to vs, if it exists and is really
// this snapshot's. For a dynamic snapshot not yet seen bound, the API server
// is asked directly: a content created a moment ago must not be orphaned by
// releasing the snapshot before the cache has it.
func (c *Controller) ownContent(ctx context.Context, vs *snapv1.VolumeSnapshot) (*snapv1.VolumeSnapshotContent, error) {
	content := c.contentOf(vs)
	// A dynamic content created a moment ago, or a pre-provisioned one bound
	// a moment ago (the cached copy has no UID yet), is read from the API
	// server: releasing the snapshot on a stale copy would leave its
	// content bound to nothing, never deleted.
	staleBind := content != nil && content.Spec.VolumeSnapshotRef.UID == "" &&
		content.Spec.VolumeSnapshotRef.Name == vs.Name && content.Spec.VolumeSnapshotRef.Namespace == vs.Namespace
	if staleBind || (content == nil && vs.Spec.Source.PersistentVolumeClaimName != nil) {
		name := contentNameOf(vs)
		if content != nil {
			name = content.Name
		}
		live, err := c.cfg.Snap.SnapshotV1().VolumeSnapshotContents().Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil, nil
		case err != nil:
			return nil, err
		}
		content = live
	}
	if content == nil {
		return nil, nil
	}
	ref := content.Spec.VolumeSnapshotRef
	if ref.UID != vs.UID || ref.Name != vs.Name || ref.Namespace != vs.Namespace {
		return nil, nil // not ours: never touch it
	}
	return content, nil
}

// restoringClaims lists the Pending claims that restore from vs.
func (c *Controller) restoringClaims(vs *snapv1.VolumeSnapshot) []string {
	objs, err := c.pvcIndex.ByIndex(indexRestoring, objKey(vs.Namespace, vs.Name))
	if err != nil {
		return nil
	}
	var out []string
	for _, o := range objs {
		pvc, ok := o.(*corev1.PersistentVolumeClaim)
		if ok && pvc.Status.Phase == corev1.ClaimPending && pvc.DeletionTimestamp == nil {
			out = append(out, objKey(pvc.Namespace, pvc.Name))
		}
	}
	return out
}
