package csiside

import (
	"context"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	groupinformers "github.com/kubernetes-csi/external-snapshotter/client/v8/informers/externalversions/volumegroupsnapshot/v1"
	grouplisters "github.com/kubernetes-csi/external-snapshotter/client/v8/listers/volumegroupsnapshot/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/snapkeeper/snapkeeper/pkg/csi"
	"github.com/snapkeeper/snapkeeper/pkg/sync/workloop"
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
	if c.handles(content.Spec.Driver, content) {
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

// syncGroupContent handles one group content through the one lifecycle
// (lifecycle.go).
func (c *Controller) syncGroupContent(ctx context.Context, name string) (workloop.Result, error) {
	content, err := c.groups.contents.Get(name)
	if err != nil {
		return c.syncItem(ctx, groupKey(name), nil, err)
	}
	return c.syncItem(ctx, groupKey(name), c.group(content), nil)
}
