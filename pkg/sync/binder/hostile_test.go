package binder

import (
	"slices"
	"strings"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/sync/testkit"
)

// Objects the CRD's rules or the webhook refuse today can still reach the
// binder: stored before the rules existed, or while the webhook was absent.
// Each ends as one status error and one Warning event that name the field
// and the fix; nothing panics, no content is created, nothing is retried.
func TestHostileSnapshotsEndAsOneStatusError(t *testing.T) {
	pvc, pv := testkit.BoundClaim("pvc1")
	both := testkit.Snapshot("s1", testkit.ClassName("gold"))
	both.Spec.Source.VolumeSnapshotContentName = ptr.To("some-content")
	neither := testkit.Snapshot("s1", testkit.ClassName("gold"))
	neither.Spec.Source = snapv1.VolumeSnapshotSource{}
	secretClass := func(name, ns string) *snapv1.VolumeSnapshotClass {
		return testkit.SnapshotClass("gold", testkit.Params(map[string]string{snapshot.ParamSecretName: name, snapshot.ParamSecretNamespace: ns}))
	}
	cases := map[string]struct {
		vs      *snapv1.VolumeSnapshot
		class   *snapv1.VolumeSnapshotClass
		reason  string
		message []string
	}{
		"a snapshot with both sources is refused": {
			vs: both, class: testkit.SnapshotClass("gold"), reason: snapshot.ReasonSnapshotValidationError,
			message: []string{"sets both spec.source.persistentVolumeClaimName and spec.source.volumeSnapshotContentName", "exactly one must be set"},
		},
		"a snapshot with neither source is refused instead of dereferencing nil": {
			vs: neither, class: testkit.SnapshotClass("gold"), reason: snapshot.ReasonSnapshotValidationError,
			message: []string{"sets neither", "exactly one must be set"},
		},
		"a namespace template naming the snapshot cannot reach another tenant's namespace": {
			vs: testkit.Snapshot("kube-system", testkit.ClassName("gold")), class: secretClass("creds", "${volumesnapshot.name}"),
			reason: snapshot.ReasonGetSnapshotClassFailed,
			message: []string{snapshot.ParamSecretNamespace, "uses ${volumesnapshot.name}, which is not allowed in a namespace",
				"use ${volumesnapshotcontent.name}, ${volumesnapshot.namespace} or a literal namespace"},
		},
		"a group token in a single snapshot class is refused": {
			vs: testkit.Snapshot("s1", testkit.ClassName("gold")), class: secretClass("${volumegroupsnapshot.name}", "${volumesnapshot.namespace}"),
			reason:  snapshot.ReasonGetSnapshotClassFailed,
			message: []string{"uses ${volumegroupsnapshot.name}, which is not allowed in a secret name"},
		},
		"an unknown token is refused": {
			vs: testkit.Snapshot("s1", testkit.ClassName("gold")), class: secretClass("${pvc.name}", "ns"),
			reason: snapshot.ReasonGetSnapshotClassFailed, message: []string{"uses ${pvc.name}"},
		},
		"an unterminated token is refused": {
			vs: testkit.Snapshot("s1", testkit.ClassName("gold")), class: secretClass("creds", "${volumesnapshot.namespace"),
			reason: snapshot.ReasonGetSnapshotClassFailed, message: []string{"without its \"}\""},
		},
		"a namespace with a path in it is refused": {
			vs: testkit.Snapshot("s1", testkit.ClassName("gold")), class: secretClass("creds", "../kube-system"),
			reason: snapshot.ReasonGetSnapshotClassFailed, message: []string{"secret namespace \"../kube-system\"", "set it to a namespace name"},
		},
		"a name with a slash is refused": {
			vs: testkit.Snapshot("s1", testkit.ClassName("gold")), class: secretClass("a/b", "${volumesnapshot.namespace}"),
			reason: snapshot.ReasonGetSnapshotClassFailed, message: []string{"secret name \"a/b\"", "set it to a Secret name"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, tc.vs, tc.class, pvc, pv)
			expectOneStatusError(t, h, tc.vs.Name, tc.reason, tc.message)
		})
	}
}

// A Node name may be 253 characters, a label value only 63: with
// distributed snapshotting the content would be refused by the API server
// on every retry, so the binder says so instead of creating it.
func TestNodeNameTooLongForTheManagedByLabel(t *testing.T) {
	pvc, pv := testkit.BoundClaim("pvc1")
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: strings.Repeat("n", 253), Labels: map[string]string{"rack": "r1"}}}
	pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "rack", Operator: corev1.NodeSelectorOpIn, Values: []string{"r1"}}},
	}}}}
	vs := testkit.Snapshot("s1", testkit.ClassName("gold"))
	h := newHarnessWith(t, func(c *Config) { c.DistributedSnapshotting = true }, vs, testkit.SnapshotClass("gold"), pvc, pv, node)
	expectOneStatusError(t, h, "s1", snapshot.ReasonSnapshotContentCreationFailed,
		[]string{"cannot be the value of label " + snapshot.LabelManagedBy, "at most 63 characters"})
}

// expectOneStatusError syncs snapshot name twice and checks that the first
// sync wrote only its status.error (with reason's event) and the second
// nothing at all.
func expectOneStatusError(t *testing.T, h *harness, name, reason string, message []string) {
	t.Helper()
	res, err := h.syncSnapshot(name)
	if err != nil {
		t.Fatalf("sync returned %v: the loop would retry with backoff instead of waiting for a fix", err)
	}
	if res.RequeueAfter == 0 {
		t.Error("no slow re-check")
	}
	if got := h.writes(); !slices.Equal(got, []string{"patch volumesnapshots/status"}) {
		t.Fatalf("writes = %v, want only the status error", got)
	}
	st := h.getSnapshot(name).Status
	if st == nil || st.Error == nil || st.Error.Message == nil {
		t.Fatalf("status %+v, want an error", st)
	}
	for _, m := range message {
		if !strings.Contains(*st.Error.Message, m) {
			t.Errorf("status.error %q lacks %q", *st.Error.Message, m)
		}
	}
	if ev := h.events(); len(ev) != 1 || !strings.Contains(ev[0], reason) {
		t.Errorf("events = %v, want one %s", ev, reason)
	}
	// Once the cache shows the error, a re-check writes nothing.
	h.api.ClearActions()
	deadline := time.Now().Add(10 * time.Second)
	for {
		cached, err := h.c.snapshots.VolumeSnapshots(testNS).Get(name)
		if err == nil && cached.Status != nil && cached.Status.Error != nil && !h.c.cfg.Writer.Stale(cached) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cache never showed the status error (%v)", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := h.syncSnapshot(name); err != nil {
		t.Fatal(err)
	}
	if got := h.writes(); len(got) != 0 {
		t.Errorf("the re-check wrote %v", got)
	}
	if len(h.api.Contents()) != 0 {
		t.Errorf("contents created: %v", h.api.Contents())
	}
}
