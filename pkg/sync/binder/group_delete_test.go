package binder

import (
	"slices"
	"testing"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
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
	g := &groupv1.VolumeGroupSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: "g", Namespace: testNS, UID: "uid-g", Finalizers: []string{snapshot.FinalizerGroupSnapshotBound}},
	}
	content := &groupv1.VolumeGroupSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{Name: snapshot.GroupContentNameFor(g.UID)},
		Spec: groupv1.VolumeGroupSnapshotContentSpec{
			VolumeGroupSnapshotRef: corev1.ObjectReference{Namespace: testNS, Name: "g", UID: g.UID},
			DeletionPolicy:         snapv1.VolumeSnapshotContentDelete, Driver: testDriver,
		},
		Status: &groupv1.VolumeGroupSnapshotContentStatus{VolumeSnapshotInfoList: []groupv1.VolumeSnapshotInfo{
			{VolumeHandle: "vol-1", SnapshotHandle: "s-1"}, {VolumeHandle: "vol-2", SnapshotHandle: "s-2"},
		}},
	}
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
