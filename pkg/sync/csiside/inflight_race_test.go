package csiside

import (
	"testing"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	"google.golang.org/grpc/codes"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
)

// A VolumeSnapshot is deleted while its CreateSnapshot call is in flight,
// and the call then times out. The binder's mark and deletion landed on the
// API server during the call, before our status.error write; the informer
// delivers them in that order, but may lag behind our later writes. A copy
// from the cache can therefore be older than what this loop wrote, yet
// unknown to the stale-copy record. Once the snapshot was finished and
// deleted, such a copy still shows the being-created mark and no handle:
// calling CreateSnapshot for it again would cut a new snapshot that no
// content points at (a leak). Found by the e2e test of an in-flight
// deletion (test/e2e/csiside), reproduced here with the cache held back.
func TestInFlightDeletionNeverCreatesFromAnOutdatedCopy(t *testing.T) {
	h := newHarness(t, setup{contents: contents(newContent("c1")), objects: classes})
	contents := h.api.Snap.SnapshotV1().VolumeSnapshotContents()
	var deleted *snapv1.VolumeSnapshotContent
	h.driver.script(call{
		method: "CreateSnapshot", req: goldRequest(nil),
		err: grpcErr(codes.DeadlineExceeded, "context deadline exceeded"),
		during: func() {
			mark := []byte(`{"metadata":{"annotations":{"` + snapshot.AnnBeingDeleted + `":"yes"}}}`)
			if _, err := contents.Patch(h.ctx, "c1", types.MergePatchType, mark, metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := contents.Delete(h.ctx, "c1", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			deleted = h.api.Content("c1").DeepCopy()
		},
	})
	h.mustSync("c1")
	errored := h.api.Content("c1").DeepCopy() // our status.error write
	if errored.Status == nil || errored.Status.Error == nil || !snapshot.HasAnnotation(errored, snapshot.AnnBeingCreated, snapshot.ValueYes) {
		t.Fatalf("after the timed-out call: annotations %v, status %+v", errored.Annotations, errored.Status)
	}

	// The create is finished and its snapshot deleted exactly once.
	h.driver.script(
		createCall(goldRequest(nil), snapOf("snap-id", true), nil),
		deleteCall("snap-id", nil, nil),
	)
	// The cache holds the binder's deletion, not yet our error write.
	if err := h.cache.Update(deleted); err != nil {
		t.Fatal(err)
	}
	if _, err := h.sync("c1"); err != nil {
		t.Logf("sync of the deleted copy: %v", err)
	}
	// Our error write's event arrives, late; a second delivery changes
	// nothing.
	for range 2 {
		if err := h.cache.Update(errored.DeepCopy()); err != nil {
			t.Fatal(err)
		}
		if _, err := h.sync("c1"); err != nil {
			t.Logf("sync of the errored copy: %v", err)
		}
	}
	if h.api.Content("c1") != nil {
		t.Errorf("content not released: %+v", h.api.Content("c1"))
	}
	// h.driver fails the test on any CreateSnapshot beyond the script and
	// verifies at cleanup that the script was used up.
}
