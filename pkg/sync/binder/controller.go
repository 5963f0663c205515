// Package binder is the cluster-wide loop that binds VolumeSnapshots to
// VolumeSnapshotContents, guards them with finalizers and tears them down.
// Everything it waits for arrives as an informer event routed through an
// index; a slow jittered re-check covers anything missed.
//
// With group snapshots on (Config.Groups), it does the same for
// VolumeGroupSnapshots and their VolumeGroupSnapshotContents, through the
// same lifecycle (lifecycle.go, kinds.go), and makes the member
// VolumeSnapshots and contents of a dynamic group from what the driver
// reported (group*.go, vanished_group.go).
package binder

import (
	"context"
	"fmt"
	"time"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	snapinformers "github.com/kubernetes-csi/external-snapshotter/client/v8/informers/externalversions"
	grouplisters "github.com/kubernetes-csi/external-snapshotter/client/v8/listers/volumegroupsnapshot/v1"
	snaplisters "github.com/kubernetes-csi/external-snapshotter/client/v8/listers/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/informers"
	coordinformers "k8s.io/client-go/informers/coordination/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/snapkeeper/snapkeeper/pkg/cachelag"
	"github.com/snapkeeper/snapkeeper/pkg/sync/workloop"
	"github.com/snapkeeper/snapkeeper/pkg/writer"
)

// Config is what the binder needs; the command builds it from its options.
type Config struct {
	Snap snapclient.Interface
	// Kube, when set, reads a snapshot's claim and volume from the API
	// server when the cache shows them not ready yet (snapshotSource).
	Kube          kubernetes.Interface
	Writer        *writer.Writer
	KubeInformers informers.SharedInformerFactory
	SnapInformers snapinformers.SharedInformerFactory
	Recorder      record.EventRecorder
	Metrics       *Metrics
	Workers       int
	Backoff       workloop.Backoff
	// Recheck is the slow, jittered safety re-check of snapshots that wait
	// for something; events do the real work.
	Recheck time.Duration
	// DistributedSnapshotting labels contents with their PV's node.
	DistributedSnapshotting bool
	// SourceVolumeMode records the PV's volume mode on dynamic contents.
	SourceVolumeMode bool
	// Groups turns on volume group snapshots (their CRDs are served and
	// the feature gate is on).
	Groups bool
	// Leases, when set, are the Leases of CSI sides (csipresence.go): a
	// snapshot whose content no CSI side touches for NoCSISideAfter while
	// its driver has no fresh Lease says so in its status.
	Leases         coordinformers.LeaseInformer
	NoCSISideAfter time.Duration
}

// Controller is the binder.
type Controller struct {
	cfg       Config
	snapshots snaplisters.VolumeSnapshotLister
	contents  snaplisters.VolumeSnapshotContentLister
	classes   snaplisters.VolumeSnapshotClassLister
	pvcs      corelisters.PersistentVolumeClaimLister
	pvs       corelisters.PersistentVolumeLister
	// nodes is set with distributed snapshotting only.
	nodes corelisters.NodeLister

	snapIndex cache.Indexer
	pvcIndex  cache.Indexer
	pvIndex   cache.Indexer

	// Group snapshots; nil listers when Config.Groups is off.
	groups            grouplisters.VolumeGroupSnapshotLister
	groupContents     grouplisters.VolumeGroupSnapshotContentLister
	groupClasses      grouplisters.VolumeGroupSnapshotClassLister
	groupContentIndex cache.Indexer
	groupIndex        cache.Indexer // groups, by indexUnbound
	groupLoop         *workloop.Loop
	informers         workloop.Informers
	// lag is the Writer's tracker of our writes the cache does not show
	// yet: stale copies, contents created but not cached yet, deletes sent.
	// Every informer event feeds it.
	lag          *cachelag.Tracker
	snapshotLoop *workloop.Loop
	contentLoop  *workloop.Loop
	pvcLoop      *workloop.Loop
	// vanished are the snapshots deleted while they held our finalizers
	// (vanished.go).
	vanished uidMemory
	// vanishedGroups are the groups deleted while they held our finalizer
	// (vanished_group.go).
	vanishedGroups vanishedGroupSet
	// releasedUIDs are the snapshots and groups this process released,
	// until their delete events.
	releasedUIDs uidMemory
	// goneContents are the snapshots being deleted whose content the
	// informer saw go (gonecontent.go).
	goneContents uidMemory
	// presence is nil without Config.Leases.
	presence *csiPresence
}

