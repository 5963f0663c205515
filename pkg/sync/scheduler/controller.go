// Package scheduler is the schedule component: it cuts the VolumeSnapshots
// (or VolumeGroupSnapshots) of each SnapshotSchedule at its scheduled times
// and deletes what its retention does not keep, as a user would with
// kubectl; the binder and the CSI side then do the rest. The decisions
// (when, names, what to keep) are pkg/schedule's pure functions; this loop
// reads them off the informer caches and writes through pkg/writer.
//
// A schedule's key is queued on its own events, on its snapshots' events
// (by their snapkeeper.io/schedule label, through an index) and on the
// claims of its namespace; after each sync it requeues itself for its next
// scheduled time, so nothing polls.
package scheduler

import (
	"context"
	"fmt"
	"time"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapinformers "github.com/kubernetes-csi/external-snapshotter/client/v8/informers/externalversions"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/snapkeeper/snapkeeper/pkg/apis/snapkeeper/v1alpha1"
	"github.com/snapkeeper/snapkeeper/pkg/cachelag"
	"github.com/snapkeeper/snapkeeper/pkg/schedule"
	"github.com/snapkeeper/snapkeeper/pkg/sync/workloop"
	"github.com/snapkeeper/snapkeeper/pkg/writer"
)

// Config is what the schedule component needs.
type Config struct {
	Writer        *writer.Writer
	KubeInformers informers.SharedInformerFactory
	SnapInformers snapinformers.SharedInformerFactory
	// Schedules is the informer of SnapshotSchedules (schedclient).
	Schedules cache.SharedIndexInformer
	Recorder  record.EventRecorder
	Metrics   *Metrics
	Workers   int
	Backoff   workloop.Backoff
	// Groups: the group snapshot CRDs are served and the gate is on; a
	// group schedule without them says so in its status.
	Groups bool
	// Clock is the wall clock (a fake one in tests).
	Clock clock.Clock
	// Settle is how long a schedule's key waits after an event of one of
	// its snapshots or claims, so that a burst (a run's snapshots turning
	// ready) costs one sync, not one per event.
	Settle time.Duration
}

// Controller is the schedule component.
type Controller struct {
	cfg       Config
	clock     clock.Clock
	pvcs      corelisters.PersistentVolumeClaimLister
	schedules cache.Indexer
	snapIndex cache.Indexer
	pvcIndex  cache.Indexer
	// groupIndex is nil without Config.Groups.
	groupIndex cache.Indexer
	lag        *cachelag.Tracker
	loop       *workloop.Loop
	informers  workloop.Informers
}

// Index names.
const (
	// bySchedule indexes scheduled snapshots and group snapshots by
	// "<namespace>/<schedule>".
	bySchedule = "snapkeeper-schedule"
	// byRestoreSource indexes claims that are not bound yet by the
	// "<namespace>/<snapshot>" they restore from.
	byRestoreSource = "snapkeeper-restore-source"
)

// New wires the component to its informers. Call before the factories
// start.
func New(cfg Config) (*Controller, error) {
	if cfg.Workers <= 0 {
		cfg.Workers = 1
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	if cfg.Settle <= 0 {
		cfg.Settle = 500 * time.Millisecond
	}
	pvcInf := cfg.KubeInformers.Core().V1().PersistentVolumeClaims()
	snapInf := cfg.SnapInformers.Snapshot().V1().VolumeSnapshots().Informer()
	c := &Controller{
		cfg:       cfg,
		clock:     cfg.Clock,
		pvcs:      pvcInf.Lister(),
		schedules: cfg.Schedules.GetIndexer(),
		lag:       cfg.Writer.Lag(),
	}
	c.loop = workloop.NewLoop("snapkeeper-schedule", cfg.Backoff, c.sync)
	if err := snapInf.SetTransform(trimSnapshot); err != nil {
		return nil, fmt.Errorf("snapshot transform: %w", err)
	}
	if err := snapInf.AddIndexers(cache.Indexers{bySchedule: scheduleIndex}); err != nil {
		return nil, fmt.Errorf("snapshot indexers: %w", err)
	}
	if err := pvcInf.Informer().AddIndexers(cache.Indexers{byRestoreSource: restoreSourceIndex}); err != nil {
		return nil, fmt.Errorf("claim indexers: %w", err)
	}
	c.snapIndex, c.pvcIndex = snapInf.GetIndexer(), pvcInf.Informer().GetIndexer()
	handlers := []workloop.Handler{
		{Informer: cfg.Schedules, Fn: c.onSchedule},
		{Informer: snapInf, Fn: c.onScheduled},
		{Informer: pvcInf.Informer(), Fn: c.onClaim},
	}
	if cfg.Groups {
		groupInf := cfg.SnapInformers.Groupsnapshot().V1().VolumeGroupSnapshots().Informer()
		if err := groupInf.AddIndexers(cache.Indexers{bySchedule: scheduleIndex}); err != nil {
			return nil, fmt.Errorf("group snapshot indexers: %w", err)
		}
		c.groupIndex = groupInf.GetIndexer()
		handlers = append(handlers, workloop.Handler{Informer: groupInf, Fn: c.onScheduled})
	}
	if err := c.informers.Add(c.lag, handlers...); err != nil {
		return nil, err
	}
	return c, nil
}

// Run waits for the caches and runs the loop until ctx is done.
func (c *Controller) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithName("schedules")
	ctx = klog.NewContext(ctx, logger)
	if !cache.WaitForCacheSync(ctx.Done(), c.informers.Synced()...) {
		return fmt.Errorf("schedules: caches did not sync")
	}
	logger.Info("Schedule component started", "workers", c.cfg.Workers)
	// Leadership may come long after the caches filled: every schedule is
	// looked at once, which catches up on the times missed meanwhile.
	for _, key := range c.schedules.ListKeys() {
		c.loop.Add(key)
	}
	c.loop.Run(ctx, c.cfg.Workers)
	return nil
}

