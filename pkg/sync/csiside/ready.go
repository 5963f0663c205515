package csiside

import (
	"context"
	"fmt"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	"k8s.io/klog/v2"

	"github.com/snapkeeper/snapkeeper/pkg/csi"
	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/sync/workloop"
)

// syncUnready reads the status of a backend snapshot that is not known to
// be ready: a dynamic one cut earlier, or a pre-provisioned one. It polls
// with a per-content backoff for as long as the content exists
// (https://github.com/kubernetes-csi/external-snapshotter/issues/953: a
// snapshot never polled again stays unready forever).
func (c *Controller) syncUnready(ctx context.Context, content *snapv1.VolumeSnapshotContent) (workloop.Result, error) {
	logger := klog.FromContext(ctx)
	for _, d := range []*delays{c.polls, c.retries} {
		if left, ok := d.wait(content.Name); ok {
			return workloop.Result{RequeueAfter: left}, nil
		}
	}
	snap, err := c.readSnapshot(ctx, content)
	if err != nil {
		logger.V(2).Info("Reading the snapshot status failed", "err", snapshot.TrimMessage(err.Error()))
		return c.failed(ctx, content, ReasonCheckFailed, "Failed to check snapshot status: "+csi.DriverMessage(err))
	}
	if _, err := c.patchStatus(ctx, content, statusFrom(content, snap, c.now())); err != nil {
		return workloop.Result{}, err
	}
	c.retries.forget(content.Name)
	if !snap.ReadyToUse {
		d := c.polls.next(content.Name)
		logger.V(4).Info("Snapshot not ready yet", "handle", snap.ID, "nextPoll", d)
		return workloop.Result{RequeueAfter: d}, nil
	}
	logger.V(2).Info("Snapshot ready", "handle", snap.ID)
	c.polls.forget(content.Name)
	return workloop.Result{}, nil
}

// readSnapshot asks the driver about the content's snapshot. A dynamic
// content is polled with CreateSnapshot again (idempotent by name), with the
// class parameters and the create secret, as the community sidecar does: a
// driver that needs credentials gets the ones it was cut with, and
// ListSnapshots is never needed for it. A pre-provisioned content is read
// with ListSnapshots and the class's list secret when the driver offers it;
// otherwise it cannot be read and is taken to be ready.
func (c *Controller) readSnapshot(ctx context.Context, content *snapv1.VolumeSnapshotContent) (*csi.Snapshot, error) {
	handle := knownHandle(content)
	switch {
	case isDynamic(content):
		req, err := c.createRequest(ctx, content)
		if err != nil {
			return nil, err
		}
		snap, err := c.callCreate(ctx, req)
		if err != nil {
			return nil, err
		}
		if snap.ID != handle {
			return nil, fmt.Errorf("CreateSnapshot %q answered with snapshot %q, but the content holds %q", req.Name, snap.ID, handle)
		}
		return snap, nil
	case c.cfg.Driver.Capabilities().ListSnapshots:
		secrets, err := c.listSecrets(ctx, content)
		if err != nil {
			return nil, err
		}
		snap, err := c.callGet(ctx, handle, secrets)
		if err != nil {
			return nil, err
		}
		if snap == nil {
			return nil, fmt.Errorf("the CSI driver does not know snapshot %q", handle)
		}
		return snap, nil
	default:
		return &csi.Snapshot{ID: handle, ReadyToUse: true}, nil
	}
}
