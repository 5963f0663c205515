package binder

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/sync/testkit"
)

func TestVanished(t *testing.T) {
	ours := testkit.Finalizers(snapshot.FinalizerSnapshotAsSource, snapshot.FinalizerSnapshotBound)
	member := testkit.Snapshot("m", ours)
	member.OwnerReferences = []metav1.OwnerReference{snapshot.GroupOwnerReference(testkit.GroupSnapshot("g"))}
	cases := map[string]struct {
		vs   *snapv1.VolumeSnapshot
		want bool
	}{
		"our finalizers on, no deletionTimestamp: the delete raced them": {testkit.Snapshot("s", ours), true},
		"our finalizers on while deleting":                               {testkit.Snapshot("s", ours, testkit.Deleted()), true},
		"only the source finalizer (Retain)":                             {testkit.Snapshot("s", testkit.Finalizers(snapshot.FinalizerSnapshotAsSource)), true},
		"released by the binder":                                         {testkit.Snapshot("s", testkit.Finalizers("other.io/keep")), false},
		"never protected":                                                {testkit.Snapshot("s"), false},
		"a group's member is left to its group":                          {member, false},
	}
	for name, tc := range cases {
		if got := Vanished(tc.vs); got != tc.want {
			t.Errorf("%s: Vanished = %v, want %v", name, got, tc.want)
		}
	}
}

