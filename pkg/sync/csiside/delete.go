package csiside

import (
	"context"
	"errors"
	"fmt"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/snapkeeper/snapkeeper/pkg/csi"
	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/sync/workloop"
	"github.com/snapkeeper/snapkeeper/pkg/writer"
)

// syncDeleting handles a content that is being deleted and still holds our
// finalizer. Nothing happens until the deletion is authorised (mayDelete):
// a content deleted by hand while its VolumeSnapshot lives, or copied from
// another cluster, keeps its backend snapshot and its finalizer, as with the
// community sidecar. Retain: the finalizer goes, the backend snapshot stays.
// Delete: a create that may be in flight is finished (to learn its handle),
// the backend snapshot is deleted, and only then the finalizer goes. The
// backend never keeps a snapshot whose content is gone.
func (c *Controller) syncDeleting(ctx context.Context, content *snapv1.VolumeSnapshotContent) (workloop.Result, error) {
	logger := klog.FromContext(ctx)
	c.polls.forget(content.Name)
	c.retries.forget(content.Name)
	if !snapshot.HasFinalizer(content, snapshot.FinalizerContentBound) {
		return workloop.Result{}, nil
	}
	ok, why := mayDelete(content)
	if !ok {
		// The binder's being-deleted mark arrives as an event.
		logger.V(2).Info("Content deleted without the binder's being-deleted mark: keeping the backend snapshot and the finalizer until its VolumeSnapshot is deleted",
			"volumeSnapshot", content.Spec.VolumeSnapshotRef.Namespace+"/"+content.Spec.VolumeSnapshotRef.Name)
		return workloop.Result{}, nil
	}
	if isGroupMember(content) {
		// DeleteVolumeGroupSnapshot deletes a member's backend snapshot;
		// DeleteSnapshot never does.
		logger.V(2).Info("Releasing a member of a group; its backend snapshot goes with the group", "handle", knownHandle(content))
		return workloop.Result{}, c.release(ctx, content, false)
	}
	if content.Spec.DeletionPolicy != snapv1.VolumeSnapshotContentDelete {
		logger.V(2).Info("Releasing a Retain content; the backend snapshot stays", "handle", knownHandle(content), "because", why)
		return workloop.Result{}, c.release(ctx, content, false)
	}
	var err error
	logger.V(4).Info("Backend snapshot may be deleted", "because", why)
	handle := knownHandle(content)
	if handle == "" && isDynamic(content) && isMarkedCreating(content) {
		// CreateSnapshot cuts a new snapshot when the one in flight was
		// deleted meanwhile, so it is called only for the API server's
		// current copy: a cached one can predate our own writes when
		// someone else's write (the binder's deletion, during the call)
		// reset the stale-copy record.
		if current, err := c.isCurrent(ctx, content); err != nil || !current {
			return workloop.Result{RequeueAfter: staleRecheck}, err
		}
		if handle, content, err = c.finishInFlight(ctx, content); err != nil {
			return workloop.Result{}, err
		}
	}
	if handle != "" {
		if err := c.deleteBackend(ctx, content, handle); err != nil {
			return workloop.Result{}, err
		}
	}
	return workloop.Result{}, c.release(ctx, content, true)
}

// mayDelete decides whether a deleted content may be released (and, for
// Delete, its backend snapshot deleted). content must be the informer's copy,
// never one returned by our own write: a patch that only looked applied is
// how the community sidecar leaked
// (https://github.com/kubernetes-csi/external-snapshotter/issues/1446).
// Allowed when the API server holds the binder's being-deleted mark, or when
// a pre-provisioned content was never bound to a VolumeSnapshot (no UID).
// Never otherwise:
// a content whose VolumeSnapshot is gone may have been copied from another
// cluster, whose backend snapshot it names (docs/contract.md).
func mayDelete(content *snapv1.VolumeSnapshotContent) (bool, string) {
	if snapshot.HasAnnotation(content, snapshot.AnnBeingDeleted, snapshot.ValueYes) {
		return true, "the binder marked it being-deleted"
	}
	if content.Spec.VolumeSnapshotRef.UID != "" {
		return false, ""
	}
	switch {
	case !isDynamic(content):
		return true, "it is a pre-provisioned content never bound to a VolumeSnapshot"
	case statusHandle(content) == "":
		// The CSI name derives from the UID: nothing was ever cut.
		return true, "it is a dynamic content without a snapshot UID or handle"
	}
	return false, ""
}

