package binder

import (
	"context"
	"sync"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/sync/workloop"
)

// A VolumeSnapshot can vanish with our finalizers on. kube-apiserver
// (v1.37 included; upstream kubernetes/kubernetes#77988) removes an object
// outright when a DELETE without preconditions races a write that adds a
// finalizer: the delete decided "no finalizers, remove now" on a read
// taken before our finalizers were stored. Nobody then tears the content
// down: it is created a moment later or already holds a backend snapshot,
// and a content whose snapshot is missing is otherwise never deleted (it
// may have been copied from another cluster). The watch's delete event
// carries the object's last stored state; when that state still holds one
// of our finalizers, the binder never released it, so the binder
// remembers its UID and tears the content bound to that UID down as a
// deleted snapshot's content, whenever that content shows up.

// A vanish heard by a process that dies before it tears the content down
// (a kill a few milliseconds after the event) is heard by nobody else: the
// next process lists a content and no snapshot. So a starting binder looks
// for what such a vanish leaves (sweepVanished): a Delete content a binder
// made for a snapshot (dynamic, named after the snapshot's UID), neither
// deleted nor marked, whose snapshot the API server no longer holds. A
// binder releases a snapshot only after its Delete content is gone or being
// deleted, so no binder let that snapshot go; it is torn down as a vanished
// snapshot's. A pre-provisioned content (one copied from another cluster
// included) is never taken for one.

// vanishedFor is how long a vanished snapshot's UID is remembered: far
// longer than a content create takes to follow its snapshot's finalizers.
const vanishedFor = time.Hour

// Vanished reports whether a deleted snapshot's last stored state shows
// that the binder never released it: it still held one of our finalizers.
// A group's member is left to its group, which deletes the members'
// contents with the group content, never one by one.
func Vanished(vs *snapv1.VolumeSnapshot) bool {
	if isMember(vs) || snapshot.HasFinalizer(vs, snapshot.FinalizerSnapshotInGroup) {
		return false
	}
	return snapshot.HasFinalizer(vs, snapshot.FinalizerSnapshotBound) ||
		snapshot.HasFinalizer(vs, snapshot.FinalizerSnapshotAsSource)
}

// onSnapshotGone hears every snapshot delete event: a snapshot that
// vanished unreleased is remembered and its content queued.
func (c *Controller) onSnapshotGone(obj any) {
	vs, ok := obj.(*snapv1.VolumeSnapshot)
	if !ok {
		return
	}
	c.goneContents.take(vs.UID)
	if releasedHere := c.releasedUIDs.take(vs.UID); releasedHere || !Vanished(vs) || c.released(vs) {
		return
	}
	c.vanished.add(vs.UID, time.Now())
	klog.Background().WithName("binder").Info("A VolumeSnapshot vanished while it held our finalizers (a delete raced the finalizers' write); its content is torn down as if the snapshot had been deleted",
		"snapshot", objKey(vs.Namespace, vs.Name), "uid", vs.UID, "content", contentNameOf(vs))
	// Ahead of the queue: the memory of the vanish dies with this process,
	// so the content is torn down before a backlog (a restart lists every
	// content) is worked through.
	c.contentLoop.AddUrgent(contentNameOf(vs))
}

// released reports whether a deleted snapshot that still shows our
// finalizers was in fact released after its content was settled: when the
// last finalizer goes from an object being deleted, kube-apiserver deletes
// the object as last stored, so the delete event of every snapshot the
// binder released shows our finalizers and its deletionTimestamp. A
// release by this process is remembered (Controller.releasedUIDs, onSnapshotGone);
// for one by an earlier process the content tells: gone, being deleted, let go,
// or a Retain content with our being-deleted mark, which the binder puts
// on right before it releases the snapshot and keeps. A content still
// held without that means someone else removed our finalizers, and the
// content is torn down as a vanished snapshot's.
func (c *Controller) released(vs *snapv1.VolumeSnapshot) bool {
	if vs.DeletionTimestamp == nil {
		return false
	}
	content, err := c.contents.Get(contentNameOf(vs))
	if err != nil {
		return true
	}
	return content.DeletionTimestamp != nil || !snapshot.HasFinalizer(content, snapshot.FinalizerContentBound) ||
		content.Spec.VolumeSnapshotRef.UID != vs.UID ||
		retainedAndMarked(content.Spec.DeletionPolicy, content, snapshot.AnnBeingDeleted)
}

// retainedAndMarked: a Retain content with the kind's being-deleted mark,
// what a release leaves of a Retain content.
func retainedAndMarked(policy snapv1.DeletionPolicy, content metav1.Object, mark string) bool {
	return policy == snapv1.VolumeSnapshotContentRetain && snapshot.HasAnnotation(content, mark, snapshot.ValueYes)
}