// New wires the binder to its informers. Call before the factories start.
func New(cfg Config) (*Controller, error) {
	if cfg.Workers <= 0 {
		cfg.Workers = 1
	}
	if cfg.Recheck <= 0 {
		cfg.Recheck = 5 * time.Minute
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	sv1 := cfg.SnapInformers.Snapshot().V1()
	core := cfg.KubeInformers.Core().V1()
	c := &Controller{
		cfg:       cfg,
		snapshots: sv1.VolumeSnapshots().Lister(),
		contents:  sv1.VolumeSnapshotContents().Lister(),
		classes:   sv1.VolumeSnapshotClasses().Lister(),
		pvcs:      core.PersistentVolumeClaims().Lister(),
		pvs:       core.PersistentVolumes().Lister(),
		lag:       cfg.Writer.Lag(),
	}
	if cfg.DistributedSnapshotting {
		nodeInf := core.Nodes()
		c.nodes = nodeInf.Lister()
		c.informers.AddSynced(nodeInf.Informer().HasSynced)
	}
	c.snapshotLoop = workloop.NewLoop("snapshot-controller-snapshot", cfg.Backoff, c.syncSnapshot)
	c.contentLoop = workloop.NewLoop("snapshot-controller-content", cfg.Backoff, c.syncContent)
	c.pvcLoop = workloop.NewLoop("snapshot-controller-pvc", cfg.Backoff, c.syncPVC)

	snapInf := sv1.VolumeSnapshots().Informer()
	if err := snapInf.AddIndexers(snapshotIndexers); err != nil {
		return nil, fmt.Errorf("snapshot indexers: %w", err)
	}
	pvcInf := core.PersistentVolumeClaims().Informer()
	if err := pvcInf.AddIndexers(pvcIndexers); err != nil {
		return nil, fmt.Errorf("claim indexers: %w", err)
	}
	c.snapIndex, c.pvcIndex = snapInf.GetIndexer(), pvcInf.GetIndexer()
	contentInf := sv1.VolumeSnapshotContents().Informer()
	classInf := sv1.VolumeSnapshotClasses().Informer()
	pvInf := core.PersistentVolumes().Informer()
	if err := pvInf.AddIndexers(pvIndexers); err != nil {
		return nil, fmt.Errorf("volume indexers: %w", err)
	}
	c.pvIndex = pvInf.GetIndexer()

	handlers := []workloop.Handler{
		{Informer: snapInf, Fn: c.onSnapshot, Gone: c.onSnapshotGone},
		{Informer: contentInf, Fn: c.onContent, Gone: c.onContentGone},
		{Informer: classInf, Fn: c.onClass},
		{Informer: pvcInf, Fn: c.onPVC},
		{Informer: pvInf, Fn: c.onPV},
	}
	if cfg.Groups {
		groupHandlers, err := c.wireGroups()
		if err != nil {
			return nil, err
		}
		handlers = append(handlers, groupHandlers...)
	}
	if err := c.informers.Add(c.lag, handlers...); err != nil {
		return nil, err
	}
	if cfg.Leases != nil {
		// Not among c.informers: Leases we may not list never sync, and the
		// binder works without them.
		p, err := newPresence(cfg.Leases, cfg.NoCSISideAfter, c.snapshotLoop.Add)
		if err != nil {
			return nil, err
		}
		c.presence = p
	}
	return c, nil
}

// Run waits for the caches and runs the loops until ctx is done.
func (c *Controller) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithName("binder")
	ctx = klog.NewContext(ctx, logger)
	if !cache.WaitForCacheSync(ctx.Done(), c.informers.Synced()...) {
		return fmt.Errorf("binder: caches did not sync")
	}
	logger.Info("Binder started", "workers", c.cfg.Workers)
	go c.sweepVanished(ctx)
	go c.contentLoop.Run(ctx, max(1, c.cfg.Workers/4))
	go c.pvcLoop.Run(ctx, max(1, c.cfg.Workers/4))
	if c.groupLoop != nil {
		go c.groupLoop.Run(ctx, max(1, c.cfg.Workers/4))
	}
	c.snapshotLoop.Run(ctx, c.cfg.Workers)
	return nil
}

