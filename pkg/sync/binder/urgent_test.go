package binder

import (
	"testing"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/sync/testkit"
)

// TestOneWriteLeft: a content event puts its snapshot ahead of the queue
// only when the snapshot is one write from done.
func TestOneWriteLeft(t *testing.T) {
	name := snapshot.ContentNameFor("uid-s1")
	readySnap := func(vs *snapv1.VolumeSnapshot) {
		vs.Status = &snapv1.VolumeSnapshotStatus{BoundVolumeSnapshotContentName: &name, ReadyToUse: ptr.To(true)}
	}
	cases := map[string]struct {
		vs           *snapv1.VolumeSnapshot
		content      *snapv1.VolumeSnapshotContent
		contentInAPI bool
		want         bool
	}{
		"content ready, snapshot not yet": {vs: testkit.Snapshot("s1", testkit.BoundTo(name)),
			content: newContent(testkit.Snapshot("s1"), testkit.Ready("h")), contentInAPI: true, want: true},
		"content not ready": {vs: testkit.Snapshot("s1", testkit.BoundTo(name)),
			content: newContent(testkit.Snapshot("s1")), contentInAPI: true, want: false},
		"both ready already": {vs: testkit.Snapshot("s1", testkit.BoundTo(name), testkit.SnapshotFunc(readySnap)),
			content: newContent(testkit.Snapshot("s1"), testkit.Ready("h")), contentInAPI: true, want: false},
		"deleting, content gone": {vs: testkit.Snapshot("s1", testkit.BoundTo(name), testkit.Deleted(), testkit.Finalizers(snapshot.FinalizerSnapshotBound)),
			content: newContent(testkit.Snapshot("s1"), testkit.Ready("h")), want: true},
		"deleting, content still there": {vs: testkit.Snapshot("s1", testkit.BoundTo(name), testkit.Deleted()),
			content: newContent(testkit.Snapshot("s1"), testkit.Ready("h")), contentInAPI: true, want: false},
		"another snapshot of that name": {vs: testkit.Snapshot("s1", testkit.BoundTo(name)),
			content: newContent(testkit.Snapshot("s1"), testkit.Ready("h"), testkit.RefUID("uid-old")), contentInAPI: true, want: false},
	}
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			objs := []runtime.Object{tc.vs}
			if tc.contentInAPI {
				objs = append(objs, tc.content)
			}
			h := newHarness(t, objs...)
			if got := h.c.oneWriteLeft(testNS, "s1", tc.content); got != tc.want {
				t.Fatalf("oneWriteLeft = %v, want %v", got, tc.want)
			}
		})
	}
}
