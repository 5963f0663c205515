package csiside

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"

	"github.com/snapkeeper/snapkeeper/pkg/csi"
	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/sync/workloop"
	"github.com/snapkeeper/snapkeeper/pkg/writer"
)

// deleting handles a content of either kind that is being deleted and
// still holds our finalizer. Nothing happens until the deletion is
// authorised (mayDelete): a content deleted by hand while its snapshot
// lives, or copied from another cluster, keeps its backend snapshot and its
// finalizer, as with the community sidecar. A member of a group: its
// backend snapshot goes with the group's. Retain: the finalizer goes, the
// backend snapshot stays. Delete: a create that may be in flight is
// finished (to learn its handle), the backend snapshot is deleted, and only
// then the finalizer goes. The backend never keeps a snapshot whose content
// is gone.
func (c *Controller) deleting(ctx context.Context, it *item) (workloop.Result, error) {
	logger := klog.FromContext(ctx)
	c.forget(it.key)
	if !snapshot.HasFinalizer(it.obj, it.names.finalizer) {
		return workloop.Result{}, nil
	}
	ok, why := mayDelete(it)
	if !ok {
		// The binder's being-deleted mark arrives as an event.
		logger.V(2).Info("Content deleted without the binder's being-deleted mark: keeping the backend snapshot and the finalizer until its snapshot is deleted")
		return workloop.Result{}, nil
	}
	if it.member {
		// The group's delete call deletes a member's backend snapshot;
		// DeleteSnapshot never does.
		logger.V(2).Info("Releasing a member of a group; its backend snapshot goes with the group", "handle", it.knownHandle)
		return workloop.Result{}, c.release(ctx, it, false)
	}
	if !it.deletes {
		logger.V(2).Info("Releasing a Retain content; the backend snapshot stays", "handle", it.knownHandle, "because", why)
		return workloop.Result{}, c.release(ctx, it, false)
	}
	var err error
	logger.V(4).Info("Backend snapshot may be deleted", "because", why)
	handle := it.knownHandle
	if handle == "" && it.dynamic && markedCreating(it) {
		// The create call cuts a new snapshot when the one in flight was
		// deleted meanwhile, so it is called only for the API server's
		// current copy: a cached one can predate our own writes when
		// someone else's write (the binder's deletion, during the call)
		// reset the stale-copy record.
		if current, err := c.isCurrent(ctx, it); err != nil || !current {
			return workloop.Result{RequeueAfter: staleRecheck}, err
		}
		if handle, it, err = c.finishInFlight(ctx, it); err != nil {
			return workloop.Result{}, err
		}
	}
	if handle != "" {
		if err := c.deleteBackend(ctx, it, handle); err != nil {
			return workloop.Result{}, err
		}
	}
	return workloop.Result{}, c.release(ctx, it, true)
}

// mayDelete decides whether a deleted content may be released (and, for
// Delete, its backend snapshot deleted). The content must be the informer's
// copy, never one returned by our own write: a patch that only looked
// applied is how the community sidecar leaked
// (external-snapshotter issue 1446).
// Allowed when the API server holds the binder's being-deleted mark, or when
// the content was never bound to a snapshot (no UID) and so never cut
// anything of its own. Never otherwise: a content whose snapshot is gone
// may have been copied from another cluster, whose backend snapshot it
// names (docs/contract.md).
func mayDelete(it *item) (bool, string) {
	if snapshot.HasAnnotation(it.obj, it.names.beingDeleted, snapshot.ValueYes) {
		return true, "the binder marked it being-deleted"
	}
	if it.snapshotUID != "" {
		return false, ""
	}
	switch {
	case !it.dynamic:
		return true, "it is a pre-provisioned content never bound to a snapshot"
	case it.statusHandle == "":
		// The CSI name derives from the UID: nothing was ever cut.
		return true, "it is a dynamic content without a snapshot UID or handle"
	}
	return false, ""
}

