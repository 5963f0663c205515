package csiside

import (
	"slices"
	"testing"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snaplisters "github.com/kubernetes-csi/external-snapshotter/client/v8/listers/volumesnapshot/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/sync/testkit"
)

// A v1beta1 group content lists no members: they are found by the group
// handle on the member contents, of the group's own driver only.
func TestMemberIDsOfAGroupWithoutAListAreItsDriversOnly(t *testing.T) {
	member := func(name, driver, id string) *snapv1.VolumeSnapshotContent {
		c := testkit.Content(name, testkit.Annotated(snapshot.AnnVolumeGroupSnapshotHandle, "group-1"))
		c.Spec.Driver = driver
		c.Status = &snapv1.VolumeSnapshotContentStatus{SnapshotHandle: ptr.To(id)}
		return c
	}
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, c := range []*snapv1.VolumeSnapshotContent{
		member("m1", testkit.DriverName, "4"), member("m2", testkit.DriverName, "5"),
		member("other", "other.csi.example.com", "4"),
	} {
		if err := idx.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	c := &Controller{contents: snaplisters.NewVolumeSnapshotContentLister(idx)}
	g := testkit.GroupContent("g", testkit.GroupStatus(testkit.GroupCut("group-1", true)))
	if got := (groupContentItem{c: c, VolumeGroupSnapshotContent: g}).memberIDs(); !slices.Equal(got, []string{"4", "5"}) {
		t.Fatalf("memberIDs = %v, want [4 5]: the other driver's group-1 member must not be named", got)
	}
}
