package csiside

import (
	"slices"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	"google.golang.org/grpc/codes"
	"k8s.io/utils/ptr"

	"github.com/snapkeeper/snapkeeper/pkg/csi"
	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/sync/testkit"
	"github.com/snapkeeper/snapkeeper/pkg/sync/workloop"
)

func TestCreate(t *testing.T) {
	inProgressMsg := "Failed to create snapshot: DeadlineExceeded: timed out"
	runKindCases(t, map[string]kindCase{
		"a marked content is cut, its status stored in one patch, then the mark removed": func(k kind) syncCase {
			return syncCase{
				content:        k.content(withSecret()),
				setup:          setup{objects: k.classes(), secrets: credsSecrets},
				calls:          []call{k.create(testSecrets, "snap-id", true)},
				wantWrites:     []string{"patch status", "patch"},
				wantFinalizers: k.bound(),
				wantStatus:     k.cut("snap-id", true),
			}
		},
		"a content of a community binder gets the mark and the finalizer before the call": func(k kind) syncCase {
			return syncCase{
				content: k.content(unmarked(), testkit.Finalizers()),
				setup:   setup{objects: k.classes()},
				calls:   []call{k.create(nil, "snap-id", true)},
				// The mark is checked on the API server during the call below.
				wantWrites:     []string{"patch", "patch status", "patch"},
				wantFinalizers: k.bound(),
				wantStatus:     k.cut("snap-id", true),
			}
		},
		"a Retain content of a community binder gets the mark but no finalizer": func(k kind) syncCase {
			return syncCase{
				content:    k.content(unmarked(), testkit.Finalizers(), testkit.Retain()),
				setup:      setup{objects: k.classes()},
				calls:      []call{k.create(nil, "snap-id", true)},
				wantWrites: []string{"patch", "patch status", "patch"},
				wantStatus: k.cut("snap-id", true),
			}
		},
		"a snapshot cut but not ready yet is polled again after a second": func(k kind) syncCase {
			return syncCase{
				content:        k.content(),
				setup:          setup{objects: k.classes()},
				calls:          []call{k.create(nil, "snap-id", false)},
				wantRequeue:    minPollStart,
				wantWrites:     []string{"patch status", "patch"},
				wantFinalizers: k.bound(),
				wantStatus:     k.cut("snap-id", false),
			}
		},
		"an error that may mean the driver is still cutting keeps the mark and shows the driver's message": func(k kind) syncCase {
			return syncCase{
				content:        k.content(),
				setup:          setup{objects: k.classes()},
				calls:          []call{k.createFails(nil, grpcErr(codes.DeadlineExceeded, "timed out"))},
				wantRequeue:    retryBackoff.Start,
				wantWrites:     []string{"patch status"},
				wantEvents:     k.SaysAll("Warning SnapshotCreationFailed " + inProgressMsg),
				wantMark:       true,
				wantFinalizers: k.bound(),
				wantStatus:     k.failed(k.Says(inProgressMsg)),
			}
		},
		"a final error shows the driver's message, then clears the mark": func(k kind) syncCase {
			return syncCase{
				content:        k.content(),
				setup:          setup{objects: k.classes()},
				calls:          []call{k.createFails(nil, grpcErr(codes.InvalidArgument, "volume vol-1 is a raw device"))},
				wantRequeue:    retryBackoff.Start,
				wantWrites:     []string{"patch status", "patch"},
				wantEvents:     k.SaysAll("Warning SnapshotCreationFailed Failed to create snapshot: InvalidArgument: volume vol-1 is a raw device"),
				wantFinalizers: k.bound(),
				wantStatus:     k.failed(k.Says("Failed to create snapshot: InvalidArgument: volume vol-1 is a raw device")),
			}
		},
		"a final Internal after an attempt of unknown outcome keeps the mark: that attempt may have cut": func(k kind) syncCase {
			return syncCase{
				content:        k.content(),
				setup:          setup{objects: k.classes()},
				calls:          []call{k.createFails(nil, grpcErr(codes.Internal, "backend error"))},
				wantRequeue:    retryBackoff.Start,
				wantWrites:     []string{"patch status"},
				wantEvents:     k.SaysAll("Warning SnapshotCreationFailed Failed to create snapshot: Internal: backend error"),
				wantMark:       true,
				wantFinalizers: k.bound(),
				wantStatus:     k.failed(k.Says("Failed to create snapshot: Internal: backend error")),
			}
		},
		"a final Internal on the first attempt clears the mark: nothing was cut": func(k kind) syncCase {
			return syncCase{
				content:        k.content(unmarked()),
				setup:          setup{objects: k.classes()},
				calls:          []call{k.createFails(nil, grpcErr(codes.Internal, "backend error"))},
				wantRequeue:    retryBackoff.Start,
				wantWrites:     []string{"patch", "patch status", "patch"},
				wantEvents:     k.SaysAll("Warning SnapshotCreationFailed Failed to create snapshot: Internal: backend error"),
				wantFinalizers: k.bound(),
				wantStatus:     k.failed(k.Says("Failed to create snapshot: Internal: backend error")),
			}
		},
		"the same error again writes nothing and sends no event": func(k kind) syncCase {
			return syncCase{
				content:        k.content(k.has(k.failed(k.Says(inProgressMsg)))),
				setup:          setup{objects: k.classes()},
				calls:          []call{k.createFails(nil, grpcErr(codes.DeadlineExceeded, "timed out"))},
				wantRequeue:    retryBackoff.Start,
				wantMark:       true,
				wantFinalizers: k.bound(),
				wantStatus:     k.failed(k.Says(inProgressMsg)),
			}
		},
		"an error without a gRPC status counts as possibly in progress": func(k kind) syncCase {
			return syncCase{
				content:        k.content(),
				setup:          setup{objects: k.classes()},
				calls:          []call{k.createFails(nil, errString("connection reset"))},
				wantRequeue:    retryBackoff.Start,
				wantWrites:     []string{"patch status"},
				wantEvents:     k.SaysAll("Warning SnapshotCreationFailed Failed to create snapshot: connection reset"),
				wantMark:       true,
				wantFinalizers: k.bound(),
				wantStatus:     k.failed(k.Says("Failed to create snapshot: connection reset")),
			}
		},
		"success after an error clears status.error in the same patch": func(k kind) syncCase {
			return syncCase{
				content:        k.content(k.has(k.failed(k.Says(inProgressMsg)))),
				setup:          setup{objects: k.classes()},
				calls:          []call{k.create(nil, "snap-id", true)},
				wantWrites:     []string{"patch status", "patch"},
				wantFinalizers: k.bound(),
				wantStatus:     k.cut("snap-id", true),
			}
		},
		"a content without a VolumeSnapshot UID waits and calls nothing": func(k kind) syncCase {
			return syncCase{
				content:        k.content(testkit.RefTo("default", "snap-1", "")),
				setup:          setup{objects: k.classes()},
				wantMark:       true,
				wantFinalizers: k.bound(),
			}
		},
		"a missing class is shown in status.error, the mark kept, nothing called": func(k kind) syncCase {
			msg := k.Says(`Failed to prepare the CreateSnapshot call: VolumeSnapshotClass "gold" not found`)
			return syncCase{
				content:        k.content(),
				wantRequeue:    retryBackoff.Start,
				wantWrites:     []string{"patch status"},
				wantEvents:     k.SaysAll("Warning SnapshotCreationFailed " + msg),
				wantMark:       true,
				wantFinalizers: k.bound(),
				wantStatus:     k.failed(msg),
			}
		},
		"a missing secret is shown in status.error, nothing called": func(k kind) syncCase {
			msg := k.Says(`Failed to prepare the CreateSnapshot call: reading secret secrets/creds: secrets "creds" not found`)
			return syncCase{
				content:        k.content(withSecret()),
				setup:          setup{objects: k.classes()},
				wantRequeue:    retryBackoff.Start,
				wantWrites:     []string{"patch status"},
				wantEvents:     k.SaysAll("Warning SnapshotCreationFailed " + msg),
				wantMark:       true,
				wantFinalizers: k.bound(),
				wantStatus:     k.failed(msg),
			}
		},
		"a ready content with a mark left over loses the mark and calls nothing": func(k kind) syncCase {
			return syncCase{
				content:        k.content(k.has(k.cut("snap-id", true))),
				setup:          setup{objects: k.classes()},
				wantWrites:     []string{"patch"},
				wantFinalizers: k.bound(),
				wantStatus:     k.cut("snap-id", true),
			}
		},
		"a ready content costs nothing": func(k kind) syncCase {
			return syncCase{
				content:        k.content(unmarked(), k.has(k.cut("snap-id", true))),
				setup:          setup{objects: k.classes()},
				wantFinalizers: k.bound(),
				wantStatus:     k.cut("snap-id", true),
			}
		},
	})
	// The request and the status of a single snapshot.
	runSyncCases(t, map[string]syncCase{
		"extra metadata, the name prefix and a truncated UID reach the driver": {
			setup: setup{contents: contents(newContent("c1")), objects: classes, config: func(c *Config) {
				c.ExtraCreateMetadata = true
				c.SnapshotNamePrefix = "snap"
				c.SnapshotNameUUIDLength = 8
			}},
			calls: []call{createCall(csi.CreateRequest{
				Name:           "snap-11111111",
				SourceVolumeID: "vol-1",
				Parameters: map[string]string{
					"type":                         "fast",
					snapshot.MetaSnapshotName:      "snap-1",
					snapshot.MetaSnapshotNamespace: "default",
					snapshot.MetaContentName:       "c1",
				},
			}, snapOf("snap-id", true), nil)},
			wantWrites:     []string{"patch status", "patch"},
			wantFinalizers: bound,
			wantStatus:     ptr.To(testkit.Cut("snap-id", true)),
		},
		"a content without a class is cut without parameters": {
			setup: setup{contents: contents(newContent("c1", testkit.ClassName("")))},
			calls: []call{createCall(csi.CreateRequest{Name: testCSIName, SourceVolumeID: "vol-1", Parameters: map[string]string{}},
				snapOf("snap-id", true), nil)},
			wantWrites:     []string{"patch status", "patch"},
			wantFinalizers: bound,
			wantStatus:     ptr.To(testkit.Cut("snap-id", true)),
		},
		"a snapshot without size or time gets the time of the answer and no restoreSize": {
			setup:          setup{contents: contents(newContent("c1")), objects: classes},
			calls:          []call{createCall(goldRequest(nil), &csi.Snapshot{ID: "snap-id", ReadyToUse: true}, nil)},
			wantWrites:     []string{"patch status", "patch"},
			wantFinalizers: bound,
			wantStatus:     &snapv1.VolumeSnapshotContentStatus{SnapshotHandle: ptr.To("snap-id"), ReadyToUse: ptr.To(true), CreationTime: ptr.To(testTime.UnixNano())},
		},
	})
}