// TestContentOfAVanishedSnapshotIsTornDown removes a protected snapshot
// from the fake API server's store, as the real one does when a delete
// races the finalizers' write: the content is marked
// and, with Delete, deleted, whether it exists when the snapshot goes or
// is created after.
func TestContentOfAVanishedSnapshotIsTornDown(t *testing.T) {
	ours := testkit.Finalizers(snapshot.FinalizerSnapshotAsSource, snapshot.FinalizerSnapshotBound)
	cases := map[string]struct {
		retain, createdAfter bool
		writes               []string
	}{
		"Delete content already there":  {writes: []string{"patch volumesnapshotcontents", "delete volumesnapshotcontents"}},
		"Delete content created after":  {createdAfter: true, writes: []string{"patch volumesnapshotcontents", "delete volumesnapshotcontents"}},
		"Retain content is only marked": {retain: true, writes: []string{"patch volumesnapshotcontents"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			vs := testkit.Snapshot("s1", ours, testkit.BoundTo(snapshot.ContentNameFor("uid-s1")))
			opts := []testkit.ContentOption{testkit.Ready("h"), testkit.Finalizers(snapshot.FinalizerContentBound)}
			if tc.retain {
				opts = append(opts, testkit.Retain())
			}
			content := newContent(vs, opts...)
			objs := []runtime.Object{vs}
			if !tc.createdAfter {
				objs = append(objs, content)
			}
			h := newHarness(t, objs...)
			ctx := context.Background()
			if err := h.api.Snap.Tracker().Delete(snapv1.SchemeGroupVersion.WithResource("volumesnapshots"), testNS, "s1"); err != nil {
				t.Fatal(err)
			}
			waitUntil(t, func() bool { return h.c.vanished.has(vs.UID) })
			if tc.createdAfter {
				if _, err := h.api.Snap.SnapshotV1().VolumeSnapshotContents().Create(ctx, content, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				waitUntil(t, func() bool { _, err := h.c.contents.Get(content.Name); return err == nil })
			}
			h.api.ClearActions()
			if _, err := h.c.syncContent(ctx, content.Name); err != nil {
				t.Fatal(err)
			}
			if got := h.writes(); !slices.Equal(got, tc.writes) {
				t.Fatalf("writes = %v, want %v", got, tc.writes)
			}
			if c := h.api.Content(content.Name); c != nil && !snapshot.HasAnnotation(c, snapshot.AnnBeingDeleted, snapshot.ValueYes) {
				t.Error("the content lacks the being-deleted mark")
			}
		})
	}
}

func TestContentOfAReleasedSnapshotIsLeftAlone(t *testing.T) {
	vs := testkit.Snapshot("s1", testkit.BoundTo(snapshot.ContentNameFor("uid-s1")))
	content := newContent(vs, testkit.Ready("h"), testkit.Finalizers(snapshot.FinalizerContentBound))
	h := newHarness(t, vs, content)
	ctx := context.Background()
	if err := h.api.Snap.SnapshotV1().VolumeSnapshots(testNS).Delete(ctx, "s1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, func() bool { _, err := h.c.snapshots.VolumeSnapshots(testNS).Get("s1"); return err != nil })
	h.api.ClearActions()
	if _, err := h.c.syncContent(ctx, content.Name); err != nil {
		t.Fatal(err)
	}
	if got := h.writes(); len(got) != 0 {
		t.Fatalf("writes = %v for the content of a snapshot that was not protected", got)
	}
}

// TestSweepFindsTheContentsOfSnapshotsGoneUnheard: a process that heard a
// vanish and died before tearing the content down leaves a Delete content
// made for a snapshot the API server no longer holds; the next binder finds
// it when it starts and tears it down. Nothing else is taken for one.
func TestSweepFindsTheContentsOfSnapshotsGoneUnheard(t *testing.T) {
	vs := testkit.Snapshot("s1", testkit.BoundTo(snapshot.ContentNameFor("uid-s1")))
	other := testkit.Snapshot("s1")
	other.UID = "uid-other"
	cases := map[string]struct {
		objs []runtime.Object
		torn bool
	}{
		"snapshot gone":                          {objs: []runtime.Object{newContent(vs, testkit.Ready("h"))}, torn: true},
		"snapshot gone, not cut yet":             {objs: []runtime.Object{newContent(vs)}, torn: true},
		"a new snapshot of the same name":        {objs: []runtime.Object{other, newContent(vs, testkit.Ready("h"))}, torn: true},
		"snapshot there":                         {objs: []runtime.Object{vs, newContent(vs, testkit.Ready("h"))}},
		"Retain content":                         {objs: []runtime.Object{newContent(vs, testkit.Ready("h"), testkit.Retain())}},
		"pre-provisioned (copied) content":       {objs: []runtime.Object{newContent(vs, testkit.PreProvisioned("h1"))}},
		"content already marked being-deleted":   {objs: []runtime.Object{newContent(vs, testkit.Ready("h"), testkit.Marked(snapshot.AnnBeingDeleted))}},
		"content of a name not made by a binder": {objs: []runtime.Object{newContent(vs, testkit.Named("mine"), testkit.Ready("h"))}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, tc.objs...)
			h.c.sweepVanished(context.Background())
			if got := h.c.vanished.has(vs.UID); got != tc.torn {
				t.Fatalf("taken for a vanished snapshot's content: %v, want %v", got, tc.torn)
			}
		})
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting for the informers")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestReleasedSnapshotIsNotVanished: the delete event of a snapshot the
// binder released carries its last stored state (our finalizers and its
// deletionTimestamp); with its content gone or let go, that is no vanish,
// while a content still held is torn down as a vanished snapshot's.
func TestReleasedSnapshotIsNotVanished(t *testing.T) {
	ours := testkit.Finalizers(snapshot.FinalizerSnapshotAsSource, snapshot.FinalizerSnapshotBound)
	cases := map[string]struct {
		content *snapv1.VolumeSnapshotContent // nil: gone
		deleted bool                          // the snapshot's last state has a deletionTimestamp
		want    bool
	}{
		"released: content gone":        {deleted: true, want: false},
		"released: content let go":      {deleted: true, content: newContent(testkit.Snapshot("s1"), testkit.Ready("h"), testkit.Finalizers()), want: false},
		"finalizers removed by someone": {deleted: true, content: newContent(testkit.Snapshot("s1"), testkit.Ready("h"), testkit.Finalizers(snapshot.FinalizerContentBound)), want: true},
		// A Retain content keeps its finalizer; the mark says a binder
		// released the snapshot.
		"released: Retain content marked": {deleted: true, content: newContent(testkit.Snapshot("s1"), testkit.Ready("h"), testkit.Retain(), testkit.Marked(snapshot.AnnBeingDeleted)), want: false},
		"Retain content unmarked":         {deleted: true, content: newContent(testkit.Snapshot("s1"), testkit.Ready("h"), testkit.Retain()), want: true},
		"a delete raced the finalizers":   {content: newContent(testkit.Snapshot("s1"), testkit.Ready("h"), testkit.Finalizers(snapshot.FinalizerContentBound)), want: true},
		"a delete raced, content not yet": {want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var objs []runtime.Object
			if tc.content != nil {
				objs = append(objs, tc.content)
			}
			h := newHarness(t, objs...)
			opts := []testkit.SnapshotOption{ours, testkit.BoundTo(snapshot.ContentNameFor("uid-s1"))}
			if tc.deleted {
				opts = append(opts, testkit.Deleted())
			}
			vs := testkit.Snapshot("s1", opts...)
			h.c.onSnapshotGone(vs)
			if got := h.c.vanished.has(vs.UID); got != tc.want {
				t.Fatalf("remembered as vanished = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestContentOfAVanishedGroupIsTornDown removes a protected group from
// the fake API server's store, as the real one does when a delete races
// the finalizer's write (found by the fault suite: a group content and its
// members' backend snapshots outlived their group): the group content is
// marked and, with Delete, deleted, whether it exists when the group goes
// or is created after; its members are deleted; a group of the same name
// created since is left alone.
func TestContentOfAVanishedGroupIsTornDown(t *testing.T) {
	cases := map[string]struct {
		retain, createdAfter, recreated bool
		writes                          []string
	}{
		"Delete content already there":  {writes: []string{"patch volumegroupsnapshotcontents", "delete volumegroupsnapshotcontents", "delete volumesnapshots"}},
		"Delete content created after":  {createdAfter: true, writes: []string{"patch volumegroupsnapshotcontents", "delete volumegroupsnapshotcontents"}},
		"Retain content is only marked": {retain: true, writes: []string{"patch volumegroupsnapshotcontents", "delete volumesnapshots"}},
		"a new group of the same name":  {recreated: true, writes: []string{"patch volumegroupsnapshotcontents", "delete volumegroupsnapshotcontents", "delete volumesnapshots"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := testkit.GroupSnapshot("g", testkit.Finalizers(snapshot.FinalizerGroupSnapshotBound))
			opts := []testkit.GroupContentOption{testkit.RefTo(testNS, "g", g.UID)}
			if tc.retain {
				opts = append(opts, testkit.Retain())
			}
			content := testkit.GroupContent(snapshot.GroupContentNameFor(g.UID), opts...)
			objs := []runtime.Object{g}
			if !tc.createdAfter {
				member := testkit.Snapshot("m", testkit.Finalizers(snapshot.FinalizerSnapshotInGroup))
				member.OwnerReferences = []metav1.OwnerReference{snapshot.GroupOwnerReference(g)}
				objs = append(objs, content, member)
			}
			h := newHarnessWith(t, func(c *Config) { c.Groups = true }, objs...)
			ctx := context.Background()
			if err := h.api.Snap.Tracker().Delete(testkit.GroupSnapshotsGVR, testNS, "g"); err != nil {
				t.Fatal(err)
			}
			waitUntil(t, func() bool { return len(h.c.vanishedGroups.get(testNS+"/g", time.Now())) == 1 })
			if tc.createdAfter {
				if _, err := h.api.Snap.GroupsnapshotV1().VolumeGroupSnapshotContents().Create(ctx, content, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				waitUntil(t, func() bool { _, err := h.c.groupContents.Get(content.Name); return err == nil })
			}
			if tc.recreated {
				again := g.DeepCopy()
				again.UID, again.Finalizers, again.ResourceVersion = types.UID("uid-g2"), nil, ""
				if _, err := h.api.Snap.GroupsnapshotV1().VolumeGroupSnapshots(testNS).Create(ctx, again, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				waitUntil(t, func() bool {
					cur, err := h.c.groups.VolumeGroupSnapshots(testNS).Get("g")
					return err == nil && cur.UID == "uid-g2"
				})
			}
			h.api.ClearActions()
			if err := h.c.cleanVanishedGroups(ctx, testNS+"/g", h.c.liveGroup(testNS, "g")); err != nil {
				t.Fatal(err)
			}
			if got := h.writes(); !slices.Equal(got, tc.writes) {
				t.Fatalf("writes = %v, want %v", got, tc.writes)
			}
		})
	}
}

func TestVanishedGroup(t *testing.T) {
	held := testkit.GroupSnapshot("g", testkit.Finalizers(snapshot.FinalizerGroupSnapshotBound))
	released := testkit.GroupSnapshot("g", testkit.Finalizers("other.io/keep"))
	if !VanishedGroup(held) || VanishedGroup(released) {
		t.Fatalf("VanishedGroup(held) = %v, VanishedGroup(released) = %v", VanishedGroup(held), VanishedGroup(released))
	}
}

func TestVanishedGroupsExpire(t *testing.T) {
	var s vanishedGroupSet
	now := time.Now()
	old, fresh := testkit.GroupSnapshot("old"), testkit.GroupSnapshot("fresh")
	s.add(old, now.Add(-2*vanishedFor))
	s.add(fresh, now)
	if _, ok := s.byKey[testNS+"/old"]; ok {
		t.Error("an expired group is still kept after another was added")
	}
	if got := s.get(testNS+"/fresh", now); len(got) != 1 || got[0].UID != "uid-fresh" {
		t.Errorf("get(fresh) = %v", got)
	}
	if got := s.get(testNS+"/fresh", now.Add(2*vanishedFor)); len(got) != 0 {
		t.Errorf("get after expiry = %v", got)
	}
}

// TestReleasedGroupIsNotVanished: a released group's delete event shows our
// finalizer and its deletionTimestamp; with its content gone or let go that
// is no vanish, while a content still held is torn down.
func TestReleasedGroupIsNotVanished(t *testing.T) {
	held := testkit.GroupContent(snapshot.GroupContentNameFor("uid-g"), testkit.RefTo(testNS, "g", "uid-g"))
	letGo := testkit.GroupContent(held.Name, testkit.RefTo(testNS, "g", "uid-g"), testkit.Finalizers())
	cases := map[string]struct {
		content *groupv1.VolumeGroupSnapshotContent
		deleted bool
		want    bool
	}{
		"released: content gone":       {deleted: true, want: false},
		"released: content let go":     {deleted: true, content: letGo, want: false},
		"finalizer removed by someone": {deleted: true, content: held, want: true},
		"released: Retain content marked": {deleted: true, want: false,
			content: testkit.GroupContent(held.Name, testkit.RefTo(testNS, "g", "uid-g"), testkit.Retain(), testkit.Marked(snapshot.AnnGroupBeingDeleted))},
		"a delete raced the finalizer":   {content: held, want: true},
		"a delete raced, no content yet": {want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var objs []runtime.Object
			if tc.content != nil {
				objs = append(objs, tc.content.DeepCopy())
			}
			h := newHarnessWith(t, func(c *Config) { c.Groups = true }, objs...)
			opts := []testkit.GroupSnapshotOption{testkit.Finalizers(snapshot.FinalizerGroupSnapshotBound)}
			if tc.deleted {
				opts = append(opts, testkit.Deleted())
			}
			g := testkit.GroupSnapshot("g", opts...)
			h.c.onGroupGone(g)
			if got := len(h.c.vanishedGroups.get(objKey(testNS, "g"), time.Now())) > 0; got != tc.want {
				t.Fatalf("remembered as vanished = %v, want %v", got, tc.want)
			}
		})
	}
}

// A snapshot this binder released is no vanish, whatever the cache shows
// of its content when the delete event comes: a Retain content keeps its
// finalizer, and the mark the release put on it comes through another
// watch, possibly after the snapshot's delete event (found by
// test/e2e/csiside's Retain test: the binder later deleted the content the
// admin switched to Delete, racing the admin's own delete). Another
// finalizer keeps the snapshot in the fake API server after the release,
// so that only the event below is its delete event.
func TestOwnReleaseIsNotVanished(t *testing.T) {
	ours := testkit.Finalizers(snapshot.FinalizerSnapshotAsSource, snapshot.FinalizerSnapshotBound, "example.com/keep")
	vs := testkit.Snapshot("s1", ours, testkit.Deleted(), testkit.BoundTo(snapshot.ContentNameFor("uid-s1")))
	content := newContent(vs, testkit.Ready("h"), testkit.Retain())
	h := newHarness(t, vs, content)
	if _, err := h.syncSnapshot("s1"); err != nil {
		t.Fatal(err)
	}
	if got, want := h.writes(), []string{"patch volumesnapshotcontents", "patch volumesnapshots"}; !slices.Equal(got, want) {
		t.Fatalf("writes = %v, want the mark and the release %v", got, want)
	}
	if !h.c.releasedUIDs.has(vs.UID) {
		t.Fatal("the release is not remembered until the snapshot's delete event")
	}
	// The delete event carries the last stored state: our finalizers.
	h.c.onSnapshotGone(vs)
	if h.c.vanished.has(vs.UID) {
		t.Fatal("the snapshot this binder released is remembered as vanished")
	}
	if h.c.releasedUIDs.has(vs.UID) {
		t.Fatal("the release is still remembered after the delete event")
	}
}

// uidMemory forgets a UID after vanishedFor, and sweeps the old ones out
// as it grows.
func TestUIDMemoryForgets(t *testing.T) {
	var m uidMemory
	now := time.Now()
	m.add("old", now.Add(-2*vanishedFor))
	m.add("new", now)
	if m.has("old") || !m.has("new") || m.has("") {
		t.Fatalf("has: old %v, new %v, empty %v; want false, true, false", m.has("old"), m.has("new"), m.has(""))
	}
	for i := range 200 {
		m.add(types.UID(fmt.Sprint(i)), now)
	}
	if _, kept := m.uids["old"]; kept {
		t.Error("an expired UID survived the sweeps of 200 adds")
	}
	if !m.take("new") || m.take("new") {
		t.Error("take: want true once, then false")
	}
}
