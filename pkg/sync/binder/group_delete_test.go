package binder

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

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
