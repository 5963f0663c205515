// Package csiside is the content loop of the CSI side: it cuts the backend
// snapshot of a dynamic VolumeSnapshotContent, polls it until it is ready,
// reads the status of a pre-provisioned one, and deletes the backend snapshot
// when its content goes. It never leaks a backend snapshot whose content is
// gone and never loses one whose content exists (docs/csi-side.md).
//
// When the driver offers the group controller service and the group CRDs
// are served (GroupConfig), a second loop does the same for
// VolumeGroupSnapshotContents with the group calls (group*.go); the
// members' backend snapshots are cut and deleted with their group, never
// one by one.
package csiside

import (
	"context"
	"fmt"
	"slices"
	"time"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	groupinformers "github.com/kubernetes-csi/external-snapshotter/client/v8/informers/externalversions/volumegroupsnapshot/v1"
	snapinformers "github.com/kubernetes-csi/external-snapshotter/client/v8/informers/externalversions/volumesnapshot/v1"
	grouplisters "github.com/kubernetes-csi/external-snapshotter/client/v8/listers/volumegroupsnapshot/v1"
	snaplisters "github.com/kubernetes-csi/external-snapshotter/client/v8/listers/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/snapkeeper/snapkeeper/pkg/csi"
	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/sync/workloop"
	"github.com/snapkeeper/snapkeeper/pkg/writer"
)

// Event reasons on the content (docs/contract.md). Events are sent when
// status.error changes, never on every retry.
const (
	ReasonCreationFailed = snapshot.ReasonCreationFailed
	ReasonCheckFailed    = snapshot.ReasonCheckFailed
	ReasonDeleteError    = snapshot.ReasonDeleteError
)

const (
	// minPollStart is the shortest first delay of the readiness poll: a
	// backend that did not finish with the cut takes seconds to upload, and
	// a shorter start only adds calls (docs/csi-side.md, "Readiness").
	minPollStart = time.Second
	// staleRecheck re-reads a content whose cached copy predates our last
	// write, in case the write's event never comes (the object was replaced
	// during a relist, say). The event normally comes within milliseconds.
	staleRecheck = 2 * time.Second

	defaultRetryStart = time.Second
	defaultRetryMax   = 5 * time.Minute
	defaultPrefix     = "snapshot"
)

// Config is what the CSI side's content loop needs; the command builds it
// from its options.
type Config struct {
	// Driver is the connected CSI driver; only contents with its name are
	// handled.
	Driver csi.Driver
	// Kube reads Secrets, only when a call needs them.
	Kube kubernetes.Interface
	// Snap reads a content live before finishing an in-flight create of a
	// deleted content. The CSI side never reads VolumeSnapshots (the
	// community csi-snapshotter role grants no access to them).
	Snap snapclient.Interface
	// Writer performs every write.
	Writer *writer.Writer
	// ContentInformer and ClassInformer come from the snapshot informer
	// factory; New requests them, so call New before the factory starts.
	// With NodeName set, the factory should select contents by
	// LabelManagedBy=NodeName (the loop filters them as well).
	ContentInformer snapinformers.VolumeSnapshotContentInformer
	ClassInformer   snapinformers.VolumeSnapshotClassInformer
	// Recorder receives Warning events on the content.
	Recorder record.EventRecorder

	// SnapshotNamePrefix and SnapshotNameUUIDLength derive the CSI snapshot
	// name (--snapshot-name-prefix, default "snapshot" when empty;
	// --snapshot-name-uuid-length, -1 keeps the whole UID). They must be
	// honoured exactly: another name re-creates in-flight snapshots.
	SnapshotNamePrefix     string
	SnapshotNameUUIDLength int
	// ExtraCreateMetadata passes the snapshot and content names to the
	// driver (--extra-create-metadata).
	ExtraCreateMetadata bool
	// NodeName, when set (--node-deployment), limits the loop to contents
	// labelled LabelManagedBy=NodeName.
	NodeName string
	// Backoff is the retry backoff (--retry-interval-start/-max): of API
	// errors, of failed CSI calls, and the cap of the readiness poll.
	Backoff workloop.Backoff
	// ResyncPeriod, when positive, re-queues every handled content from the
	// cache at that interval (--resync-period). Zero: events only.
	ResyncPeriod time.Duration
	// Groups, when set and the driver offers the group controller service,
	// turns on the group content loop.
	Groups *GroupConfig
}

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

// Controller is the CSI side's content loop.
type Controller struct {
	cfg      Config
	driver   string
	contents snaplisters.VolumeSnapshotContentLister
	classes  snaplisters.VolumeSnapshotClassLister
	synced   []cache.InformerSynced
	loop     *workloop.Loop
	now      func() time.Time

	polls   *delays // not-ready readiness polls
	retries *delays // failed CSI calls outside deletion
	// groups is the group content loop; nil without group snapshots.
	groups *groups
}

