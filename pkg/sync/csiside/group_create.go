package csiside

import (
	"context"
	"fmt"
	"time"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/snapkeeper/snapkeeper/pkg/csi"
	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/sync/workloop"
	"github.com/snapkeeper/snapkeeper/pkg/writer"
)

// groupCreating cuts the backend group of a dynamic group content, with the
// same being-created safety as syncCreating: the mark is on the API server
// before the call and leaves it only once the group id is stored or the
// driver said, finally, that nothing was cut.
func (c *Controller) groupCreating(ctx context.Context, content *groupv1.VolumeGroupSnapshotContent) (workloop.Result, error) {
	key := groupKey(content.Name)
	if content.Spec.VolumeGroupSnapshotRef.UID == "" {
		return workloop.Result{}, nil // the CSI name derives from the UID
	}
	if left, ok := c.retries.wait(key); ok {
		return workloop.Result{RequeueAfter: left}, nil
	}
	req, err := c.groupCreateRequest(ctx, content)
	if err != nil {
		return c.groupFailed(ctx, content, snapshot.ReasonGroupCreationFailed, "Failed to prepare the CreateVolumeGroupSnapshot call: "+err.Error())
	}
	// A mark already there is an earlier attempt of unknown outcome.
	earlier := snapshot.HasAnnotation(content, snapshot.AnnGroupBeingCreated, snapshot.ValueYes)
	p := &writer.Patch{}
	p.Meta.SetAnnotation(content, snapshot.AnnGroupBeingCreated, snapshot.ValueYes)
	if content.Spec.DeletionPolicy == snapv1.VolumeSnapshotContentDelete {
		p.Meta.AddFinalizers(content, snapshot.FinalizerGroupContentBound)
	}
	if content, err = c.cfg.Writer.PatchGroupContent(ctx, content, p); err != nil {
		return workloop.Result{}, err
	}
	klog.FromContext(ctx).V(2).Info("Calling CreateVolumeGroupSnapshot", "name", req.Name, "volumes", req.SourceVolumeIDs)
	group, err := c.groups.driver.CreateGroupSnapshot(ctx, req)
	if err != nil {
		return c.groupCreateFailed(ctx, content, err, earlier)
	}
	return c.storeGroup(ctx, content, group)
}

// groupUnready polls a cut group until it is ready: CreateVolumeGroupSnapshot
// again for a dynamic content (idempotent by name), GetVolumeGroupSnapshot
// for a pre-provisioned one.
func (c *Controller) groupUnready(ctx context.Context, content *groupv1.VolumeGroupSnapshotContent) (workloop.Result, error) {
	key := groupKey(content.Name)
	if left, ok := c.retries.wait(key); ok {
		return workloop.Result{RequeueAfter: left}, nil
	}
	var group *csi.GroupSnapshot
	var err error
	if h := content.Spec.Source.GroupSnapshotHandles; h != nil {
		secrets, serr := c.groupGetSecrets(ctx, content)
		if serr != nil {
			return c.groupFailed(ctx, content, snapshot.ReasonGroupCheckFailed, "Failed to check the group snapshot: "+serr.Error())
		}
		group, err = c.groups.driver.GetGroupSnapshot(ctx, h.VolumeGroupSnapshotHandle, h.VolumeSnapshotHandles, secrets)
		if err == nil && group == nil {
			err = fmt.Errorf("the driver does not know group snapshot %q", h.VolumeGroupSnapshotHandle)
		}
	} else {
		var req csi.CreateGroupRequest
		if req, err = c.groupCreateRequest(ctx, content); err == nil {
			group, err = c.groups.driver.CreateGroupSnapshot(ctx, req)
		}
	}
	if err != nil {
		return c.groupFailed(ctx, content, snapshot.ReasonGroupCheckFailed, "Failed to check and update group snapshot content: "+csi.DriverMessage(err))
	}
	return c.storeGroup(ctx, content, group)
}

// storeGroup writes what the driver said about a group in one status patch,
// then removes the being-created mark.
func (c *Controller) storeGroup(ctx context.Context, content *groupv1.VolumeGroupSnapshotContent, group *csi.GroupSnapshot) (workloop.Result, error) {
	key := groupKey(content.Name)
	c.retries.forget(key)
	if fields := groupStatusFrom(content, group, c.now()); len(fields) > 0 {
		var err error
		if content, err = c.cfg.Writer.PatchGroupContentStatus(ctx, content, fields); err != nil {
			return workloop.Result{}, err
		}
	}
	p := &writer.Patch{}
	p.Meta.RemoveAnnotation(content, snapshot.AnnGroupBeingCreated)
	if _, err := c.cfg.Writer.PatchGroupContent(ctx, content, p); err != nil {
		return workloop.Result{}, err
	}
	if !group.ReadyToUse {
		return workloop.Result{RequeueAfter: c.polls.next(key)}, nil
	}
	c.polls.forget(key)
	return workloop.Result{}, nil
}