// HasSynced reports whether every informer the component uses has synced.
func (c *Controller) HasSynced() bool { return c.informers.HasSynced() }

// Event handlers only route keys.

func (c *Controller) onSchedule(obj any) {
	if s, ok := obj.(*v1alpha1.SnapshotSchedule); ok {
		c.loop.Add(s.Namespace + "/" + s.Name)
	}
}

// onScheduled routes an event of a scheduled snapshot or group snapshot to
// its schedule, after Settle.
func (c *Controller) onScheduled(obj any) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	if name := m.GetLabels()[schedule.LabelSchedule]; name != "" {
		c.loop.AddAfter(m.GetNamespace()+"/"+name, c.cfg.Settle)
	}
}

// onClaim routes a claim's event to the schedules of its namespace (a
// claim may start or stop matching a selector, get bound, or finish a
// restore that held a snapshot), after Settle. Namespaces hold few
// schedules.
func (c *Controller) onClaim(obj any) {
	pvc, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok {
		return
	}
	objs, err := c.schedules.ByIndex(cache.NamespaceIndex, pvc.Namespace)
	if err != nil {
		return
	}
	for _, o := range objs {
		if s, ok := o.(*v1alpha1.SnapshotSchedule); ok {
			c.loop.AddAfter(s.Namespace+"/"+s.Name, c.cfg.Settle)
		}
	}
}

func scheduleIndex(obj any) ([]string, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, nil
	}
	if name := m.GetLabels()[schedule.LabelSchedule]; name != "" {
		return []string{m.GetNamespace() + "/" + name}, nil
	}
	return nil, nil
}

// restoreSourceIndex indexes a claim that is not bound yet by the snapshot
// it restores from: retention must keep that snapshot until the claim is
// bound (its data is copied by then).
func restoreSourceIndex(obj any) ([]string, error) {
	pvc, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok {
		return nil, nil
	}
	return schedule.RestoreSources(pvc), nil
}

// trimSnapshot keeps in the component's cache only what it reads of a
// scheduled VolumeSnapshot (its informer lists only those, by label): with
// schedules, snapshots number in the tens of thousands, and the binder
// (when it runs in the same process) keeps its own full copies.
func trimSnapshot(obj any) (any, error) {
	vs, ok := obj.(*snapv1.VolumeSnapshot)
	if !ok {
		return obj, nil
	}
	out := &snapv1.VolumeSnapshot{ObjectMeta: metav1.ObjectMeta{
		Name: vs.Name, Namespace: vs.Namespace, UID: vs.UID, ResourceVersion: vs.ResourceVersion,
		Labels: vs.Labels, CreationTimestamp: vs.CreationTimestamp, DeletionTimestamp: vs.DeletionTimestamp,
	}}
	if t, ok := vs.Annotations[schedule.AnnScheduledTime]; ok {
		out.Annotations = map[string]string{schedule.AnnScheduledTime: t}
	}
	out.Spec.Source = vs.Spec.Source
	if st := vs.Status; st != nil {
		out.Status = &snapv1.VolumeSnapshotStatus{ReadyToUse: st.ReadyToUse, Error: st.Error, CreationTime: st.CreationTime}
	}
	return out, nil
}

// groupsOf is the scheduled group snapshots of a schedule.
func (c *Controller) groupsOf(key string) []*groupv1.VolumeGroupSnapshot {
	if c.groupIndex == nil {
		return nil
	}
	return indexed[*groupv1.VolumeGroupSnapshot](c.groupIndex, key)
}

// snapshotsOf is the scheduled snapshots of a schedule.
func (c *Controller) snapshotsOf(key string) []*snapv1.VolumeSnapshot {
	return indexed[*snapv1.VolumeSnapshot](c.snapIndex, key)
}

// indexed is the objects of type T that the bySchedule index holds for key.
func indexed[T any](idx cache.Indexer, key string) []T {
	objs, _ := idx.ByIndex(bySchedule, key)
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		if v, ok := o.(T); ok {
			out = append(out, v)
		}
	}
	return out
}
