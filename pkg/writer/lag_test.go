package writer

import (
	"context"
	"testing"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapfake "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned/fake"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/snapkeeper/snapkeeper/pkg/cachelag"
)

// Every write records itself in the Writer's cache-lag tracker: patches and
// status patches (of snapshots and contents alike), creates and deletes; and
// a patch that removes the last finalizer of an object being deleted makes
// every cached copy of it outdated.
func TestEveryWriteIsTracked(t *testing.T) {
	ctx := context.Background()
	now := metav1.Now()
	content := func(name string) *snapv1.VolumeSnapshotContent {
		return &snapv1.VolumeSnapshotContent{ObjectMeta: metav1.ObjectMeta{
			Name: name, UID: k8stypes.UID("uid-" + name), ResourceVersion: "3", Finalizers: []string{"ours"}}}
	}
	status, deleted, finalized := content("status"), content("deleted"), content("finalized")
	finalized.DeletionTimestamp = &now
	vs := &snapv1.VolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vs", UID: "uid-vs", ResourceVersion: "3"}}
	//lint:ignore SA1019 client/v8 generates no apply configurations, so it has no NewClientset
	snap := snapfake.NewSimpleClientset(status, deleted, finalized, vs)
	w := New(fake.NewClientset(), snap, nil)
	lag := w.Lag()

	if _, err := w.PatchContentStatus(ctx, status, map[string]any{"readyToUse": true}); err != nil {
		t.Fatal(err)
	}
	if !w.Stale(status) {
		t.Error("a content status patch is not tracked")
	}
	if _, err := w.PatchSnapshotStatus(ctx, vs, map[string]any{"readyToUse": true}); err != nil {
		t.Fatal(err)
	}
	if !w.Stale(vs) {
		t.Error("a snapshot status patch is not tracked")
	}

	fresh := content("fresh")
	if _, err := w.CreateContent(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	if got, ok := cachelag.Created[*snapv1.VolumeSnapshotContent](lag, "", "fresh"); !ok || got.UID != fresh.UID {
		t.Errorf("the created content is not remembered: %v, %v", got, ok)
	}

	if err := w.DeleteContent(ctx, deleted); err != nil {
		t.Fatal(err)
	}
	if !lag.DeleteSent(deleted.UID) {
		t.Error("the delete is not remembered")
	}
	if err := w.DeleteContent(ctx, deleted); err == nil {
		t.Fatal("second delete succeeded")
	}

	p := &Patch{}
	p.Meta.RemoveFinalizers(finalized, "ours")
	if _, err := w.PatchContent(ctx, finalized, p); err != nil {
		t.Fatal(err)
	}
	later := finalized.DeepCopy()
	later.ResourceVersion = "2"
	if !w.Stale(finalized) || !w.Stale(later) {
		t.Error("a copy of a content our write deleted is not stale")
	}

	// The informer's events end every entry.
	lag.Observe(withRV(status, "4"))
	lag.Observe(withRV(fresh, "1"))
	lag.Deleted(deleted)
	lag.Deleted(finalized)
	if !w.Stale(vs) {
		t.Error("the snapshot's entry went with events of other objects")
	}
	snapCopy := vs.DeepCopy()
	snapCopy.ResourceVersion = "4"
	lag.Observe(snapCopy)
	if n := lag.Len(); n != 0 {
		t.Errorf("%d entries left after the events", n)
	}
}

func withRV(c *snapv1.VolumeSnapshotContent, rv string) *snapv1.VolumeSnapshotContent {
	c = c.DeepCopy()
	c.ResourceVersion = rv
	return c
}