func TestCreateMarksBeforeTheCall(t *testing.T) {
	h := newHarness(t, setup{contents: contents(newContent("c1", unmarked(), testkit.Finalizers())), objects: classes})
	c := createCall(goldRequest(nil), snapOf("snap-id", true), nil)
	c.during = func() {
		got := h.api.Content("c1")
		if !snapshot.HasAnnotation(got, snapshot.AnnBeingCreated, snapshot.ValueYes) || !snapshot.HasFinalizer(got, snapshot.FinalizerContentBound) {
			t.Errorf("during CreateSnapshot the server holds annotations %v, finalizers %v; want the mark and the finalizer",
				got.Annotations, got.Finalizers)
		}
		if statusHandle(got) != "" {
			t.Errorf("handle stored before the call returned")
		}
	}
	h.driver.script(c)
	h.mustSync("c1")
}

func TestPollUntilReady(t *testing.T) {
	cases := map[string]struct {
		caps csi.Capabilities
		poll func(ready bool) call
	}{
		"without LIST_SNAPSHOTS the idempotent CreateSnapshot polls": {
			caps: csi.Capabilities{CreateDeleteSnapshot: true},
			poll: func(ready bool) call { return createCall(goldRequest(nil), snapOf("snap-id", ready), nil) },
		},
		"with LIST_SNAPSHOTS a dynamic content is still polled with CreateSnapshot, as the community sidecar polls it": {
			caps: csi.Capabilities{CreateDeleteSnapshot: true, ListSnapshots: true},
			poll: func(ready bool) call { return createCall(goldRequest(nil), snapOf("snap-id", ready), nil) },
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, setup{
				contents: contents(newContent("c1")), objects: classes, caps: tc.caps,
				secrets: objs(testkit.Secret("secrets", "list-c1", map[string]string{"list": "token"})),
			})
			h.driver.script(createCall(goldRequest(nil), snapOf("snap-id", false), nil))
			res, err := h.sync("c1")
			if err != nil || res.RequeueAfter != minPollStart {
				t.Fatalf("first sync: %v, %v; want a requeue after %v", res, err, minPollStart)
			}
			h.writes()
			h.refresh()

			// An event before the delay is over calls nothing.
			if res, _ := h.sync("c1"); res.RequeueAfter != minPollStart {
				t.Errorf("early sync requeues after %v, want the remaining %v", res.RequeueAfter, minPollStart)
			}
			// The delay doubles up to the retry maximum.
			want := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second}
			wait := minPollStart
			for i, w := range want {
				h.now = h.now.Add(wait)
				h.driver.script(tc.poll(false))
				res, err := h.sync("c1")
				if err != nil || res.RequeueAfter != w {
					t.Fatalf("poll %d: %v, %v; want a requeue after %v", i+1, res, err, w)
				}
				wait = w
			}
			if w := h.writes(); len(w) != 0 {
				t.Errorf("unchanged polls wrote %v", w)
			}
			h.now = h.now.Add(wait)
			h.driver.script(tc.poll(true))
			if res, err := h.sync("c1"); err != nil || res.RequeueAfter != 0 {
				t.Fatalf("last poll: %v, %v; want done", res, err)
			}
			if got := h.api.Content("c1").Status; !*got.ReadyToUse || got.Error != nil {
				t.Errorf("status after the ready poll: %+v", got)
			}
			if n := h.ctrl.polls.len(); n != 0 {
				t.Errorf("%d poll states remain after ready", n)
			}
		})
	}
}

