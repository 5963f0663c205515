package cluster

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// TestGarbageCollection deletes a ready group snapshot with each
// propagation policy the garbage collector knows, once while the
// garbage collector is down, and once removed by the delete race so that
// its members' owner is gone. Members are owned by their group
// (ownerReferences, no blockOwnerDeletion), and the binder deletes them
// with their group itself, as the community's does: with Orphan too (the
// garbage collector strips their owner references first), since the
// backend group goes with its member snapshots. Whatever the order in
// which the garbage collector and our binder act, the group, its content,
// its members and their contents end as the Delete policy says, the
// backend group is deleted once (DeleteVolumeGroupSnapshot), no member is
// deleted on its own (DeleteSnapshot), and nothing is stuck.
func TestGarbageCollection(t *testing.T) {
	for name, tc := range map[string]struct {
		policy    metav1.DeletionPropagation
		gcIsDown  bool
		ownerGone bool
	}{
		"background":             {policy: metav1.DeletePropagationBackground},
		"foreground":             {policy: metav1.DeletePropagationForeground},
		"orphan":                 {policy: metav1.DeletePropagationOrphan},
		"garbage collector down": {policy: metav1.DeletePropagationBackground, gcIsDown: true},
		"owner gone":             {ownerGone: true},
	} {
		t.Run(name, func(t *testing.T) { garbageCollection(t, tc.policy, tc.gcIsDown, tc.ownerGone) })
	}
}

// garbageCollection deletes a ready group of three members with policy,
// with the garbage collector stopped first when gcIsDown; with ownerGone
// the group is removed from etcd instead (the delete race's outcome): its
// members then point at an owner that is gone, the garbage collector
// deletes them, and our binder tears the group content down.
func garbageCollection(t *testing.T, policy metav1.DeletionPropagation, gcIsDown, ownerGone bool) {
	w := newWorld(t, oursPair, worldOptions{})
	ctx := context.Background()
	for _, c := range []string{"db-0", "db-1", "db-2"} {
		w.source(t, c)
	}
	w.label(t, "db-0", "db-1", "db-2")
	w.group(t, "db")
	g := w.Env.WaitGroupReady(t, w.NS, "db", 60*time.Second)
	groupContent := *g.Status.BoundVolumeGroupSnapshotContentName
	members := w.members(t, g.UID)
	if len(members) != 3 {
		t.Fatalf("members %v, want 3", members)
	}
	var memberContents []string
	for _, m := range members {
		c, _ := w.handleOf(t, m)
		memberContents = append(memberContents, c)
	}
	if gcIsDown {
		w.Env.StopControllerManager()
		t.Cleanup(func() {
			if err := w.Env.StartControllerManager(ctx); err != nil {
				t.Errorf("restart kube-controller-manager: %v", err)
			}
		})
	}
	start := time.Now()
	switch {
	case ownerGone:
		policy = "owner gone"
		if n, err := w.Env.RemoveFromEtcd(ctx, framework.GroupSnapshotKey(w.NS, "db")); err != nil || n != 1 {
			t.Fatalf("remove group db from etcd: %d keys, %v", n, err)
		}
	default:
		if err := w.Env.Snap.GroupsnapshotV1().VolumeGroupSnapshots(w.NS).Delete(ctx, "db", metav1.DeleteOptions{PropagationPolicy: &policy}); err != nil {
			t.Fatal(err)
		}
	}
	w.Env.WaitGroupGone(t, w.NS, "db", 60*time.Second)
	t.Logf("%s: group gone after %v", policy, time.Since(start).Round(10*time.Millisecond))
	if gcIsDown {
		// The binder does not wait for the garbage collector: the members
		// go while it is down.
		for _, m := range members {
			w.Env.WaitSnapshotGone(t, w.NS, m, 60*time.Second)
		}
		if err := w.Env.StartControllerManager(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range members {
		w.Env.WaitSnapshotGone(t, w.NS, m, 60*time.Second)
	}
	w.Env.WaitGroupContentGone(t, groupContent, 30*time.Second)
	for _, c := range memberContents {
		w.Env.WaitContentGone(t, c, 30*time.Second)
	}
	t.Logf("%s: members, contents and group content gone after %v", policy, time.Since(start).Round(10*time.Millisecond))
	w.invariants(t)
	w.groupCallsOnce(t)
	if b, gs := w.Drv.Created(t), w.Drv.Groups(t); len(b) != 0 || len(gs) != 0 {
		t.Fatalf("driver still holds snapshots %+v, groups %+v", b, gs)
	}
}

// members are the names of the snapshots owned by the group of uid.
func (w *world) members(t *testing.T, uid types.UID) []string {
	t.Helper()
	list, err := w.Env.Snap.SnapshotV1().VolumeSnapshots(w.NS).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, vs := range list.Items {
		for _, o := range vs.OwnerReferences {
			if o.UID == uid {
				out = append(out, vs.Name)
			}
		}
	}
	return out
}

// groupCallsOnce: every backend group was deleted at most once and no
// member was deleted on its own.
func (w *world) groupCallsOnce(t *testing.T) {
	t.Helper()
	groups := map[string]int{}
	for _, e := range w.Drv.CallLog(t, 0).Entries {
		switch {
		case e.Method == "DeleteVolumeGroupSnapshot" && e.Code == "OK":
			groups[e.GroupSnapshotID]++
		case e.Method == "DeleteSnapshot" && e.GroupSnapshotID != "":
			t.Errorf("DeleteSnapshot of member %s of group %s", e.SnapshotID, e.GroupSnapshotID)
		}
	}
	for id, n := range groups {
		if n > 1 {
			t.Errorf("DeleteVolumeGroupSnapshot of %s answered OK %d times", id, n)
		}
	}
}