// isCurrent reports whether the cached content is the API server's current
// version. When it is not (or the content is gone), the newer version's
// event brings the content back.
func (c *Controller) isCurrent(ctx context.Context, content *snapv1.VolumeSnapshotContent) (bool, error) {
	live, err := c.cfg.Snap.SnapshotV1().VolumeSnapshotContents().Get(ctx, content.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("reading content %s: %w", content.Name, err)
	case live.ResourceVersion != content.ResourceVersion:
		klog.FromContext(ctx).V(4).Info("Cached copy is outdated; waiting for the current one",
			"resourceVersion", content.ResourceVersion, "current", live.ResourceVersion)
		return false, nil
	}
	return true, nil
}

// finishInFlight calls the idempotent CreateSnapshot of a deleted content
// whose create may be in flight, to learn the handle of what was (or is
// being) cut, and stores it. A final error means nothing was cut and the
// handle is "", except AlreadyExists: a snapshot of that name exists, and
// walking away would leak it.
func (c *Controller) finishInFlight(ctx context.Context, content *snapv1.VolumeSnapshotContent) (string, *snapv1.VolumeSnapshotContent, error) {
	logger := klog.FromContext(ctx)
	req, err := c.createRequest(ctx, content)
	if errors.Is(err, errNoUID) {
		// Without the UID there is no name, so nobody has called.
		return "", content, nil
	}
	if err != nil {
		return "", content, c.deleteFailed(ctx, content,
			"Failed to finish the CreateSnapshot that may be in flight: "+err.Error(), err)
	}
	logger.V(2).Info("Finishing a CreateSnapshot that may be in flight before deleting", "name", req.Name)
	snap, err := c.callCreate(ctx, req)
	switch {
	case err == nil:
		content, err = c.storeCreated(ctx, content, snap)
		return snap.ID, content, err
	case csi.RejectsRequest(err):
		// The driver refuses the request itself, so the attempt that set
		// the mark cut nothing either. Any other final error (Internal,
		// say) proves only that this call cut nothing: that attempt may
		// have, so the deletion waits and asks again.
		logger.V(2).Info("CreateSnapshot rejected finally: nothing was cut", "err", snapshot.TrimMessage(err.Error()))
		return "", content, nil
	default:
		return "", content, c.deleteFailed(ctx, content,
			"Failed to finish the CreateSnapshot that may be in flight: "+csi.DriverMessage(err), err)
	}
}

// deleteBackend calls DeleteSnapshot with the deletion secret; the driver
// answers an unknown id with success.
func (c *Controller) deleteBackend(ctx context.Context, content *snapv1.VolumeSnapshotContent, handle string) error {
	secrets, err := c.deletionSecrets(ctx, content)
	if err != nil {
		return c.deleteFailed(ctx, content, "Failed to delete snapshot: "+err.Error(), err)
	}
	klog.FromContext(ctx).V(2).Info("Calling DeleteSnapshot", "handle", handle)
	if err := c.callDelete(ctx, handle, secrets); err != nil {
		return c.deleteFailed(ctx, content, "Failed to delete snapshot: "+csi.DriverMessage(err), err)
	}
	klog.FromContext(ctx).V(2).Info("Deleted the backend snapshot", "handle", handle)
	return nil
}

// deleteFailed shows a failed deletion step in status.error (with a
// SnapshotDeleteError event when the message is new) and returns the cause
// for the loop to retry with backoff.
func (c *Controller) deleteFailed(ctx context.Context, content *snapv1.VolumeSnapshotContent, msg string, cause error) error {
	if _, err := c.setError(ctx, content, ReasonDeleteError, msg); err != nil {
		return err
	}
	return fmt.Errorf("deleting the backend snapshot of content %s: %w", content.Name, cause)
}

// release removes our finalizer. After a deletion (deleted), the
// being-created mark goes with it, and when other finalizers keep the
// object alive the handle of the deleted snapshot is cleared first, so that
// nothing reads a handle that no longer exists from the lingering object.
func (c *Controller) release(ctx context.Context, content *snapv1.VolumeSnapshotContent, deleted bool) error {
	if deleted && len(content.Finalizers) > 1 && statusHandle(content) != "" {
		var err error
		content, err = c.patchStatus(ctx, content, map[string]any{"snapshotHandle": nil})
		if err != nil {
			return ignoreNotFound(err)
		}
	}
	p := &writer.Patch{}
	p.Meta.RemoveFinalizers(content, snapshot.FinalizerContentBound)
	if deleted {
		p.Meta.RemoveAnnotation(content, snapshot.AnnBeingCreated)
	}
	_, err := c.patchMeta(ctx, content, p)
	return ignoreNotFound(err)
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
