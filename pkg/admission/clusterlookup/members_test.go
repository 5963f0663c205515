package clusterlookup

import (
	"testing"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapfake "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned/fake"
	snapinformers "github.com/kubernetes-csi/external-snapshotter/client/v8/informers/externalversions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestContentMembersFindsTheMemberOfItsGroupOnly(t *testing.T) {
	content := func(name, driver, handle, group string, ready bool) *snapv1.VolumeSnapshotContent {
		c := &snapv1.VolumeSnapshotContent{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: snapv1.VolumeSnapshotContentSpec{Driver: driver},
			Status: &snapv1.VolumeSnapshotContentStatus{SnapshotHandle: &handle, ReadyToUse: &ready, RestoreSize: ptrTo(int64(7))}}
		if group != "" {
			c.Status.VolumeGroupSnapshotHandle = &group
		}
		return c
	}
	//lint:ignore SA1019 client/v8 generates no apply configurations, so it has no NewClientset
	factory := snapinformers.NewSharedInformerFactory(snapfake.NewSimpleClientset(), 0)
	m, err := NewContentMembers(factory)
	if err != nil {
		t.Fatal(err)
	}
	// The factory is not started: the cache holds what the test puts there.
	for _, c := range []*snapv1.VolumeSnapshotContent{
		content("a", "d", "s1", "g1", true),
		content("b", "other", "s1", "g1", false), // another driver's handle
		content("c", "d", "s2", "", true),
		content("e", "d", "dup", "g1", true), content("f", "d", "dup", "g1", true),
	} {
		if err := factory.Snapshot().V1().VolumeSnapshotContents().Informer().GetIndexer().Add(c); err != nil {
			t.Fatal(err)
		}
	}
	if info, ok := m.Member("d", "g1", "s1"); !ok || !*info.ReadyToUse || *info.RestoreSize != 7 {
		t.Errorf("d/g1/s1: %+v %v", info, ok)
	}
	for _, q := range [][3]string{{"d", "g2", "s1"}, {"d", "g1", "s2"}, {"d", "g1", "dup"}, {"d", "", "none"}} {
		if info, ok := m.Member(q[0], q[1], q[2]); ok {
			t.Errorf("%v found %+v", q, info)
		}
	}
	if _, ok := m.Member("d", "", "s2"); !ok {
		t.Error("d//s2 (no group handle asked) not found")
	}
}

func ptrTo[T any](v T) *T { return &v }