// uidMemory remembers UIDs for vanishedFor: the snapshots that vanished
// (Controller.vanished); the snapshots being deleted whose content is gone
// (Controller.goneContents, gonecontent.go); and the snapshots and groups
// this process released, from the release until their delete events
// (Controller.releasedUIDs), so that an event is not taken for a vanish
// whatever the content's cached copy shows: a Retain content keeps its
// finalizer, and its mark may reach the cache after the subject's delete
// event (two watches). The old UIDs go as it grows: amortized O(1) per add.
type uidMemory struct {
	mu      sync.Mutex
	uids    map[types.UID]time.Time
	sweepAt int // the size at which the next add forgets the old UIDs
}

func (m *uidMemory) add(uid types.UID, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.uids == nil {
		m.uids = map[types.UID]time.Time{}
	}
	if len(m.uids) >= m.sweepAt {
		for u, at := range m.uids {
			if now.Sub(at) > vanishedFor {
				delete(m.uids, u)
			}
		}
		m.sweepAt = max(64, 2*len(m.uids))
	}
	m.uids[uid] = now
}

func (m *uidMemory) has(uid types.UID) bool {
	if uid == "" {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	at, ok := m.uids[uid]
	return ok && time.Since(at) <= vanishedFor
}

func (m *uidMemory) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.uids)
}

// take reports whether uid is remembered, and forgets it.
func (m *uidMemory) take(uid types.UID) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	at, ok := m.uids[uid]
	delete(m.uids, uid)
	return ok && time.Since(at) <= vanishedFor
}

// orphaned tears down the content of a vanished snapshot, as deleting does
// for a deleted one.
func (c *Controller) orphaned(ctx context.Context, content *snapv1.VolumeSnapshotContent) (workloop.Result, error) {
	if c.cfg.Writer.Stale(content) {
		return workloop.Result{}, nil // our write is on its way back as an event
	}
	ref := content.Spec.VolumeSnapshotRef
	logger := klog.FromContext(ctx).WithValues("snapshot", objKey(ref.Namespace, ref.Name), "uid", ref.UID)
	if err := c.tearDown(ctx, logger, snap{c: c}.bindTo(content)); err != nil && !apierrors.IsNotFound(err) {
		return workloop.Result{}, err
	}
	return workloop.Result{}, nil // gone already: nothing left to tear down
}

// sweepVanished finds, once the caches have synced, the contents of
// snapshots that vanished while no binder was left to hear it, and queues
// them as vanished snapshots' contents.
func (c *Controller) sweepVanished(ctx context.Context) {
	contents, err := c.contents.List(labels.Everything())
	if err != nil {
		return
	}
	logger := klog.FromContext(ctx)
	for _, content := range contents {
		if !madeForASnapshot(content) {
			continue
		}
		ref := content.Spec.VolumeSnapshotRef
		if vs, err := c.snapshots.VolumeSnapshots(ref.Namespace).Get(ref.Name); err == nil && vs.UID == ref.UID {
			continue
		}
		live, err := c.cfg.Snap.SnapshotV1().VolumeSnapshots(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		switch {
		case err == nil && live.UID == ref.UID:
			continue // the cache lags
		case err != nil && !apierrors.IsNotFound(err):
			logger.Error(err, "Cannot tell whether the snapshot of a content is gone", "content", content.Name)
			continue
		}
		c.vanished.add(ref.UID, time.Now())
		logger.Info("A VolumeSnapshot is gone while its Delete content lives, unreleased by any binder (it vanished while no binder could hear it); its content is torn down as if the snapshot had been deleted",
			"snapshot", objKey(ref.Namespace, ref.Name), "uid", ref.UID, "content", content.Name)
		c.contentLoop.AddUrgent(content.Name)
	}
}

// madeForASnapshot reports a Delete content that a binder made for a
// snapshot and that nobody has begun to delete.
func madeForASnapshot(content *snapv1.VolumeSnapshotContent) bool {
	ref := content.Spec.VolumeSnapshotRef
	return content.DeletionTimestamp == nil && !snapshot.HasAnnotation(content, snapshot.AnnBeingDeleted, snapshot.ValueYes) &&
		content.Spec.DeletionPolicy == snapv1.VolumeSnapshotContentDelete && content.Spec.Source.VolumeHandle != nil &&
		ref.UID != "" && content.Name == snapshot.ContentNameFor(ref.UID) && !isGroupMemberContent(content)
}

func isGroupMemberContent(content *snapv1.VolumeSnapshotContent) bool {
	return content.Annotations[snapshot.AnnVolumeGroupSnapshotHandle] != "" ||
		(content.Status != nil && content.Status.VolumeGroupSnapshotHandle != nil)
}
