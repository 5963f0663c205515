package csiside

import (
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/sync/testkit"
)

func TestDelete(t *testing.T) {
	inFlightMsg := "Failed to finish the CreateSnapshot that may be in flight: Unavailable: driver restarting"
	runKindCases(t, map[string]kindCase{
		"a content marked being-deleted has its snapshot deleted with the secret, then its finalizer removed": func(k kind) syncCase {
			return syncCase{
				content:    k.content(unmarked(), k.has(k.cut("snap-id", true)), withSecret(), markedDeleted()),
				setup:      setup{secrets: credsSecrets},
				calls:      []call{k.delete("snap-id", testSecrets, nil)},
				wantWrites: []string{"patch"},
				wantGone:   true,
			}
		},
		"a bound content deleted without the mark calls nothing and waits for the mark": func(k kind) syncCase {
			return syncCase{
				content:        k.content(unmarked(), k.has(k.cut("snap-id", true)), testkit.Deleted()),
				setup:          setup{objects: k.subject(testUID)},
				wantFinalizers: k.bound(),
				wantStatus:     k.cut("snap-id", true),
			}
		},
		"an unbound pre-provisioned content deleted at once (Velero) has its snapshot deleted": func(k kind) syncCase {
			return syncCase{
				content: k.content(testkit.PreProvisioned("backend-1", memberOf("backend-1")), unmarked(),
					testkit.RefTo("velero", "velero-snap", ""), testkit.Deleted()),
				calls:      []call{k.delete("backend-1", nil, nil)},
				wantWrites: []string{"patch"},
				wantGone:   true,
			}
		},
		"a content whose VolumeSnapshot is gone keeps its backend snapshot (it may be a copy from another cluster)": func(k kind) syncCase {
			return syncCase{
				content:        k.content(unmarked(), k.has(k.cut("snap-id", true)), testkit.Deleted()),
				wantFinalizers: k.bound(),
				wantStatus:     k.cut("snap-id", true),
			}
		},
		"a content whose VolumeSnapshot was replaced by a namesake keeps its backend snapshot": func(k kind) syncCase {
			return syncCase{
				content:        k.content(unmarked(), k.has(k.cut("snap-id", true)), testkit.Deleted()),
				setup:          setup{objects: k.subject("another-uid")},
				wantFinalizers: k.bound(),
				wantStatus:     k.cut("snap-id", true),
			}
		},
		"a bound Retain content deleted without the mark keeps its finalizer": func(k kind) syncCase {
			return syncCase{
				content:        k.content(unmarked(), k.has(k.cut("snap-id", true)), testkit.Retain(), testkit.Deleted()),
				setup:          setup{objects: k.subject(testUID)},
				wantFinalizers: k.bound(),
				wantStatus:     k.cut("snap-id", true),
			}
		},
		"a create that may be in flight is finished, its handle stored, then deleted": func(k kind) syncCase {
			return syncCase{
				content:    k.content(markedDeleted()),
				setup:      setup{objects: k.classes()},
				calls:      []call{k.create(nil, "snap-id", false), k.delete("snap-id", nil, nil)},
				wantWrites: []string{"patch status", "patch", "patch"},
				wantGone:   true,
			}
		},
		"a create in flight that fails finally cut nothing: only the finalizer goes": func(k kind) syncCase {
			return syncCase{
				content:    k.content(markedDeleted()),
				setup:      setup{objects: k.classes()},
				calls:      []call{k.createFails(nil, grpcErr(codes.NotFound, "volume vol-1 not found"))},
				wantWrites: []string{"patch"},
				wantGone:   true,
			}
		},
		"a create in flight that may still be running keeps the content and shows why": func(k kind) syncCase {
			return syncCase{
				content:        k.content(markedDeleted()),
				setup:          setup{objects: k.classes()},
				calls:          []call{k.createFails(nil, grpcErr(codes.Unavailable, "driver restarting"))},
				wantErr:        true,
				wantWrites:     []string{"patch status"},
				wantEvents:     k.SaysAll("Warning SnapshotDeleteError " + inFlightMsg),
				wantMark:       true,
				wantFinalizers: k.bound(),
				wantStatus:     k.failed(k.Says(inFlightMsg)),
			}
		},
		"a create in flight answered Internal keeps the content: the attempt that set the mark may have cut": func(k kind) syncCase {
			msg := k.Says("Failed to finish the CreateSnapshot that may be in flight: Internal: backend error")
			return syncCase{
				content:        k.content(markedDeleted()),
				setup:          setup{objects: k.classes()},
				calls:          []call{k.createFails(nil, grpcErr(codes.Internal, "backend error"))},
				wantErr:        true,
				wantWrites:     []string{"patch status"},
				wantEvents:     k.SaysAll("Warning SnapshotDeleteError " + msg),
				wantMark:       true,
				wantFinalizers: k.bound(),
				wantStatus:     k.failed(msg),
			}
		},
		"AlreadyExists while finishing a create keeps the content: a snapshot of that name exists": func(k kind) syncCase {
			msg := k.Says("Failed to finish the CreateSnapshot that may be in flight: AlreadyExists: other parameters")
			return syncCase{
				content:        k.content(markedDeleted()),
				setup:          setup{objects: k.classes()},
				calls:          []call{k.createFails(nil, grpcErr(codes.AlreadyExists, "other parameters"))},
				wantErr:        true,
				wantWrites:     []string{"patch status"},
				wantEvents:     k.SaysAll("Warning SnapshotDeleteError " + msg),
				wantMark:       true,
				wantFinalizers: k.bound(),
				wantStatus:     k.failed(msg),
			}
		},
		"a create in flight whose class is gone keeps the content rather than guess": func(k kind) syncCase {
			msg := k.Says(`Failed to finish the CreateSnapshot that may be in flight: VolumeSnapshotClass "gold" not found`)
			return syncCase{
				content:        k.content(markedDeleted()),
				wantErr:        true,
				wantWrites:     []string{"patch status"},
				wantEvents:     k.SaysAll("Warning SnapshotDeleteError " + msg),
				wantMark:       true,
				wantFinalizers: k.bound(),
				wantStatus:     k.failed(msg),
			}
		},
		"a dynamic content never called (no mark, no handle) is released without a call": func(k kind) syncCase {
			return syncCase{
				content:    k.content(unmarked(), markedDeleted()),
				wantWrites: []string{"patch"},
				wantGone:   true,
			}
		},
		"Retain only removes the finalizer once marked": func(k kind) syncCase {
			return syncCase{
				content:    k.content(unmarked(), k.has(k.cut("snap-id", true)), testkit.Retain(), markedDeleted()),
				setup:      setup{objects: k.subject(testUID)},
				wantWrites: []string{"patch"},
				wantGone:   true,
			}
		},
		"a failed DeleteSnapshot keeps the finalizer and shows the driver's message": func(k kind) syncCase {
			msg := k.Says("Failed to delete snapshot: FailedPrecondition: snapshot has clones")
			return syncCase{
				content:        k.content(unmarked(), k.has(k.cut("snap-id", true)), markedDeleted()),
				calls:          []call{k.delete("snap-id", nil, grpcErr(codes.FailedPrecondition, "snapshot has clones"))},
				wantErr:        true,
				wantWrites:     []string{"patch status"},
				wantEvents:     k.SaysAll("Warning SnapshotDeleteError " + msg),
				wantFinalizers: k.bound(),
				wantStatus:     k.withError(k.cut("snap-id", true), msg),
			}
		},
		"a missing deletion secret keeps the finalizer and shows why": func(k kind) syncCase {
			msg := k.Says(`Failed to delete snapshot: reading secret secrets/creds: secrets "creds" not found`)
			return syncCase{
				content:        k.content(unmarked(), k.has(k.cut("snap-id", true)), withSecret(), markedDeleted()),
				wantErr:        true,
				wantWrites:     []string{"patch status"},
				wantEvents:     k.SaysAll("Warning SnapshotDeleteError " + msg),
				wantFinalizers: k.bound(),
				wantStatus:     k.withError(k.cut("snap-id", true), msg),
			}
		},
		"other finalizers keep the object: the deleted handle is cleared before our finalizer goes": func(k kind) syncCase {
			return syncCase{
				content: k.content(unmarked(), k.has(k.cut("snap-id", true)), markedDeleted(),
					testkit.Finalizers(k.finalizer(), veleroFinal)),
				calls:          []call{k.delete("snap-id", nil, nil)},
				wantWrites:     []string{"patch status", "patch"},
				wantFinalizers: []string{veleroFinal},
				wantStatus:     k.cleared("snap-id"),
			}
		},
		"a deleted content without our finalizer is left alone": func(k kind) syncCase {
			return syncCase{
				content:        k.content(unmarked(), k.has(k.cut("snap-id", true)), markedDeleted(), testkit.Finalizers(veleroFinal)),
				wantFinalizers: []string{veleroFinal},
				wantStatus:     k.cut("snap-id", true),
			}
		},
		"a conflict when removing the finalizer is retried (DeleteSnapshot is idempotent)": func(k kind) syncCase {
			return syncCase{
				content:        k.content(unmarked(), k.has(k.cut("snap-id", true)), markedDeleted()),
				calls:          []call{k.delete("snap-id", nil, nil)},
				inject:         []testkit.Fault{{Verb: "patch", Resource: k.resource(), Err: conflict(), Times: 1}},
				wantErr:        true,
				wantWrites:     []string{"patch"},
				wantFinalizers: k.bound(),
				wantStatus:     k.cut("snap-id", true),
			}
		},
	})
}

