package csiside

import (
	"context"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	"k8s.io/klog/v2"

	"github.com/snapkeeper/snapkeeper/pkg/csi"
	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/sync/workloop"
	"github.com/snapkeeper/snapkeeper/pkg/writer"
)

// syncCreating cuts the backend snapshot of a dynamic content that has no
// handle yet. The being-created mark is on the API server before the call
// and leaves it only once the handle is stored or the driver said, finally,
// that nothing was cut: a call that timed out may still be cutting, and the
// mark is what makes a later deletion finish it first
// (https://github.com/kubernetes-csi/external-snapshotter/issues/134).
func (c *Controller) syncCreating(ctx context.Context, content *snapv1.VolumeSnapshotContent) (workloop.Result, error) {
	logger := klog.FromContext(ctx)
	if content.Spec.VolumeSnapshotRef.UID == "" {
		// The CSI name derives from the UID; the binder's update brings
		// the content back.
		logger.V(4).Info("Waiting for the VolumeSnapshot UID that names the backend snapshot")
		return workloop.Result{}, nil
	}
	if left, ok := c.retries.wait(content.Name); ok {
		return workloop.Result{RequeueAfter: left}, nil
	}
	req, err := c.createRequest(ctx, content)
	if err != nil {
		// Nothing was called now, but an earlier call may be in flight:
		// the mark stays as it is.
		return c.failed(ctx, content, ReasonCreationFailed, "Failed to prepare the CreateSnapshot call: "+err.Error())
	}
	// A mark already there is an earlier attempt whose outcome is not
	// known (a lost reply, a timeout, a crash during the call).
	earlier := snapshot.HasAnnotation(content, snapshot.AnnBeingCreated, snapshot.ValueYes)
	if content, err = c.markCreating(ctx, content); err != nil {
		return workloop.Result{}, err
	}
	logger.V(2).Info("Calling CreateSnapshot", "name", req.Name, "volumeHandle", req.SourceVolumeID)
	snap, err := c.callCreate(ctx, req)
	if err != nil {
		return c.createFailed(ctx, content, err, earlier)
	}
	if _, err := c.storeCreated(ctx, content, snap); err != nil {
		return workloop.Result{}, err
	}
	c.retries.forget(content.Name)
	if !snap.ReadyToUse {
		logger.V(2).Info("Snapshot cut, not ready yet", "handle", snap.ID)
		return workloop.Result{RequeueAfter: c.polls.next(content.Name)}, nil
	}
	logger.V(2).Info("Snapshot cut and ready", "handle", snap.ID)
	c.polls.forget(content.Name)
	return workloop.Result{}, nil
}

// markCreating puts the being-created mark, and for a Delete content the
// bound finalizer, on the API server in one write (nothing when both are
// there already).
// Without the finalizer a content deleted during the call could vanish
// before its snapshot is deleted.
func (c *Controller) markCreating(ctx context.Context, content *snapv1.VolumeSnapshotContent) (*snapv1.VolumeSnapshotContent, error) {
	p := &writer.Patch{}
	p.Meta.SetAnnotation(content, snapshot.AnnBeingCreated, snapshot.ValueYes)
	if content.Spec.DeletionPolicy == snapv1.VolumeSnapshotContentDelete {
		p.Meta.AddFinalizers(content, snapshot.FinalizerContentBound)
	}
	return c.patchMeta(ctx, content, p)
}

// storeCreated writes what the driver said about the snapshot it cut in one
// status patch, THEN removes the being-created mark: never before the
// handle is stored, or a deletion in between could forget the snapshot.
func (c *Controller) storeCreated(ctx context.Context, content *snapv1.VolumeSnapshotContent, snap *csi.Snapshot) (*snapv1.VolumeSnapshotContent, error) {
	content, err := c.patchStatus(ctx, content, statusFrom(content, snap, c.now()))
	if err != nil {
		return content, err
	}
	p := &writer.Patch{}
	p.Meta.RemoveAnnotation(content, snapshot.AnnBeingCreated)
	return c.patchMeta(ctx, content, p)
}

// createFailed shows a failed CreateSnapshot in status.error. An error that
// may mean "still cutting" keeps the mark; a final one clears it, since
// this call cut nothing, unless an earlier attempt of unknown outcome
// (earlier) may have cut: then only a driver that rejects the request
// itself proves nothing was cut (csi.RejectsRequest). Either way the create
// is retried with backoff.
func (c *Controller) createFailed(ctx context.Context, content *snapv1.VolumeSnapshotContent, callErr error, earlier bool) (workloop.Result, error) {
	inProgress := csi.MayBeInProgress(callErr) || (earlier && !csi.RejectsRequest(callErr))
	klog.FromContext(ctx).V(2).Info("CreateSnapshot failed", "err", snapshot.TrimMessage(callErr.Error()), "mayBeInProgress", inProgress, "earlierAttempt", earlier)
	content, err := c.setError(ctx, content, ReasonCreationFailed, "Failed to create snapshot: "+csi.DriverMessage(callErr))
	if err != nil {
		return workloop.Result{}, err
	}
	if !inProgress {
		p := &writer.Patch{}
		p.Meta.RemoveAnnotation(content, snapshot.AnnBeingCreated)
		if _, err := c.patchMeta(ctx, content, p); err != nil {
			return workloop.Result{}, err
		}
	}
	return workloop.Result{RequeueAfter: c.retries.next(content.Name)}, nil
}

// failed shows msg in status.error and retries the state with backoff. The
// failure is the user's to see (a CSI error, a missing class or secret), so
// it is reported there rather than returned to the loop.
func (c *Controller) failed(ctx context.Context, content *snapv1.VolumeSnapshotContent, reason, msg string) (workloop.Result, error) {
	if _, err := c.setError(ctx, content, reason, msg); err != nil {
		return workloop.Result{}, err
	}
	return workloop.Result{RequeueAfter: c.retries.next(content.Name)}, nil
}