func TestFinalErrorRetriesWithBackoffNotOnEvents(t *testing.T) {
	h := newHarness(t, setup{contents: contents(newContent("c1")), objects: classes})
	final := grpcErr(codes.InvalidArgument, "bad parameter")
	h.driver.script(createCall(goldRequest(nil), nil, final))
	if res, err := h.sync("c1"); err != nil || res.RequeueAfter != time.Second {
		t.Fatalf("first attempt: %v, %v", res, err)
	}
	h.writes()
	h.events()
	h.refresh()
	// The events of our own writes come back at once: no call, no write.
	for range 3 {
		if res, err := h.sync("c1"); err != nil || res.RequeueAfter != time.Second {
			t.Fatalf("sync during backoff: %v, %v", res, err)
		}
	}
	if w := h.writes(); len(w) != 0 {
		t.Errorf("syncs during backoff wrote %v", w)
	}
	// After the delay, the create is tried again: mark, call, unmark.
	h.now = h.now.Add(time.Second)
	h.driver.script(createCall(goldRequest(nil), nil, final))
	if res, err := h.sync("c1"); err != nil || res.RequeueAfter != 2*time.Second {
		t.Fatalf("second attempt: %v, %v; want a requeue after 2s", res, err)
	}
	if got, want := h.writes(), []string{"patch", "patch"}; !slices.Equal(got, want) {
		t.Errorf("second attempt wrote %v, want %v (status.error unchanged)", got, want)
	}
	if e := h.events(); len(e) != 0 {
		t.Errorf("the same error again sent events %v", e)
	}
	if n := h.ctrl.retries.len(); n != 1 {
		t.Errorf("%d retry states, want 1", n)
	}
}

