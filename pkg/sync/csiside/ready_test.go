package csiside

import (
	"testing"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	"google.golang.org/grpc/codes"
	"k8s.io/utils/ptr"

	"github.com/snapkeeper/snapkeeper/pkg/csi"
	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/sync/testkit"
)

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
	node := func(c *Config) { c.NodeName = "node-a" }
	runSyncCases(t, map[string]syncCase{
		"a content of another driver is ignored": {
			setup:          setup{contents: contents(newContent("c1", testkit.Driver("other.csi.k8s.io"))), objects: classes},
			wantMark:       true,
			wantFinalizers: bound,
		},
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
		"a content that is gone is forgotten without error": {wantGone: true},
	})
}
