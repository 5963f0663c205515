package binder

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/sync/testkit"
)

// A group deleted with Orphan propagation: the garbage collector strips
// the members' owner references while the binder deletes them (found by
// test/e2e/cluster's TestGarbageCollection, one member of three left). A
// member is still found by the name the group's UID and its volume give
// it; a snapshot of the same namespace that is no member is not.
func TestGroupMembersSurviveStrippedOwnerReferences(t *testing.T) {
	g := testkit.GroupSnapshot("g", testkit.Finalizers(snapshot.FinalizerGroupSnapshotBound))
	content := testkit.GroupContent(snapshot.GroupContentNameFor(g.UID), testkit.RefTo(testNS, "g", g.UID),
		testkit.GroupStatus(testkit.GroupCut("group-1", true, testkit.Member("vol-1", "s-1", true), testkit.Member("vol-2", "s-2", true))))
	owned := testkit.Snapshot(snapshot.MemberSnapshotName(g.UID, "vol-1"))
	owned.OwnerReferences = []metav1.OwnerReference{snapshot.GroupOwnerReference(g)}
	stripped := testkit.Snapshot(snapshot.MemberSnapshotName(g.UID, "vol-2"))
	other := testkit.Snapshot("not-a-member")
	h := newHarnessWith(t, func(c *Config) { c.Groups = true }, []runtime.Object{g, content, owned, stripped, other}...)
	waitUntil(t, func() bool { _, err := h.c.groupContents.Get(content.Name); return err == nil })

	var got []string
	for _, vs := range h.c.groupMembers(g) {
		got = append(got, vs.Name)
	}
	slices.Sort(got)
	want := []string{owned.Name, stripped.Name}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("members = %v, want %v", got, want)
	}
}

// A dynamic group whose members cannot be created: the failure is shown on
// the group (status.error, a Warning event, not ready) and the sync fails so
// the loop retries it with its backoff; the retry makes the member.
func TestGroupMemberCreateFailureIsShown(t *testing.T) {
	g := testkit.GroupSnapshot("g", testkit.Finalizers(snapshot.FinalizerGroupSnapshotBound))
	content := testkit.GroupContent(snapshot.GroupContentNameFor(g.UID), testkit.RefTo(testNS, "g", g.UID),
		testkit.GroupStatus(testkit.GroupCut("group-1", true, testkit.Member("vol-1", "s-1", true))))
	h := newHarnessWith(t, func(c *Config) { c.Groups = true }, []runtime.Object{g, content}...)
	waitUntil(t, func() bool { _, err := h.c.groupContents.Get(content.Name); return err == nil })
	h.api.Inject(testkit.Fault{Verb: "create", Resource: "volumesnapshots", Err: errors.New("etcd is away")})

	ctx := context.Background()
	if _, err := h.c.syncGroup(ctx, testNS+"/g"); err == nil || !strings.Contains(err.Error(), "etcd is away") {
		t.Fatalf("sync error = %v, want the member's create error", err)
	}
	st := h.api.GroupSnapshot(testNS, "g").Status
	if st == nil || st.Error == nil || !strings.Contains(*st.Error.Message, "cannot create the member snapshots of the group: ") ||
		st.ReadyToUse == nil || *st.ReadyToUse {
		t.Fatalf("status = %+v, want the member error and not ready", st)
	}
	if ev := h.events(); len(ev) != 1 || !strings.Contains(ev[0], "Warning "+snapshot.ReasonGroupSnapshotMemberFailed) {
		t.Errorf("events = %v, want one %s", ev, snapshot.ReasonGroupSnapshotMemberFailed)
	}
	// The retry, once the cache holds the status write (until then a sync
	// waits for its event).
	waitUntil(t, func() bool {
		if _, err := h.c.syncGroup(ctx, testNS+"/g"); err != nil {
			t.Fatalf("retry: %v", err)
		}
		return h.api.Snapshot(testNS, snapshot.MemberSnapshotName(g.UID, "vol-1")) != nil
	})
}