type errString string

func (e errString) Error() string { return string(e) }

func contents(cs ...*snapv1.VolumeSnapshotContent) []*snapv1.VolumeSnapshotContent { return cs }

// The first readiness poll comes a second after the cut, or after
// --retry-interval-start when that is longer, as the community sidecar's
// requeue with its 1 s default: the 50 ms error retry start of our own
// defaults would cost a dozen driver calls in the first second.
func TestFirstPollDelay(t *testing.T) {
	for retryStart, want := range map[time.Duration]time.Duration{
		50 * time.Millisecond: time.Second,
		time.Second:           time.Second,
		3 * time.Second:       3 * time.Second,
	} {
		h := newHarness(t, setup{contents: contents(newContent("c1")), objects: classes, config: func(c *Config) {
			c.Backoff = workloop.Backoff{Start: retryStart, Max: time.Minute}
		}})
		h.driver.script(createCall(goldRequest(nil), snapOf("snap-id", false), nil))
		if res, err := h.sync("c1"); err != nil || res.RequeueAfter != want {
			t.Errorf("retry start %v: first sync %v, %v; want a poll after %v", retryStart, res, err, want)
		}
	}
}

func TestPreProvisioned(t *testing.T) {
	list := csi.Capabilities{CreateDeleteSnapshot: true, ListSnapshots: true}
	imported := func(opts ...testkit.ContentOption) []*snapv1.VolumeSnapshotContent {
		base := []testkit.ContentOption{testkit.PreProvisioned("backend-1"), unmarked(), testkit.RefTo("default", "snap-1", ""), testkit.ClassName("")}
		return contents(newContent("c1", append(base, opts...)...))
	}
	runSyncCases(t, map[string]syncCase{
		"with LIST_SNAPSHOTS the driver's status is stored": {
			setup:          setup{contents: imported(), caps: list},
			calls:          []call{getCall("backend-1", snapOf("backend-1", true), nil)},
			wantWrites:     []string{"patch status"},
			wantFinalizers: bound,
			wantStatus:     ptr.To(testkit.Cut("backend-1", true)),
		},
		"with LIST_SNAPSHOTS an unready snapshot is polled": {
			setup:          setup{contents: imported(), caps: list},
			calls:          []call{getCall("backend-1", snapOf("backend-1", false), nil)},
			wantRequeue:    minPollStart,
			wantWrites:     []string{"patch status"},
			wantFinalizers: bound,
			wantStatus:     ptr.To(testkit.Cut("backend-1", false)),
		},
		"without LIST_SNAPSHOTS the snapshot is taken to be ready, without a call": {
			setup:          setup{contents: imported()},
			wantWrites:     []string{"patch status"},
			wantFinalizers: bound,
			wantStatus:     &snapv1.VolumeSnapshotContentStatus{SnapshotHandle: ptr.To("backend-1"), ReadyToUse: ptr.To(true), CreationTime: ptr.To(testTime.UnixNano())},
		},
		"an id the driver does not know is shown in status.error and retried": {
			setup:          setup{contents: imported(), caps: list},
			calls:          []call{getCall("backend-1", nil, nil)},
			wantRequeue:    retryBackoff.Start,
			wantWrites:     []string{"patch status"},
			wantEvents:     []string{`Warning SnapshotContentCheckandUpdateFailed Failed to check snapshot status: the CSI driver does not know snapshot "backend-1"`},
			wantFinalizers: bound,
			wantStatus:     ptr.To(errorStatus(`Failed to check snapshot status: the CSI driver does not know snapshot "backend-1"`)),
		},
		"a ListSnapshots error is shown in status.error and retried": {
			setup:          setup{contents: imported(), caps: list},
			calls:          []call{getCall("backend-1", nil, grpcErr(codes.Unauthenticated, "bad token"))},
			wantRequeue:    retryBackoff.Start,
			wantWrites:     []string{"patch status"},
			wantEvents:     []string{"Warning SnapshotContentCheckandUpdateFailed Failed to check snapshot status: Unauthenticated: bad token"},
			wantFinalizers: bound,
			wantStatus:     ptr.To(errorStatus("Failed to check snapshot status: Unauthenticated: bad token")),
		},
		"the class's list secret, resolved from its template, goes with ListSnapshots": {
			setup: setup{contents: imported(testkit.ClassName("gold")), caps: list, objects: classes,
				secrets: objs(testkit.Secret("secrets", "list-c1", map[string]string{"list": "token"}))},
			calls: []call{{method: "GetSnapshot", id: "backend-1", secrets: map[string]string{"list": "token"},
				snap: snapOf("backend-1", true)}},
			wantWrites:     []string{"patch status"},
			wantFinalizers: bound,
			wantStatus:     ptr.To(testkit.Cut("backend-1", true)),
		},
		"an unbound Delete content with a handle (Velero) gets the finalizer at once": {
			setup:          setup{contents: imported(testkit.Finalizers())},
			wantWrites:     []string{"patch", "patch status"},
			wantFinalizers: bound,
			wantStatus:     &snapv1.VolumeSnapshotContentStatus{SnapshotHandle: ptr.To("backend-1"), ReadyToUse: ptr.To(true), CreationTime: ptr.To(testTime.UnixNano())},
		},
		"a Retain content with a handle gets no finalizer": {
			setup:      setup{contents: imported(testkit.Finalizers(), testkit.Retain())},
			wantWrites: []string{"patch status"},
			wantStatus: &snapv1.VolumeSnapshotContentStatus{SnapshotHandle: ptr.To("backend-1"), ReadyToUse: ptr.To(true), CreationTime: ptr.To(testTime.UnixNano())},
		},
		"a named class that is missing blocks the list secret and is shown": {
			setup:          setup{contents: imported(testkit.ClassName("gold")), caps: list},
			wantRequeue:    retryBackoff.Start,
			wantWrites:     []string{"patch status"},
			wantEvents:     []string{`Warning SnapshotContentCheckandUpdateFailed Failed to check snapshot status: VolumeSnapshotClass "gold" not found`},
			wantFinalizers: bound,
			wantStatus:     ptr.To(errorStatus(`Failed to check snapshot status: VolumeSnapshotClass "gold" not found`)),
		},
		"a dynamic snapshot polled by CreateSnapshot that answers another id is an error": {
			setup:       setup{contents: contents(newContent("c1", unmarked(), testkit.Status(testkit.Cut("snap-id", false)))), objects: classes},
			calls:       []call{createCall(goldRequest(nil), snapOf("other-id", true), nil)},
			wantRequeue: retryBackoff.Start,
			wantWrites:  []string{"patch status"},
			wantEvents: []string{`Warning SnapshotContentCheckandUpdateFailed Failed to check snapshot status: CreateSnapshot "` +
				testCSIName + `" answered with snapshot "other-id", but the content holds "snap-id"`},
			wantFinalizers: bound,
			wantStatus: ptr.To(withError(testkit.Cut("snap-id", false), `Failed to check snapshot status: CreateSnapshot "`+
				testCSIName+`" answered with snapshot "other-id", but the content holds "snap-id"`)),
		},
	})
}

