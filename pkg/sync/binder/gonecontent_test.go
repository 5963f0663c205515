package binder

import (
	"slices"
	"testing"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/sync/testkit"
)

// TestReleaseAfterTheContentsDeleteEventReadsNothing: a deleted dynamic
// snapshot whose content the cache no longer holds is released. Its
// release asks the API server whether the content is gone (it may have
// been created a moment ago and not be cached yet), unless the informer
// delivered the content's delete event while the snapshot was being
// deleted; the snapshot's own delete event forgets that.
func TestReleaseAfterTheContentsDeleteEventReadsNothing(t *testing.T) {
	fins := []string{snapshot.FinalizerSnapshotAsSource, snapshot.FinalizerSnapshotBound}
	for _, heard := range []bool{false, true} {
		vs := testkit.Snapshot("s1", testkit.Deleted(), testkit.Finalizers(fins...), testkit.BoundTo(snapshot.ContentNameFor("uid-s1")))
		h := newHarness(t, vs)
		if heard {
			h.c.onContentGone(newContent(vs))
			if n := h.c.goneContents.len(); n != 1 {
				t.Fatalf("remembered %d contents, want 1", n)
			}
		}
		if _, err := h.syncSnapshot("s1"); err != nil {
			t.Fatal(err)
		}
		var gets []string
		for _, a := range h.api.Snap.Actions() {
			if a.GetVerb() == "get" {
				gets = append(gets, a.GetResource().Resource)
			}
		}
		wantGets := []string{"volumesnapshotcontents"}
		if heard {
			wantGets = nil
		}
		if !slices.Equal(gets, wantGets) {
			t.Errorf("delete event heard %v: reads %v, want %v", heard, gets, wantGets)
		}
		if got := h.writes(); !slices.Equal(got, []string{"patch volumesnapshots"}) {
			t.Errorf("delete event heard %v: writes %v, want the release alone", heard, got)
		}
		h.c.onSnapshotGone(vs)
		if n := h.c.goneContents.len(); n != 0 {
			t.Errorf("delete event heard %v: %d contents remembered after the snapshot went, want 0", heard, n)
		}
	}
}

// TestContentGoneIsRememberedOnlyForItsSnapshotBeingDeleted: the delete
// event of a content whose snapshot is live, or of another snapshot (a
// different UID), or of a snapshot the cache does not hold, is not
// remembered: those releases read the API server as before.
func TestContentGoneIsRememberedOnlyForItsSnapshotBeingDeleted(t *testing.T) {
	live := testkit.Snapshot("live", testkit.BoundTo(snapshot.ContentNameFor("uid-live")))
	deleted := testkit.Snapshot("deleted", testkit.Deleted(), testkit.Finalizers(snapshot.FinalizerSnapshotBound),
		testkit.BoundTo(snapshot.ContentNameFor("uid-deleted")))
	h := newHarness(t, live, deleted)
	h.c.onContentGone(newContent(live))
	h.c.onContentGone(newContent(deleted, testkit.RefUID("someone-else")))
	h.c.onContentGone(newContent(testkit.Snapshot("uncached", testkit.Deleted())))
	if n := h.c.goneContents.len(); n != 0 {
		t.Errorf("remembered %d contents, want 0", n)
	}
}
