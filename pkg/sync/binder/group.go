package binder

import (
	"context"
	"fmt"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"

	"github.com/snapkeeper/snapkeeper/pkg/cachelag"
	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/sync/workloop"
	"github.com/snapkeeper/snapkeeper/pkg/writer"
)

// syncGroup dispatches one VolumeGroupSnapshot to its state function, as
// syncSnapshot does for single snapshots. The members of a dynamic group
// are ordinary VolumeSnapshots and contents: once created here they follow
// the single-snapshot state functions (bound, deleting), which know only
// that a member is never cut or deleted on its own.
func (c *Controller) syncGroup(ctx context.Context, key string) (workloop.Result, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return workloop.Result{}, nil
	}
	g, err := c.groups.VolumeGroupSnapshots(ns).Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return workloop.Result{}, err
	}
	if verr := c.cleanVanishedGroups(ctx, key, g); verr != nil {
		return workloop.Result{}, verr
	}
	if err != nil {
		return workloop.Result{}, nil // gone
	}
	if c.cfg.Writer.Stale(g) {
		return workloop.Result{}, nil // our write's event brings it back
	}
	src := g.Spec.Source
	switch {
	case g.DeletionTimestamp != nil:
		return c.groupDeleting(ctx, g)
	case (src.Selector == nil) == (src.VolumeGroupSnapshotContentName == nil):
		return c.groupFail(ctx, g, problemf(snapshot.ReasonGroupSnapshotValidationError,
			"exactly one of spec.source.selector and spec.source.volumeGroupSnapshotContentName must be set; delete the VolumeGroupSnapshot and create it with one of them"))
	case src.VolumeGroupSnapshotContentName != nil:
		return c.groupPreProvisioned(ctx, g)
	default:
		return c.groupDynamic(ctx, g)
	}
}

// groupContentOf returns the content a group is (or will be) bound to, from
// the cache or as we created it a moment ago, or nil.
func (c *Controller) groupContentOf(g *groupv1.VolumeGroupSnapshot) *groupv1.VolumeGroupSnapshotContent {
	name := c.groupContentName(g)
	if content, err := c.groupContents.Get(name); err == nil {
		return content
	}
	if content, ok := cachelag.Created[*groupv1.VolumeGroupSnapshotContent](c.lag, "", name); ok {
		return content
	}
	return nil
}

// groupContentName names the content a group is (or will be) bound to.
func (c *Controller) groupContentName(g *groupv1.VolumeGroupSnapshot) string {
	switch {
	case g.Spec.Source.VolumeGroupSnapshotContentName != nil:
		return *g.Spec.Source.VolumeGroupSnapshotContentName
	case g.Status != nil && g.Status.BoundVolumeGroupSnapshotContentName != nil:
		return *g.Status.BoundVolumeGroupSnapshotContentName
	}
	return snapshot.GroupContentNameFor(g.UID)
}

// groupDynamic cuts a group of the claims its selector chooses.
func (c *Controller) groupDynamic(ctx context.Context, g *groupv1.VolumeGroupSnapshot) (workloop.Result, error) {
	if content := c.groupContentOf(g); content != nil {
		if content.Spec.Source.GroupSnapshotHandles != nil {
			return c.groupFail(ctx, g, problemf(snapshot.ReasonGroupSnapshotContentMismatch,
				"VolumeGroupSnapshotContent %q is pre-provisioned (spec.source.groupSnapshotHandles) but this group takes a new snapshot of its selector's claims; delete that content",
				content.Name))
		}
		return c.groupBound(ctx, g, content)
	}
	if g.Status != nil && g.Status.BoundVolumeGroupSnapshotContentName != nil {
		return c.groupFail(ctx, g, problemf(snapshot.ReasonGroupSnapshotContentMissing,
			"VolumeGroupSnapshotContent %q that this group snapshot was bound to is gone; delete and re-create the VolumeGroupSnapshot",
			*g.Status.BoundVolumeGroupSnapshotContentName))
	}
	plan, prob := c.planGroup(g)
	if prob != nil {
		return c.groupFail(ctx, g, prob)
	}
	c.cfg.Metrics.start(g.UID, OpCreateGroupSnapshot)
	c.cfg.Metrics.start(g.UID, OpCreateGroupSnapshotAndReady)
	// The group's finalizer and resolved default class in one write, stored
	// before the content exists; then the content, born with its finalizer.
	p := &writer.Patch{}
	p.Meta.AddFinalizers(g, snapshot.FinalizerGroupSnapshotBound)
	if g.Spec.VolumeGroupSnapshotClassName == nil {
		p.Fields = map[string]any{"spec": map[string]any{"volumeGroupSnapshotClassName": plan.class.Name}}
	}
	if _, err := c.cfg.Writer.PatchGroup(ctx, g, p); err != nil {
		return workloop.Result{}, err
	}
	content := newGroupContent(g, plan)
	if _, err := c.cfg.Writer.CreateGroupContent(ctx, content); err != nil && !apierrors.IsAlreadyExists(err) {
		if serr := c.setGroupError(ctx, g, problemf(snapshot.ReasonCreateGroupSnapshotContentFailed,
			"cannot create VolumeGroupSnapshotContent %q: %v", content.Name, err)); serr != nil {
			return workloop.Result{}, serr
		}
		return workloop.Result{}, fmt.Errorf("creating VolumeGroupSnapshotContent %s: %w", content.Name, err)
	}
	c.cfg.Recorder.Eventf(g, corev1.EventTypeNormal, snapshot.ReasonCreatingGroupSnapshot,
		"Waiting for group snapshot %s/%s to be created by the CSI driver.", g.Namespace, g.Name)
	return workloop.Result{}, nil
}

