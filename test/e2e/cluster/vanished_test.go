package cluster

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

// TestSnapshotVanishedWithItsFinalizers, side by side: a ready snapshot
// is removed from etcd while it holds the binder's finalizers, the outcome
// of kube-apiserver's delete race (kubernetes#77988). Our binder tears its
// content and backend snapshot down; the community binder leaves both
// (compatibility.md, vanished-snapshot), which the test then cleans up
// the way an operator would: mark and delete the content.
func TestSnapshotVanishedWithItsFinalizers(t *testing.T) {
	forPairings(t, func(t *testing.T, p pairing) {
		w := newWorld(t, p, worldOptions{})
		ctx := context.Background()
		w.readySnapshot(t, "snap")
		content, handle := w.handleOf(t, "snap")
		if n, err := w.Env.RemoveFromEtcd(ctx, framework.SnapshotKey(w.NS, "snap")); err != nil || n != 1 {
			t.Fatalf("remove snap from etcd: %d keys, %v", n, err)
		}
		contents := w.Env.Snap.SnapshotV1().VolumeSnapshotContents()
		gone := func() (bool, error) {
			_, err := contents.Get(ctx, content, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		}
		start := time.Now()
		if p.Binder == ours {
			framework.Eventually(t, 30*time.Second, "the vanished snapshot's content gone", gone)
			t.Logf("content and backend snapshot %s gone %v after the snapshot vanished", handle, time.Since(start).Round(10*time.Millisecond))
		} else {
			time.Sleep(10 * time.Second)
			if ok, _ := gone(); ok {
				t.Fatal("the community binder deleted the content of a vanished snapshot; compatibility.md says it leaves it")
			}
			t.Logf("the community binder left content %s and backend snapshot %s for 10s: cleaning up by hand", content, handle)
			patch := `{"metadata":{"annotations":{"` + snapshot.AnnBeingDeleted + `":"yes"}}}`
			if _, err := contents.Patch(ctx, content, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			w.DeleteContent(t, content)
			framework.Eventually(t, 30*time.Second, "the content deleted by hand gone", gone)
		}
		if n := w.deleteCalls(t)[handle+" (snapshot-"+content[len("snapcontent-"):]+")"]; n != 1 {
			t.Errorf("DeleteSnapshot of %s answered OK %d times, want 1 (calls %v)", handle, n, w.deleteCalls(t))
		}
		w.invariants(t)
	})
}