// isCurrent reports whether the cached content is the API server's current
// version. When it is not (or the content is gone), the newer version's
// event brings the content back.
func (c *Controller) isCurrent(ctx context.Context, it *item) (bool, error) {
	live, err := it.liveVersion(ctx)
	switch {
	case err != nil:
		return false, fmt.Errorf("reading %s: %w", it.key, err)
	case live == "":
		return false, nil
	case live != it.obj.GetResourceVersion():
		klog.FromContext(ctx).V(4).Info("Cached copy is outdated; waiting for the current one",
			"resourceVersion", it.obj.GetResourceVersion(), "current", live)
		return false, nil
	}
	return true, nil
}

// finishInFlight calls the idempotent create of a deleted content whose
// create may be in flight, to learn the handle of what was (or is being)
// cut, and stores it. A final error means nothing was cut and the handle
// is "", except AlreadyExists: a snapshot of that name exists, and walking
// away would leak it.
func (c *Controller) finishInFlight(ctx context.Context, it *item) (string, *item, error) {
	logger := klog.FromContext(ctx)
	if it.snapshotUID == "" {
		// Without the UID there is no name, so nobody has called.
		return "", it, nil
	}
	prefix := "Failed to finish the " + it.names.createCall + " that may be in flight: "
	call, err := it.prepareCut(ctx)
	if err != nil {
		return "", it, c.deleteFailed(ctx, it, prefix+err.Error(), err)
	}
	logger.V(2).Info("Finishing a create that may be in flight before deleting", "name", call.name)
	a, err := call.run(ctx)
	switch {
	case err == nil:
		it, err = c.store(ctx, it, a)
		return a.id, it, err
	case csi.RejectsRequest(err):
		// The driver refuses the request itself, so the attempt that set
		// the mark cut nothing either. Any other final error (Internal,
		// say) proves only that this call cut nothing: that attempt may
		// have, so the deletion waits and asks again.
		logger.V(2).Info("Create rejected finally: nothing was cut", "err", snapshot.TrimMessage(err.Error()))
		return "", it, nil
	default:
		return "", it, c.deleteFailed(ctx, it, prefix+csi.DriverMessage(err), err)
	}
}

// deleteBackend calls the kind's delete with its deletion secret; the
// driver answers an unknown id with success.
func (c *Controller) deleteBackend(ctx context.Context, it *item, handle string) error {
	klog.FromContext(ctx).V(2).Info("Calling "+it.names.deleteCall, "handle", handle)
	if err := it.deleteBackend(ctx, handle); err != nil {
		return c.deleteFailed(ctx, it, "Failed to delete "+it.names.what+": "+csi.DriverMessage(err), err)
	}
	klog.FromContext(ctx).V(2).Info("Deleted the backend "+it.names.what, "handle", handle)
	return nil
}

// deleteFailed shows a failed deletion step in status.error (with a
// Warning event when the message is new) and returns the cause for the
// loop to retry with backoff.
func (c *Controller) deleteFailed(ctx context.Context, it *item, msg string, cause error) error {
	if _, err := c.setError(ctx, it, it.names.reasonDelete, msg); err != nil {
		return err
	}
	return fmt.Errorf("deleting the backend %s of %s: %w", it.names.what, it.key, cause)
}

// release removes our finalizer. After a deletion (deleted), the
// being-created mark goes with it, and when other finalizers keep the
// object alive the handle of the deleted backend is cleared first, so that
// nothing reads a handle that no longer exists from the lingering object.
func (c *Controller) release(ctx context.Context, it *item, deleted bool) error {
	n := it.names
	if deleted && len(it.obj.GetFinalizers()) > 1 && it.statusHandle != "" {
		var err error
		if it, err = c.patchStatus(ctx, it, it.handleCleared()); err != nil {
			return ignoreNotFound(err)
		}
	}
	p := &writer.Patch{}
	p.Meta.RemoveFinalizers(it.obj, n.finalizer)
	if deleted {
		p.Meta.RemoveAnnotation(it.obj, n.beingCreated)
	}
	_, err := c.patchMeta(ctx, it, p)
	return ignoreNotFound(err)
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
