package binder

import (
	"context"
	"strings"
	"testing"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/sync/testkit"
)

// Behaviours that must match the community snapshot-controller (v8.7.0)
// (docs/contract.md, docs/compatibility.md).

func TestBoundSnapshotNamesItsContentBeforeTheCSISideReports(t *testing.T) {
	msg := "PersistentVolumeClaim is not bound yet"
	vs := testkit.Snapshot("s1", testkit.ClassName("gold"), testkit.Finalizers(snapshot.FinalizerSnapshotAsSource, snapshot.FinalizerSnapshotBound))
	vs.Status = &snapv1.VolumeSnapshotStatus{Error: &snapv1.VolumeSnapshotError{Message: &msg}}
	pvc, pv := testkit.BoundClaim("pvc1")
	h := newHarness(t, vs, pvc, pv, testkit.SnapshotClass("gold"), newContent(vs))
	if _, err := h.syncSnapshot("s1"); err != nil {
		t.Fatal(err)
	}
	st := h.getSnapshot("s1").Status
	switch {
	case st == nil || st.BoundVolumeSnapshotContentName == nil || *st.BoundVolumeSnapshotContentName != snapshot.ContentNameFor(vs.UID):
		t.Fatalf("status does not name the content: %+v", st)
	case st.ReadyToUse == nil || *st.ReadyToUse:
		t.Errorf("readyToUse = %v, want false", st.ReadyToUse)
	case st.Error != nil:
		t.Errorf("a stale error stays: %v", *st.Error.Message)
	}
}

func TestPreProvisionedContentChecks(t *testing.T) {
	cases := map[string]struct {
		content    *snapv1.VolumeSnapshotContent
		wantReason string
		wantClass  string
	}{
		"a content without a snapshot handle is refused": {
			content:    newContent(testkit.Snapshot("s1"), testkit.Named("c1"), testkit.RefUID("")),
			wantReason: snapshot.ReasonSnapshotContentMismatch,
		},
		"a content being deleted is not bound": {
			content: func() *snapv1.VolumeSnapshotContent {
				c := newContent(testkit.Snapshot("s1"), testkit.Named("c1"), testkit.PreProvisioned("h1"), testkit.RefUID(""))
				now := metav1.Now()
				c.DeletionTimestamp = &now
				return c
			}(),
			wantReason: snapshot.ReasonSnapshotContentMissing,
		},
		"binding copies the snapshot's class into the content": {
			content:   newContent(testkit.Snapshot("s1"), testkit.Named("c1"), testkit.PreProvisioned("h1"), testkit.RefUID("")),
			wantClass: "gold",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			vs := testkit.Snapshot("s1", testkit.FromContent("c1"), testkit.ClassName("gold"))
			h := newHarness(t, vs, tc.content)
			if _, err := h.syncSnapshot("s1"); err != nil {
				t.Fatal(err)
			}
			events := strings.Join(h.events(), "\n")
			if tc.wantReason != "" && !strings.Contains(events, tc.wantReason) {
				t.Errorf("events %q, want reason %s", events, tc.wantReason)
			}
			got := h.getContent("c1")
			if tc.wantClass != "" {
				if got.Spec.VolumeSnapshotClassName == nil || *got.Spec.VolumeSnapshotClassName != tc.wantClass {
					t.Errorf("content class = %v, want %s", got.Spec.VolumeSnapshotClassName, tc.wantClass)
				}
				if got.Spec.VolumeSnapshotRef.UID != vs.UID {
					t.Errorf("content ref uid = %q, want %q", got.Spec.VolumeSnapshotRef.UID, vs.UID)
				}
			} else if got.Spec.VolumeSnapshotRef.UID != "" {
				t.Errorf("refused content was bound (uid %q)", got.Spec.VolumeSnapshotRef.UID)
			}
		})
	}
}

func TestVolumeOfAnotherClaimIsNotSnapshotted(t *testing.T) {
	pvc, pv := testkit.BoundClaim("pvc1")
	pv.Spec.ClaimRef.Name = "someone-else"
	h := newHarness(t, testkit.Snapshot("s1", testkit.ClassName("gold")), pvc, pv, testkit.SnapshotClass("gold"))
	if _, err := h.syncSnapshot("s1"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.api.Snap.SnapshotV1().VolumeSnapshotContents().Get(context.Background(), snapshot.ContentNameFor("uid-s1"), metav1.GetOptions{}); err == nil {
		t.Fatal("content created for a volume bound to another claim")
	}
	if ev := strings.Join(h.events(), "\n"); !strings.Contains(ev, "claimRef") {
		t.Errorf("events %q do not explain the claimRef mismatch", ev)
	}
}

func TestDistributedSnapshottingMatchesNodesByAnyTopologyKey(t *testing.T) {
	const zoneKey = "topology.drv.example.com/node"
	pvc, pv := testkit.BoundClaim("pvc1")
	pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
			Key: zoneKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"rack-7"},
		}}}},
	}}
	nodes := []*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{zoneKey: "rack-1"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "node-b", Labels: map[string]string{zoneKey: "rack-7"}}},
	}
	h := newHarnessWith(t, func(c *Config) { c.DistributedSnapshotting = true },
		testkit.Snapshot("s1", testkit.ClassName("gold")), pvc, pv, testkit.SnapshotClass("gold"), nodes[0], nodes[1])
	if _, err := h.syncSnapshot("s1"); err != nil {
		t.Fatal(err)
	}
	c := h.getContent(snapshot.ContentNameFor("uid-s1"))
	if got := c.Labels[snapshot.LabelManagedBy]; got != "node-b" {
		t.Errorf("managed-by label = %q, want node-b (the Node that matches the PV's affinity)", got)
	}
}

func TestSourceVolumeModeOff(t *testing.T) {
	pvc, pv := testkit.BoundClaim("pvc1")
	h := newHarnessWith(t, func(c *Config) { c.SourceVolumeMode = false },
		testkit.Snapshot("s1", testkit.ClassName("gold")), pvc, pv, testkit.SnapshotClass("gold"))
	if _, err := h.syncSnapshot("s1"); err != nil {
		t.Fatal(err)
	}
	if m := h.getContent(snapshot.ContentNameFor("uid-s1")).Spec.SourceVolumeMode; m != nil {
		t.Errorf("sourceVolumeMode = %v, want unset with --prevent-volume-mode-conversion=false", *m)
	}
}