// TestDeleteTrustsOnlyTheInformer: the binder's mark counts once the watch
// delivered it, never earlier (external-snapshotter issue 1446).
func TestDeleteTrustsOnlyTheInformer(t *testing.T) {
	h := newHarness(t, setup{
		contents: contents(newContent("c1", unmarked(), testkit.Status(testkit.Cut("snap-id", true)), testkit.Deleted())),
		objects:  objs(testkit.Snapshot("snap-1", testkit.InNamespace("default"), testkit.UID(testUID))),
	})
	// The binder marks the content; the watch has not delivered it yet.
	p := []byte(`{"metadata":{"annotations":{"` + snapshot.AnnBeingDeleted + `":"yes"}}}`)
	if _, err := h.api.Snap.SnapshotV1().VolumeSnapshotContents().Patch(h.ctx, "c1", "application/merge-patch+json", p, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.sync("c1"); err != nil {
		t.Fatalf("sync before the event: %v", err)
	}
	if h.api.Content("c1") == nil {
		t.Fatal("content released before its mark reached the cache")
	}
	h.refresh()
	h.driver.script(deleteCall("snap-id", nil, nil))
	h.mustSync("c1")
	if h.api.Content("c1") != nil {
		t.Error("content still exists after the marked deletion")
	}
}

// TestDeleteAfterRetries: a DeleteSnapshot that failed is called again on
// the next sync, and success then releases the content.
func TestDeleteAfterRetries(t *testing.T) {
	h := newHarness(t, setup{contents: contents(newContent("c1", unmarked(), testkit.Status(testkit.Cut("snap-id", true)), markedDeleted()))})
	for range 2 {
		h.driver.script(deleteCall("snap-id", nil, grpcErr(codes.DeadlineExceeded, "slow backend")))
		if _, err := h.sync("c1"); err == nil {
			t.Fatal("want an error from the failed DeleteSnapshot")
		}
		h.refresh()
	}
	if got := len(h.events()); got != 1 {
		t.Errorf("%d events for the same failure twice, want 1", got)
	}
	h.driver.script(deleteCall("snap-id", nil, nil))
	h.mustSync("c1")
	if h.api.Content("c1") != nil {
		t.Error("content still exists")
	}
}

// TestDeleteWhileCreateInFlightAfterStatusFailure: the create finished
// during a deletion but storing its handle failed; the next sync finishes
// it again (idempotent) and deletes what was cut. Nothing leaks.
func TestDeleteWhileCreateInFlightAfterStatusFailure(t *testing.T) {
	h := newHarness(t, setup{contents: contents(newContent("c1", markedDeleted())), objects: classes})
	h.api.Inject(testkit.Fault{Verb: "patch", Resource: "volumesnapshotcontents", Subresource: "status", Err: apierrors.NewServiceUnavailable("etcd")})
	h.driver.script(createCall(goldRequest(nil), snapOf("snap-id", true), nil))
	if _, err := h.sync("c1"); err == nil {
		t.Fatal("want the status write's error")
	}
	if got := h.api.Content("c1"); !snapshot.HasAnnotation(got, snapshot.AnnBeingCreated, snapshot.ValueYes) {
		t.Fatal("the mark went although the handle was not stored")
	}
	h.refresh()
	h.driver.script(createCall(goldRequest(nil), snapOf("snap-id", true), nil), deleteCall("snap-id", nil, nil))
	h.mustSync("c1")
	if h.api.Content("c1") != nil {
		t.Error("content still exists")
	}
}

func conflict() error {
	return apierrors.NewConflict(testkit.ContentsGVR.GroupResource(), "c1", errors.New("the object has been modified"))
}
