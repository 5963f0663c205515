package csiside

import (
	"context"
	"fmt"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	groupinformers "github.com/kubernetes-csi/external-snapshotter/client/v8/informers/externalversions/volumegroupsnapshot/v1"
	grouplisters "github.com/kubernetes-csi/external-snapshotter/client/v8/listers/volumegroupsnapshot/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/snapkeeper/snapkeeper/pkg/csi"
	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/sync/workloop"
	"github.com/snapkeeper/snapkeeper/pkg/writer"
)

// GroupConfig turns on the group content loop: the driver offers the group
// controller service and the group CRDs are served.
type GroupConfig struct {
	ContentInformer groupinformers.VolumeGroupSnapshotContentInformer
	ClassInformer   groupinformers.VolumeGroupSnapshotClassInformer
	// NamePrefix and NameUUIDLength derive the CSI group snapshot name
	// (--groupsnapshot-name-prefix, default "groupsnapshot";
	// --groupsnapshot-name-uuid-length).
	NamePrefix     string
	NameUUIDLength int
}

// groups is the CSI side's group content loop. It shares the single loop's
// driver connection, writer, secrets, backoffs and error reporting; only
// the calls and the status it writes are its own.
type groups struct {
	cfg      GroupConfig
	driver   csi.GroupDriver
	contents grouplisters.VolumeGroupSnapshotContentLister
	classes  grouplisters.VolumeGroupSnapshotClassLister
	loop     *workloop.Loop
}

// newGroups wires the group loop, or returns nil when the driver cannot
// cut groups.
func (c *Controller) newGroups(cfg *GroupConfig) *groups {
	if cfg == nil || !c.cfg.Driver.Capabilities().GroupSnapshots {
		return nil
	}
	gd, ok := c.cfg.Driver.(csi.GroupDriver)
	if !ok {
		return nil
	}
	if cfg.NamePrefix == "" {
		cfg.NamePrefix = "groupsnapshot"
	}
	g := &groups{
		cfg:      *cfg,
		driver:   gd,
		contents: cfg.ContentInformer.Lister(),
		classes:  cfg.ClassInformer.Lister(),
	}
	c.synced = append(c.synced, cfg.ContentInformer.Informer().HasSynced, cfg.ClassInformer.Informer().HasSynced)
	g.loop = workloop.NewLoop("csi-snapshotter-groupcontent", c.cfg.Backoff, c.syncGroupContent)
	return g
}

func (c *Controller) onGroupContent(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	content, ok := obj.(*groupv1.VolumeGroupSnapshotContent)
	if !ok {
		return
	}
	c.cfg.Writer.Lag().Observe(content)
	if content.Spec.Driver == c.driver {
		c.groups.loop.Add(content.Name)
	}
}

func (c *Controller) onGroupContentDeleted(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if content, ok := obj.(*groupv1.VolumeGroupSnapshotContent); ok {
		c.cfg.Writer.Lag().Deleted(content)
		c.forget(groupKey(content.Name))
	}
}

// groupKey keeps the group contents' backoffs apart from the contents'.
func groupKey(name string) string { return "group/" + name }

// syncGroupContent handles one group content from the cache (never modify
// the cached copy).
func (c *Controller) syncGroupContent(ctx context.Context, name string) (workloop.Result, error) {
	content, err := c.groups.contents.Get(name)
	if apierrors.IsNotFound(err) {
		c.forget(groupKey(name))
		return workloop.Result{}, nil
	}
	if err != nil {
		return workloop.Result{}, fmt.Errorf("reading group content %s from the cache: %w", name, err)
	}
	if content.Spec.Driver != c.driver {
		return workloop.Result{}, nil
	}
	if c.cfg.Writer.Stale(content) {
		return workloop.Result{RequeueAfter: staleRecheck}, nil
	}
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("groupContent", name))
	switch {
	case content.DeletionTimestamp != nil:
		return c.groupDeleting(ctx, content)
	case groupHandle(content) == "" && len(content.Spec.Source.VolumeHandles) > 0:
		return c.groupCreating(ctx, content)
	case !groupReady(content):
		return c.groupUnready(ctx, content)
	}
	c.forget(groupKey(name))
	p := &writer.Patch{}
	p.Meta.RemoveAnnotation(content, snapshot.AnnGroupBeingCreated)
	if content.Spec.DeletionPolicy == "Delete" {
		p.Meta.AddFinalizers(content, snapshot.FinalizerGroupContentBound)
	}
	_, err = c.cfg.Writer.PatchGroupContent(ctx, content, p)
	return workloop.Result{}, err
}

// groupHandle is the backend group id the content knows, from its status or
// (pre-provisioned) its source.
func groupHandle(content *groupv1.VolumeGroupSnapshotContent) string {
	if st := content.Status; st != nil && st.VolumeGroupSnapshotHandle != nil {
		return *st.VolumeGroupSnapshotHandle
	}
	if h := content.Spec.Source.GroupSnapshotHandles; h != nil {
		return h.VolumeGroupSnapshotHandle
	}
	return ""
}

func groupReady(content *groupv1.VolumeGroupSnapshotContent) bool {
	return content.Status != nil && content.Status.ReadyToUse != nil && *content.Status.ReadyToUse
}