// groupPreProvisioned binds a group to the content it names.
func (c *Controller) groupPreProvisioned(ctx context.Context, g *groupv1.VolumeGroupSnapshot) (workloop.Result, error) {
	content, prob := c.preProvisionedGroupContent(g)
	if prob != nil {
		return c.groupFail(ctx, g, prob)
	}
	c.cfg.Metrics.start(g.UID, OpCreateGroupSnapshotAndReady)
	p := &writer.Patch{}
	p.Meta.AddFinalizers(g, snapshot.FinalizerGroupSnapshotBound)
	if _, err := c.cfg.Writer.PatchGroup(ctx, g, p); err != nil {
		return workloop.Result{}, err
	}
	if content.Spec.VolumeGroupSnapshotRef.UID == "" {
		// Bind once, guarded by the content's resourceVersion.
		cp := &writer.Patch{}
		cp.Meta.AddFinalizers(content, snapshot.FinalizerGroupContentBound)
		spec := map[string]any{"volumeGroupSnapshotRef": map[string]any{"uid": string(g.UID)}}
		if n := g.Spec.VolumeGroupSnapshotClassName; n != nil && *n != "" && content.Spec.VolumeGroupSnapshotClassName == nil {
			spec["volumeGroupSnapshotClassName"] = *n
		}
		cp.Fields = map[string]any{"spec": spec}
		cp.Precondition = content.ResourceVersion
		_, err := c.cfg.Writer.PatchGroupContent(ctx, content, cp)
		return workloop.Result{}, err // the content's event brings us back
	}
	return c.groupBound(ctx, g, content)
}

// preProvisionedGroupContent returns the content a pre-provisioned group
// names, or the problem that keeps them from binding.
func (c *Controller) preProvisionedGroupContent(g *groupv1.VolumeGroupSnapshot) (*groupv1.VolumeGroupSnapshotContent, *problem) {
	return preProvisioned(staticGroup, *g.Spec.Source.VolumeGroupSnapshotContentName, c.groupContents.Get,
		func(content *groupv1.VolumeGroupSnapshotContent) staticContent {
			return staticContent{ref: content.Spec.VolumeGroupSnapshotRef, dynamic: content.Spec.Source.GroupSnapshotHandles == nil, deleting: content.DeletionTimestamp != nil}
		}, g.Namespace, g.Name, g.UID)
}

// groupBound keeps a bound group's finalizer, members and status in line
// with its content.
func (c *Controller) groupBound(ctx context.Context, g *groupv1.VolumeGroupSnapshot, content *groupv1.VolumeGroupSnapshotContent) (workloop.Result, error) {
	if content.Spec.VolumeGroupSnapshotRef.UID != g.UID {
		return c.groupFail(ctx, g, problemf(snapshot.ReasonGroupSnapshotContentMisbound,
			"VolumeGroupSnapshotContent %q belongs to another VolumeGroupSnapshot (uid %q); delete this VolumeGroupSnapshot and create a new one",
			content.Name, content.Spec.VolumeGroupSnapshotRef.UID))
	}
	p := &writer.Patch{}
	p.Meta.AddFinalizers(g, snapshot.FinalizerGroupSnapshotBound)
	if _, err := c.cfg.Writer.PatchGroup(ctx, g, p); err != nil {
		return workloop.Result{}, err
	}
	complete, err := c.ensureMembers(ctx, g, content)
	if err != nil {
		if serr := c.setGroupError(ctx, g, problemf(snapshot.ReasonGroupSnapshotMemberFailed,
			"cannot create the member snapshots of the group: %v", err)); serr != nil {
			return workloop.Result{}, serr
		}
		return workloop.Result{}, err
	}
	if err := c.mirrorGroupStatus(ctx, g, content, complete); err != nil {
		return workloop.Result{}, err
	}
	if !complete || !groupContentReady(content) {
		return workloop.Result{RequeueAfter: c.recheck()}, nil
	}
	return workloop.Result{}, nil
}

func groupContentReady(content *groupv1.VolumeGroupSnapshotContent) bool {
	return content.Status != nil && content.Status.ReadyToUse != nil && *content.Status.ReadyToUse
}