// HasSynced reports whether every informer the binder uses has synced.
func (c *Controller) HasSynced() bool { return c.informers.HasSynced() }

// Event handlers only route keys; nothing in them blocks.

func (c *Controller) onSnapshot(obj any) {
	vs, ok := obj.(*snapv1.VolumeSnapshot)
	if !ok {
		return
	}
	if c.urgent(vs) {
		// Its own write's event, when the content turned ready while
		// that write was on its way (the sync then found the cache stale).
		c.snapshotLoop.AddUrgent(objKey(vs.Namespace, vs.Name))
	} else {
		c.snapshotLoop.Add(objKey(vs.Namespace, vs.Name))
	}
	if pvc := vs.Spec.Source.PersistentVolumeClaimName; pvc != nil {
		c.pvcLoop.Add(objKey(vs.Namespace, *pvc))
	}
}

func (c *Controller) onContent(obj any) {
	content, ok := obj.(*snapv1.VolumeSnapshotContent)
	if !ok {
		return
	}
	c.contentLoop.Add(content.Name)
	ref := content.Spec.VolumeSnapshotRef
	if ref.Name != "" {
		key := objKey(ref.Namespace, ref.Name)
		if c.oneWriteLeft(ref.Namespace, ref.Name, content) {
			c.snapshotLoop.AddUrgent(key)
		} else {
			c.snapshotLoop.Add(key)
		}
	}
	// Pre-provisioned snapshots that name this content but are not (yet)
	// in its ref still need to hear about it.
	c.enqueueIndexed(c.snapIndex, indexByContent, content.Name)
}

// oneWriteLeft reports whether the content's event leaves its snapshot one
// write away from done: the content is ready and the snapshot does not show
// it yet, or the content is gone and the snapshot waits for that to be
// released. Such a snapshot goes ahead of the queue (Loop.AddUrgent): in a
// burst it would otherwise wait behind every new snapshot's first pass.
func (c *Controller) oneWriteLeft(ns, name string, content *snapv1.VolumeSnapshotContent) bool {
	vs, err := c.snapshots.VolumeSnapshots(ns).Get(name)
	if err != nil || vs.UID != content.Spec.VolumeSnapshotRef.UID {
		return false
	}
	return c.urgent(vs)
}

// urgent reports whether vs is one write from done (oneWriteLeft), from the
// cache.
func (c *Controller) urgent(vs *snapv1.VolumeSnapshot) bool {
	if vs.Spec.Source.PersistentVolumeClaimName == nil && vs.Spec.Source.VolumeSnapshotContentName == nil {
		return false
	}
	content, err := c.contents.Get(contentNameOf(vs))
	if vs.DeletionTimestamp != nil {
		return apierrors.IsNotFound(err) && len(vs.Finalizers) > 0
	}
	if err != nil || content.Spec.VolumeSnapshotRef.UID != vs.UID {
		return false
	}
	snapReady := vs.Status != nil && vs.Status.ReadyToUse != nil && *vs.Status.ReadyToUse
	return contentReady(content) && !snapReady
}

func (c *Controller) onClass(obj any) {
	class, ok := obj.(*snapv1.VolumeSnapshotClass)
	if !ok {
		return
	}
	c.enqueueIndexed(c.snapIndex, indexByClass, class.Name)
	// A class that becomes (or stops being) a default changes the outcome
	// for every snapshot still waiting for a default.
	c.enqueueIndexed(c.snapIndex, indexByClass, noClass)
}

func (c *Controller) onPVC(obj any) {
	pvc, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok {
		return
	}
	key := objKey(pvc.Namespace, pvc.Name)
	c.enqueueIndexed(c.snapIndex, indexByPVC, key)
	for _, src := range restoreSources(pvc) {
		c.snapshotLoop.Add(src)
		c.enqueueGroupOfMember(src)
	}
	c.pvcLoop.Add(key)
	c.enqueueWaitingGroups(pvc.Namespace)
}