// New builds the loop. It requests the content and class informers from
// their factory, so call it before the factory starts; Run does the rest.
func New(cfg Config) *Controller {
	if cfg.SnapshotNamePrefix == "" {
		cfg.SnapshotNamePrefix = defaultPrefix
	}
	if cfg.Backoff.Start <= 0 {
		cfg.Backoff.Start = defaultRetryStart
	}
	if cfg.Backoff.Max <= 0 {
		cfg.Backoff.Max = defaultRetryMax
	}
	contentInf := cfg.ContentInformer.Informer()
	classInf := cfg.ClassInformer.Informer()
	c := &Controller{
		cfg:      cfg,
		driver:   cfg.Driver.Name(),
		contents: cfg.ContentInformer.Lister(),
		classes:  cfg.ClassInformer.Lister(),
		synced:   []cache.InformerSynced{contentInf.HasSynced, classInf.HasSynced},
		now:      time.Now,
	}
	// The readiness poll waits as the community sidecar's rate-limited
	// requeue does with its default flags: a second after the cut (or
	// Backoff.Start, if longer), doubling up to Backoff.Max
	// (docs/contract.md, "Readiness polling").
	c.polls = newDelays(max(cfg.Backoff.Start, minPollStart), cfg.Backoff.Max, c.clock)
	c.retries = newDelays(cfg.Backoff.Start, cfg.Backoff.Max, c.clock)
	c.loop = workloop.NewLoop("csi-snapshotter-content", cfg.Backoff, c.sync)
	c.groups = c.newGroups(cfg.Groups)
	return c
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

// clock indirects c.now, so tests can move time after New.
func (c *Controller) clock() time.Time { return c.now() }

// Run registers the event handlers, waits for the caches and runs workers
// until ctx ends. The informer factory must be started by the caller.
func (c *Controller) Run(ctx context.Context, workers int) error {
	logger := klog.FromContext(ctx).WithValues("controller", "csi-side", "driver", c.driver)
	ctx = klog.NewContext(ctx, logger)
	inf := c.cfg.ContentInformer.Informer()
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.onContent,
		UpdateFunc: func(_, obj any) { c.onContent(obj) },
		DeleteFunc: c.onContentDeleted,
	})
	if err != nil {
		return fmt.Errorf("registering the content event handler: %w", err)
	}
	defer func() { _ = inf.RemoveEventHandler(reg) }()
	if c.groups != nil {
		ginf := c.groups.cfg.ContentInformer.Informer()
		greg, err := ginf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    c.onGroupContent,
			UpdateFunc: func(_, obj any) { c.onGroupContent(obj) },
			DeleteFunc: c.onGroupContentDeleted,
		})
		if err != nil {
			return fmt.Errorf("registering the group content event handler: %w", err)
		}
		defer func() { _ = ginf.RemoveEventHandler(greg) }()
		go c.groups.loop.Run(ctx, max(1, workers/4))
		logger.Info("Group snapshots on")
	}

	logger.V(1).Info("Waiting for informer caches", "nodeName", c.cfg.NodeName)
	if !cache.WaitForCacheSync(ctx.Done(), slices.Concat(c.synced, []cache.InformerSynced{reg.HasSynced})...) {
		return fmt.Errorf("waiting for the content and class caches: %w", context.Cause(ctx))
	}
	if c.cfg.ResyncPeriod > 0 {
		go wait.JitterUntilWithContext(ctx, c.resync, c.cfg.ResyncPeriod, 0.1, false)
	}
	c.loop.Run(ctx, max(workers, 1))
	return nil
}

// onContent queues a content of ours. It runs in the informer's goroutine:
// no blocking call here. The writer's cache-lag tracker hears of every
// content first, so the sync it wakes sees what the cache shows.
func (c *Controller) onContent(obj any) {
	content, ok := obj.(*snapv1.VolumeSnapshotContent)
	if ok {
		c.cfg.Writer.Lag().Observe(content)
	}
	if ok && c.handles(content.Spec.Driver, content) {
		c.loop.Add(content.Name)
	}
}

// onContentDeleted drops what the loop remembers about a content and queues
// it once more, so a sync still running cannot leave state behind.
func (c *Controller) onContentDeleted(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	content, ok := obj.(*snapv1.VolumeSnapshotContent)
	if ok {
		c.cfg.Writer.Lag().Deleted(content)
	}
	if ok && c.handles(content.Spec.Driver, content) {
		c.forget(content.Name)
		c.loop.Add(content.Name)
	}
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

// resync re-queues every content of ours from the cache.
func (c *Controller) resync(ctx context.Context) {
	all, err := c.contents.List(labels.Everything())
	if err != nil {
		klog.FromContext(ctx).Error(err, "Listing contents for the resync")
		return
	}
	for _, content := range all {
		c.onContent(content)
	}
}

// handles reports whether this CSI side is responsible for a content or a
// group content of driver: its driver, and with --node-deployment labelled
// for this node (as the informers select them; a group content is no
// exception, as in the community sidecar). Members of a group are handled
// only when they are deleted: the group's CSI calls cut and delete their
// backend snapshots.
func (c *Controller) handles(driver string, content metav1.Object) bool {
	if driver != c.driver {
		return false
	}
	return c.cfg.NodeName == "" || content.GetLabels()[snapshot.LabelManagedBy] == c.cfg.NodeName
}

func (c *Controller) forget(name string) {
	c.polls.forget(name)
	c.retries.forget(name)
}

// sync handles one content through the one lifecycle (lifecycle.go).
func (c *Controller) sync(ctx context.Context, name string) (workloop.Result, error) {
	content, err := c.contents.Get(name)
	if err != nil {
		return c.syncItem(ctx, name, nil, err)
	}
	return c.syncItem(ctx, name, c.single(content), nil)
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