// A member whose owner reference the garbage collector stripped, and whose
// deletion waits for its group, must hear the group go: it is indexed
// under the group its status names (found by test/e2e/cluster's
// TestGarbageCollection/orphan, a member left when its sync came between
// the group's delete and its release).
func TestStrippedMemberIsIndexedUnderItsGroup(t *testing.T) {
	g := testkit.GroupSnapshot("g", testkit.Finalizers(snapshot.FinalizerGroupSnapshotBound))
	member := testkit.Snapshot(snapshot.MemberSnapshotName(g.UID, "vol-1"), testkit.Deleted(),
		testkit.Finalizers(snapshot.FinalizerSnapshotBound, snapshot.FinalizerSnapshotInGroup))
	member.Status = &snapv1.VolumeSnapshotStatus{VolumeGroupSnapshotName: ptr.To("g")}
	other := testkit.Snapshot("not-a-member")
	h := newHarnessWith(t, func(c *Config) { c.Groups = true }, []runtime.Object{g, member, other}...)

	objs, err := h.c.snapIndex.ByIndex(indexByGroup, testNS+"/g")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 || objs[0].(*snapv1.VolumeSnapshot).Name != member.Name {
		t.Fatalf("indexed under the group: %v, want only %s", objs, member.Name)
	}
	// While the group lives, the member's deletion waits for it.
	if _, err := h.syncSnapshot(member.Name); err != nil {
		t.Fatal(err)
	}
	if ev := h.events(); len(ev) != 1 || !strings.Contains(ev[0], "is a member of group snapshot g") {
		t.Fatalf("events = %v, want the member's deletion to wait for its group", ev)
	}
}

// A claim that restores from a member whose owner reference the garbage
// collector stripped wakes the member's group (which waits, being deleted,
// for claims restoring from its members): the group is the one the
// member's status names, as in the by-group index.
func TestClaimOfStrippedMemberQueuesItsGroup(t *testing.T) {
	member := testkit.Snapshot("member")
	member.Status = &snapv1.VolumeSnapshotStatus{VolumeGroupSnapshotName: ptr.To("g")}
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "restore", Namespace: testNS},
		Spec: corev1.PersistentVolumeClaimSpec{DataSource: &corev1.TypedLocalObjectReference{
			APIGroup: ptr.To(snapshot.GroupName), Kind: snapshot.KindSnapshot, Name: member.Name}},
	}
	h := newHarnessWith(t, func(c *Config) { c.Groups = true }, member)
	if n := h.c.groupLoop.Len(); n != 0 {
		t.Fatalf("group loop holds %d keys before the claim, want 0 (no group exists)", n)
	}
	h.c.onPVC(claim)
	if n := h.c.groupLoop.Len(); n != 1 {
		t.Fatalf("group loop holds %d keys after the claim's event, want 1 (%s/g)", n, testNS)
	}
}

// A claim's event wakes the groups of its namespace that wait for a
// content, and a group class's event those of every namespace
// (enqueueWaitingGroups queues what this index holds under the namespace
// or allNamespaces); the bound groups a schedule keeps are not in it.
func TestUnboundGroupsAreIndexedByNamespace(t *testing.T) {
	objs := []runtime.Object{testkit.GroupSnapshot("waiting")}
	for _, name := range []string{"kept-1", "kept-2", "kept-3"} {
		g := testkit.GroupSnapshot(name)
		g.Status = &groupv1.VolumeGroupSnapshotStatus{BoundVolumeGroupSnapshotContentName: ptr.To("content-" + name)}
		objs = append(objs, g)
	}
	other := testkit.GroupSnapshot("elsewhere")
	other.Namespace = "other"
	objs = append(objs, other)
	h := newHarnessWith(t, func(c *Config) { c.Groups = true }, objs...)
	for value, want := range map[string][]string{
		testNS:        {testNS + "/waiting"},
		allNamespaces: {testNS + "/waiting", "other/elsewhere"},
	} {
		got, err := h.c.groupIndex.IndexKeys(indexUnbound, value)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Sort(got); !slices.Equal(got, want) {
			t.Fatalf("unbound groups under %q: %v, want %v", value, got, want)
		}
	}
}
