package binder

import (
	"context"
	"sync"
	"time"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	"k8s.io/klog/v2"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
)

// A VolumeGroupSnapshot can vanish with our finalizer on, as a
// VolumeSnapshot can (vanished.go): a DELETE racing the write that adds
// the finalizer removes it outright, its content is created a moment later
// or already holds the backend group, and nobody deletes that content. The
// group's delete event carries its last stored state; when that still
// holds our finalizer, the binder never released it, so the binder keeps
// that state and tears its content and members down as a deleted group's
// (tearDownAll) whenever the group's key is synced: on that event, and
// on each event of a content that names the group.

// VanishedGroup reports whether a deleted group's last stored state shows
// that the binder never released it.
func VanishedGroup(g *groupv1.VolumeGroupSnapshot) bool {
	return snapshot.HasFinalizer(g, snapshot.FinalizerGroupSnapshotBound)
}

// vanishedGroupSet keeps the last stored states of vanished groups, by
// namespace/name, for vanishedFor.
type vanishedGroupSet struct {
	mu    sync.Mutex
	byKey map[string][]vanishedGroup
}

type vanishedGroup struct {
	g  *groupv1.VolumeGroupSnapshot
	at time.Time
}

func (s *vanishedGroupSet) add(g *groupv1.VolumeGroupSnapshot, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byKey == nil {
		s.byKey = map[string][]vanishedGroup{}
	}
	for k, vs := range s.byKey { // forget what expired under other keys
		if last := vs[len(vs)-1]; now.Sub(last.at) > vanishedFor {
			delete(s.byKey, k)
		}
	}
	key := objKey(g.Namespace, g.Name)
	kept := s.byKey[key][:0]
	for _, v := range s.byKey[key] {
		if v.g.UID != g.UID {
			kept = append(kept, v)
		}
	}
	s.byKey[key] = append(kept, vanishedGroup{g: g, at: now})
}

// get returns the vanished groups of key, forgetting those older than
// vanishedFor.
func (s *vanishedGroupSet) get(key string, now time.Time) []*groupv1.VolumeGroupSnapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*groupv1.VolumeGroupSnapshot
	kept := s.byKey[key][:0]
	for _, v := range s.byKey[key] {
		if now.Sub(v.at) <= vanishedFor {
			kept = append(kept, v)
			out = append(out, v.g)
		}
	}
	if len(kept) == 0 {
		delete(s.byKey, key)
	} else {
		s.byKey[key] = kept
	}
	return out
}

// onGroupGone hears every group delete event: a group that vanished
// unreleased is remembered and its key queued.
func (c *Controller) onGroupGone(obj any) {
	g, ok := obj.(*groupv1.VolumeGroupSnapshot)
	if !ok {
		return
	}
	if releasedHere := c.releasedUIDs.take(g.UID); releasedHere || !VanishedGroup(g) || c.groupReleased(g) {
		return
	}
	c.vanishedGroups.add(g, time.Now())
	klog.Background().WithName("binder").Info("A VolumeGroupSnapshot vanished while it held our finalizer (a delete raced the finalizer's write); its content and members are torn down as if it had been deleted",
		"group", objKey(g.Namespace, g.Name), "uid", g.UID)
	c.groupLoop.AddUrgent(objKey(g.Namespace, g.Name)) // as onSnapshotGone
}

// groupReleased is released (vanished.go) for a group: the delete event of
// a group the binder released shows our finalizer and its
// deletionTimestamp, its content gone, being deleted or let go by then.
func (c *Controller) groupReleased(g *groupv1.VolumeGroupSnapshot) bool {
	if g.DeletionTimestamp == nil {
		return false
	}
	content, err := c.groupContents.Get(c.groupContentName(g))
	if err != nil {
		return true
	}
	return content.DeletionTimestamp != nil || !snapshot.HasFinalizer(content, snapshot.FinalizerGroupContentBound) ||
		content.Spec.VolumeGroupSnapshotRef.UID != g.UID ||
		retainedAndMarked(content.Spec.DeletionPolicy, content, snapshot.AnnGroupBeingDeleted)
}

// cleanVanishedGroups tears down the content and members of every vanished
// group of key other than live (the group of that name now, or nil).
func (c *Controller) cleanVanishedGroups(ctx context.Context, key string, live *groupv1.VolumeGroupSnapshot) error {
	for _, g := range c.vanishedGroups.get(key, time.Now()) {
		if live != nil && live.UID == g.UID {
			continue
		}
		if _, _, err := c.tearDownAll(ctx, c.group(g)); err != nil {
			return err
		}
	}
	return nil
}