func TestOnlyOwnContents(t *testing.T) {
	runKindCases(t, map[string]kindCase{
		"a content of another driver is ignored": func(k kind) syncCase {
			return syncCase{
				content:        k.content(testkit.Driver("other.csi.k8s.io")),
				setup:          setup{objects: k.classes()},
				wantMark:       true,
				wantFinalizers: k.bound(),
			}
		},
		"a content that is gone is forgotten without error": func(k kind) syncCase { return syncCase{wantGone: true} },
	})
	// Group members and the node of a content are the snapshot kind's.
	node := func(c *Config) { c.NodeName = "node-a" }
	runSyncCases(t, map[string]syncCase{
		"a member content of a group is left to the binder": {
			setup: setup{contents: contents(newContent("c1", testkit.Annotated(snapshot.AnnVolumeGroupSnapshotHandle, "group-1"),
				testkit.Status(testkit.Cut("snap-id", false))))},
			wantMark:       true,
			wantFinalizers: bound,
			wantStatus:     ptr.To(testkit.Cut("snap-id", false)),
		},
		"a deleted member content of a group is released without DeleteSnapshot": {
			setup: setup{contents: contents(newContent("c1", testkit.Annotated(snapshot.AnnVolumeGroupSnapshotHandle, "group-1"),
				testkit.Status(testkit.Cut("snap-id", false)), markedDeleted()))},
			wantWrites: []string{"patch"},
			wantGone:   true,
		},
		"with --node-deployment a content labelled for another node is ignored": {
			setup: setup{contents: contents(newContent("c1", testkit.Labelled(snapshot.LabelManagedBy, "node-b"))),
				objects: classes, config: node},
			wantMark:       true,
			wantFinalizers: bound,
		},
		"with --node-deployment an unlabelled content is ignored": {
			setup:          setup{contents: contents(newContent("c1")), objects: classes, config: node},
			wantMark:       true,
			wantFinalizers: bound,
		},
		"with --node-deployment a content labelled for this node is cut": {
			setup: setup{contents: contents(newContent("c1", testkit.Labelled(snapshot.LabelManagedBy, "node-a"))),
				objects: classes, config: node},
			calls:          []call{createCall(goldRequest(nil), snapOf("snap-id", true), nil)},
			wantWrites:     []string{"patch status", "patch"},
			wantFinalizers: bound,
			wantStatus:     ptr.To(testkit.Cut("snap-id", true)),
		},
		"without --node-deployment a labelled content is cut": {
			setup:          setup{contents: contents(newContent("c1", testkit.Labelled(snapshot.LabelManagedBy, "node-b"))), objects: classes},
			calls:          []call{createCall(goldRequest(nil), snapOf("snap-id", true), nil)},
			wantWrites:     []string{"patch status", "patch"},
			wantFinalizers: bound,
			wantStatus:     ptr.To(testkit.Cut("snap-id", true)),
		},
	})
}