func (c *Controller) onPV(obj any) {
	pv, ok := obj.(*corev1.PersistentVolume)
	if !ok || pv.Spec.ClaimRef == nil {
		return
	}
	c.enqueueIndexed(c.snapIndex, indexByPVC, objKey(pv.Spec.ClaimRef.Namespace, pv.Spec.ClaimRef.Name))
}

func (c *Controller) enqueueIndexed(idx cache.Indexer, index, value string) {
	keys, err := idx.IndexKeys(index, value)
	if err != nil {
		return
	}
	for _, k := range keys {
		c.snapshotLoop.Add(k)
	}
}

// wireGroups requests the group informers and makes the group loop.
func (c *Controller) wireGroups() ([]workloop.Handler, error) {
	gv1 := c.cfg.SnapInformers.Groupsnapshot().V1()
	c.groups = gv1.VolumeGroupSnapshots().Lister()
	groupInf := gv1.VolumeGroupSnapshots().Informer()
	if err := groupInf.AddIndexers(groupIndexers); err != nil {
		return nil, fmt.Errorf("group indexers: %w", err)
	}
	c.groupIndex = groupInf.GetIndexer()
	c.groupContents = gv1.VolumeGroupSnapshotContents().Lister()
	c.groupClasses = gv1.VolumeGroupSnapshotClasses().Lister()
	contentInf := gv1.VolumeGroupSnapshotContents().Informer()
	if err := contentInf.AddIndexers(groupContentIndexers); err != nil {
		return nil, fmt.Errorf("group content indexers: %w", err)
	}
	c.groupContentIndex = contentInf.GetIndexer()
	c.groupLoop = workloop.NewLoop("snapshot-controller-group", c.cfg.Backoff, c.syncGroup)
	return []workloop.Handler{
		{Informer: groupInf, Fn: c.onGroup, Gone: c.onGroupGone},
		{Informer: contentInf, Fn: c.onGroupContent},
		{Informer: gv1.VolumeGroupSnapshotClasses().Informer(), Fn: c.onGroupClass},
	}, nil
}

func (c *Controller) onGroup(obj any) {
	g, ok := obj.(*groupv1.VolumeGroupSnapshot)
	if !ok {
		return
	}
	key := objKey(g.Namespace, g.Name)
	c.groupLoop.Add(key)
	// Members wait for their group to go before they are released.
	c.enqueueIndexed(c.snapIndex, indexByGroup, key)
}

func (c *Controller) onGroupContent(obj any) {
	content, ok := obj.(*groupv1.VolumeGroupSnapshotContent)
	if !ok {
		return
	}
	if ref := content.Spec.VolumeGroupSnapshotRef; ref.Name != "" {
		c.groupLoop.Add(objKey(ref.Namespace, ref.Name))
	}
}

func (c *Controller) onGroupClass(obj any) {
	if _, ok := obj.(*groupv1.VolumeGroupSnapshotClass); ok {
		c.enqueueWaitingGroups("")
	}
}

// enqueueWaitingGroups queues the unbound groups of a namespace ("" for
// all): a claim or class change may let them go on. The bound ones, which
// a schedule keeps by the hundred, are not read.
func (c *Controller) enqueueWaitingGroups(namespace string) {
	if c.groupLoop == nil {
		return
	}
	if namespace == "" {
		namespace = allNamespaces
	}
	keys, err := c.groupIndex.IndexKeys(indexUnbound, namespace)
	if err != nil {
		return
	}
	for _, k := range keys {
		c.groupLoop.Add(k)
	}
}

// enqueueGroupOfMember queues the group the snapshot with key
// namespace/name belongs to (statedGroup: by status too, once the garbage
// collector stripped its owner reference), if any: a group being deleted
// waits for claims that restore from its members.
func (c *Controller) enqueueGroupOfMember(key string) {
	if c.groupLoop == nil {
		return
	}
	obj, ok, err := c.snapIndex.GetByKey(key)
	if err != nil || !ok {
		return
	}
	if vs, isVS := obj.(*snapv1.VolumeSnapshot); isVS {
		if g, _ := statedGroup(vs); g != "" {
			c.groupLoop.Add(objKey(vs.Namespace, g))
		}
	}
}