// groupStatusFrom returns the status fields that differ from the driver's
// answer. The first creation time and member list are kept; a driver that
// gives no creation time gets the time of its answer.
func groupStatusFrom(content *groupv1.VolumeGroupSnapshotContent, group *csi.GroupSnapshot, now time.Time) map[string]any {
	cur := content.Status
	if cur == nil {
		cur = &groupv1.VolumeGroupSnapshotContentStatus{}
	}
	out := map[string]any{}
	if cur.VolumeGroupSnapshotHandle == nil {
		out["volumeGroupSnapshotHandle"] = group.ID
	}
	if cur.CreationTime == nil {
		t := group.CreationTime
		if t.IsZero() {
			t = now
		}
		out["creationTime"] = metav1.NewTime(t)
	}
	if cur.ReadyToUse == nil || *cur.ReadyToUse != group.ReadyToUse {
		out["readyToUse"] = group.ReadyToUse
	}
	if cur.Error != nil {
		out["error"] = nil
	}
	if len(cur.VolumeSnapshotInfoList) == 0 && len(group.Snapshots) > 0 && content.Spec.Source.GroupSnapshotHandles == nil {
		infos := make([]groupv1.VolumeSnapshotInfo, 0, len(group.Snapshots))
		for _, s := range group.Snapshots {
			info := groupv1.VolumeSnapshotInfo{VolumeHandle: s.SourceVolumeID, SnapshotHandle: s.ID, ReadyToUse: &s.ReadyToUse}
			if !s.CreationTime.IsZero() {
				ns := s.CreationTime.UnixNano()
				info.CreationTime = &ns
			}
			if s.SizeBytes > 0 {
				size := s.SizeBytes
				info.RestoreSize = &size
			}
			infos = append(infos, info)
		}
		out["volumeSnapshotInfoList"] = infos
	}
	return out
}

// groupCreateFailed shows a failed CreateVolumeGroupSnapshot; a final error
// clears the being-created mark (this call cut nothing) unless an earlier
// attempt of unknown outcome may have cut and the driver did not reject the
// request itself (as createFailed for single snapshots); any other keeps it.
func (c *Controller) groupCreateFailed(ctx context.Context, content *groupv1.VolumeGroupSnapshotContent, callErr error, earlier bool) (workloop.Result, error) {
	res, err := c.groupFailed(ctx, content, snapshot.ReasonGroupCreationFailed, "Failed to create group snapshot: "+csi.DriverMessage(callErr))
	if err != nil || csi.MayBeInProgress(callErr) || (earlier && !csi.RejectsRequest(callErr)) {
		return res, err
	}
	live, gerr := c.cfg.Snap.GroupsnapshotV1().VolumeGroupSnapshotContents().Get(ctx, content.Name, metav1.GetOptions{})
	if gerr != nil {
		return workloop.Result{}, ignoreNotFound(gerr)
	}
	p := &writer.Patch{}
	p.Meta.RemoveAnnotation(live, snapshot.AnnGroupBeingCreated)
	_, err = c.cfg.Writer.PatchGroupContent(ctx, live, p)
	return res, err
}

// groupFailed shows msg in the group content's status.error (one Warning
// event per new message) and retries with backoff.
func (c *Controller) groupFailed(ctx context.Context, content *groupv1.VolumeGroupSnapshotContent, reason, msg string) (workloop.Result, error) {
	msg = snapshot.TrimMessage(msg)
	if st := content.Status; st == nil || st.Error == nil || st.Error.Message == nil || *st.Error.Message != msg {
		now := metav1.NewTime(c.now())
		fields := map[string]any{"error": map[string]any{"message": msg, "time": now}}
		if st == nil || st.ReadyToUse == nil {
			fields["readyToUse"] = false
		}
		if _, err := c.cfg.Writer.PatchGroupContentStatus(ctx, content, fields); err != nil && !apierrors.IsNotFound(err) {
			return workloop.Result{}, err
		}
		klog.FromContext(ctx).Info("Group content error", "reason", reason, "message", msg)
		c.cfg.Recorder.Event(content, corev1.EventTypeWarning, reason, msg)
	}
	return workloop.Result{RequeueAfter: c.retries.next(groupKey(content.Name))}, nil
}
