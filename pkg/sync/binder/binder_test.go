package binder

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/sync/testkit"
)

func TestMain(m *testing.M) {
	// The fake clientsets cannot serve watch-list streams; client-go reads
	// this gate from the environment on first use.
	os.Setenv("KUBE_FEATURE_WatchListClient", "false")
	os.Exit(m.Run())
}

func TestDynamicSnapshotWithDefaultClassCreatesContentInThreeWrites(t *testing.T) {
	pvc, pv := testkit.BoundClaim("pvc1")
	vs := testkit.Snapshot("s1")
	h := newHarness(t, vs, pvc, pv, testkit.SnapshotClass("gold", testkit.DefaultClass()),
		testkit.SnapshotClass("other", testkit.Driver("other.driver"), testkit.DefaultClass()))

	if _, err := h.syncSnapshot("s1"); err != nil {
		t.Fatal(err)
	}
	// The claim is written with update: the community RBAC grants no patch
	// on claims.
	want := []string{"patch volumesnapshots", "create volumesnapshotcontents", "update persistentvolumeclaims"}
	if got := h.writes(); !slices.Equal(got, want) {
		t.Fatalf("writes = %v, want %v", got, want)
	}
	got := h.getSnapshot("s1")
	if got.Spec.VolumeSnapshotClassName == nil || *got.Spec.VolumeSnapshotClassName != "gold" {
		t.Errorf("default class not written into spec: %v", got.Spec.VolumeSnapshotClassName)
	}
	for _, f := range []string{snapshot.FinalizerSnapshotAsSource, snapshot.FinalizerSnapshotBound} {
		if !snapshot.HasFinalizer(got, f) {
			t.Errorf("snapshot lacks finalizer %s", f)
		}
	}
	claim, _ := h.api.Kube.CoreV1().PersistentVolumeClaims(testNS).Get(context.Background(), "pvc1", metav1.GetOptions{})
	if !snapshot.HasFinalizer(claim, snapshot.FinalizerPVCAsSource) {
		t.Error("claim lacks the pvc-as-source finalizer")
	}
	c := h.getContent(snapshot.ContentNameFor(vs.UID))
	switch {
	case c.Spec.VolumeSnapshotRef.UID != vs.UID:
		t.Errorf("content ref uid %q, want %q", c.Spec.VolumeSnapshotRef.UID, vs.UID)
	case c.Spec.Source.VolumeHandle == nil || *c.Spec.Source.VolumeHandle != "vol-1":
		t.Errorf("content source %v, want vol-1", c.Spec.Source)
	case c.Spec.Driver != testDriver || c.Spec.DeletionPolicy != snapv1.VolumeSnapshotContentDelete:
		t.Errorf("content driver/policy = %s/%s", c.Spec.Driver, c.Spec.DeletionPolicy)
	case !snapshot.HasFinalizer(c, snapshot.FinalizerContentBound):
		t.Error("content not born with its finalizer")
	case snapshot.HasAnnotation(c, snapshot.AnnBeingCreated, snapshot.ValueYes):
		t.Error("content born marked being-created: the CSI side marks it right before its call")
	case c.Spec.SourceVolumeMode == nil || *c.Spec.SourceVolumeMode != corev1.PersistentVolumeFilesystem:
		t.Errorf("sourceVolumeMode = %v", c.Spec.SourceVolumeMode)
	}
}

func TestSnapshotProblemsBecomeStatusErrorsWithoutContent(t *testing.T) {
	pvc, pv := testkit.BoundClaim("pvc1")
	unbound := pvc.DeepCopy()
	unbound.Status.Phase = corev1.ClaimPending
	deleting := pvc.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{}
	deleting.Finalizers = []string{"kubernetes.io/pvc-protection"}
	cases := map[string]struct {
		objs    []runtime.Object
		vs      *snapv1.VolumeSnapshot
		message string
		reason  string
	}{
		"no default class names the annotation to set": {
			objs: []runtime.Object{pvc, pv}, vs: testkit.Snapshot("s1"),
			message: "no default VolumeSnapshotClass for driver \"drv.example.com\"", reason: "SetDefaultSnapshotClassFailed",
		},
		"two default classes are named": {
			objs:    []runtime.Object{pvc, pv, testkit.SnapshotClass("a", testkit.DefaultClass()), testkit.SnapshotClass("b", testkit.DefaultClass())},
			vs:      testkit.Snapshot("s1"),
			message: "2 VolumeSnapshotClasses are the default for driver \"drv.example.com\" (a, b)", reason: "SetDefaultSnapshotClassFailed",
		},
		"a class of another driver is refused": {
			objs: []runtime.Object{pvc, pv, testkit.SnapshotClass("x", testkit.Driver("x.driver"))}, vs: testkit.Snapshot("s1", testkit.ClassName("x")),
			message: "is for driver \"x.driver\" but the volume", reason: "GetSnapshotClassFailed",
		},
		"a missing class is waited for": {
			objs: []runtime.Object{pvc, pv}, vs: testkit.Snapshot("s1", testkit.ClassName("later")),
			message: "VolumeSnapshotClass \"later\" does not exist yet", reason: "GetSnapshotClassFailed",
		},
		"a missing claim is waited for": {
			objs: []runtime.Object{testkit.SnapshotClass("a", testkit.DefaultClass())}, vs: testkit.Snapshot("s1"),
			message: "PersistentVolumeClaim ns/pvc1 does not exist yet", reason: "SnapshotContentCreationFailed",
		},
		"an unbound claim is waited for": {
			objs: []runtime.Object{unbound, pv, testkit.SnapshotClass("a", testkit.DefaultClass())}, vs: testkit.Snapshot("s1"),
			message: "is not bound yet", reason: "SnapshotContentCreationFailed",
		},
		"a claim being deleted is refused and gets no finalizer": {
			objs: []runtime.Object{deleting, pv, testkit.SnapshotClass("a", testkit.DefaultClass())}, vs: testkit.Snapshot("s1"),
			message: "is being deleted", reason: "SnapshotContentCreationFailed",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, append(tc.objs, tc.vs)...)
			res, err := h.syncSnapshot("s1")
			if err != nil {
				t.Fatal(err)
			}
			if res.RequeueAfter == 0 {
				t.Error("a waiting snapshot must be re-checked later")
			}
			if got := h.writes(); !slices.Equal(got, []string{"patch volumesnapshots/status"}) {
				t.Fatalf("writes = %v, want one status patch", got)
			}
			st := h.getSnapshot("s1").Status
			if st == nil || st.Error == nil || !strings.Contains(*st.Error.Message, tc.message) {
				t.Fatalf("status %+v, want error containing %q", st, tc.message)
			}
			if ev := h.events(); len(ev) != 1 || !strings.Contains(ev[0], tc.reason) {
				t.Errorf("events = %v, want one %s", ev, tc.reason)
			}
			// Same problem again: no write, no event (transitions only).
			h.api.ClearActions()
			h.c.snapshots.VolumeSnapshots(testNS) // cache may lag; use the server copy
			if err := h.c.setError(context.Background(), h.getSnapshot("s1"), problemf(tc.reason, "%s", *st.Error.Message)); err != nil {
				t.Fatal(err)
			}
			if got := h.writes(); len(got) != 0 {
				t.Errorf("repeating the same problem wrote %v", got)
			}
		})
	}
}

func TestReadyContentIsMirroredOnceAndThenCostsNothing(t *testing.T) {
	pvc, pv := testkit.BoundClaim("pvc1")
	vs := testkit.Snapshot("s1", testkit.ClassName("gold"), testkit.Finalizers(snapshot.FinalizerSnapshotAsSource, snapshot.FinalizerSnapshotBound))
	content := newContent(vs, testkit.Ready("snap-1"))
	h := newHarness(t, vs, content, pvc, pv, testkit.SnapshotClass("gold"))

	if _, err := h.syncSnapshot("s1"); err != nil {
		t.Fatal(err)
	}
	if got := h.writes(); !slices.Equal(got, []string{"patch volumesnapshots/status"}) {
		t.Fatalf("writes = %v", got)
	}
	got := h.getSnapshot("s1")
	st := got.Status
	if st == nil || *st.BoundVolumeSnapshotContentName != content.Name || !*st.ReadyToUse || st.RestoreSize.Value() != 1<<30 || st.CreationTime == nil {
		t.Fatalf("status = %+v", st)
	}
	if ev := h.events(); len(ev) != 1 || !strings.Contains(ev[0], "SnapshotReady") {
		t.Errorf("events = %v, want one SnapshotReady", ev)
	}
	// As after a restart: the same objects again cost no write.
	h.api.ClearActions()
	if _, err := h.c.bound(context.Background(), h.c.snap(got), snapContent{content}); err != nil {
		t.Fatal(err)
	}
	if w := h.writes(); len(w) != 0 {
		t.Fatalf("a ready snapshot cost writes: %v", w)
	}
}

func TestPreProvisionedBinding(t *testing.T) {
	cases := map[string]struct {
		vs      *snapv1.VolumeSnapshot
		content *snapv1.VolumeSnapshotContent
		writes  []string
		message string
	}{
		"an unclaimed content gets the snapshot's uid and its finalizer in one write": {
			vs:      testkit.Snapshot("s1", testkit.FromContent("pre")),
			content: newContent(testkit.Snapshot("s1"), testkit.Named("pre"), testkit.PreProvisioned("h1"), testkit.RefUID(""), testkit.Finalizers()),
			writes:  []string{"patch volumesnapshots", "patch volumesnapshotcontents"},
		},
		"a content of another snapshot is refused": {
			vs:      testkit.Snapshot("s1", testkit.FromContent("pre")),
			content: newContent(testkit.Snapshot("other"), testkit.Named("pre"), testkit.PreProvisioned("h1")),
			writes:  []string{"patch volumesnapshots/status"},
			message: "is bound to VolumeSnapshot ns/other",
		},
		"a content claimed by an older namesake is refused": {
			vs:      testkit.Snapshot("s1", testkit.FromContent("pre")),
			content: newContent(testkit.Snapshot("s1"), testkit.Named("pre"), testkit.PreProvisioned("h1"), testkit.RefUID("old-uid")),
			writes:  []string{"patch volumesnapshots/status"},
			message: "uid \"old-uid\"",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, tc.vs, tc.content)
			if _, err := h.syncSnapshot("s1"); err != nil {
				t.Fatal(err)
			}
			if got := h.writes(); !slices.Equal(got, tc.writes) {
				t.Fatalf("writes = %v, want %v", got, tc.writes)
			}
			if tc.message == "" {
				c := h.getContent("pre")
				if c.Spec.VolumeSnapshotRef.UID != tc.vs.UID || !snapshot.HasFinalizer(c, snapshot.FinalizerContentBound) {
					t.Fatalf("content not bound: %+v", c)
				}
				return
			}
			st := h.getSnapshot("s1").Status
			if st == nil || st.Error == nil || !strings.Contains(*st.Error.Message, tc.message) {
				t.Fatalf("status %+v, want error %q", st, tc.message)
			}
		})
	}
}

func TestDeletion(t *testing.T) {
	fins := testkit.Finalizers(snapshot.FinalizerSnapshotAsSource, snapshot.FinalizerSnapshotBound, "other.io/keep")
	vs := testkit.Snapshot("s1", testkit.Deleted(), fins, testkit.BoundTo(snapshot.ContentNameFor("uid-s1")))
	pending := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "restore", Namespace: testNS},
		Spec: corev1.PersistentVolumeClaimSpec{DataSource: &corev1.TypedLocalObjectReference{
			APIGroup: ptr.To(snapshot.GroupName), Kind: snapshot.KindSnapshot, Name: "s1"}},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending},
	}
	cases := map[string]struct {
		objs       []runtime.Object
		writes     []string
		finalizers []string
	}{
		"a Delete content is marked and deleted; the snapshot waits for it": {
			objs:       []runtime.Object{vs, newContent(vs, testkit.Ready("h"))},
			writes:     []string{"patch volumesnapshotcontents", "delete volumesnapshotcontents"},
			finalizers: vs.Finalizers,
		},
		"a Retain content is marked and the snapshot released at once": {
			objs:       []runtime.Object{vs, newContent(vs, testkit.Ready("h"), testkit.Retain())},
			writes:     []string{"patch volumesnapshotcontents", "patch volumesnapshots"},
			finalizers: []string{"other.io/keep"},
		},
		"with the content gone the snapshot is released, other finalizers kept": {
			objs:       []runtime.Object{vs},
			writes:     []string{"patch volumesnapshots"},
			finalizers: []string{"other.io/keep"},
		},
		"a pending restore keeps every finalizer and leaves the content alone": {
			objs:       []runtime.Object{vs, pending, newContent(vs, testkit.Ready("h"))},
			writes:     nil,
			finalizers: vs.Finalizers,
		},
		"a content of another snapshot is never touched": {
			objs:       []runtime.Object{vs, newContent(vs, testkit.Ready("h"), testkit.RefUID("someone-else"))},
			writes:     []string{"patch volumesnapshots"},
			finalizers: []string{"other.io/keep"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, tc.objs...)
			if _, err := h.syncSnapshot("s1"); err != nil {
				t.Fatal(err)
			}
			if got := h.writes(); !slices.Equal(got, tc.writes) {
				t.Fatalf("writes = %v, want %v", got, tc.writes)
			}
			if got := h.getSnapshot("s1").Finalizers; !slices.Equal(got, tc.finalizers) {
				t.Errorf("finalizers = %v, want %v", got, tc.finalizers)
			}
			c, err := h.api.Snap.SnapshotV1().VolumeSnapshotContents().Get(context.Background(), snapshot.ContentNameFor("uid-s1"), metav1.GetOptions{})
			if err == nil && c.Spec.VolumeSnapshotRef.UID == vs.UID && len(tc.writes) > 0 && !snapshot.HasAnnotation(c, snapshot.AnnBeingDeleted, snapshot.ValueYes) {
				t.Error("own content lacks the being-deleted mark")
			}
			if err == nil && len(tc.writes) == 0 && (snapshot.HasAnnotation(c, snapshot.AnnBeingDeleted, snapshot.ValueYes) || c.DeletionTimestamp != nil) {
				t.Error("the content of a snapshot a claim restores from was marked or deleted")
			}
		})
	}
}

func TestClaimFinalizerHeldUntilTheSnapshotIsReady(t *testing.T) {
	pvc, pv := testkit.BoundClaim("pvc1")
	pvc.Finalizers = []string{"kubernetes.io/pvc-protection", snapshot.FinalizerPVCAsSource}
	vs := testkit.Snapshot("s1", testkit.BoundTo(snapshot.ContentNameFor("uid-s1")))
	cases := map[string]struct {
		content *snapv1.VolumeSnapshotContent
		release bool
	}{
		"content without handle keeps it":                      {newContent(vs, testkit.Marked(snapshot.AnnBeingCreated)), false},
		"handle but still marked keeps it":                     {newContent(vs, testkit.Ready("h"), testkit.Marked(snapshot.AnnBeingCreated)), false},
		"handle, unmarked, ready releases it":                  {newContent(vs, testkit.Ready("h")), true},
		"handle, unmarked, not ready yet keeps it (upload)":    {newContent(vs, testkit.Status(testkit.Cut("h", false))), false},
		"a snapshot whose content is not created yet keeps it": {nil, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs := []runtime.Object{pvc, pv, vs}
			if tc.content != nil {
				objs = append(objs, tc.content)
			}
			h := newHarness(t, objs...)
			if _, err := h.c.syncPVC(context.Background(), testNS+"/pvc1"); err != nil {
				t.Fatal(err)
			}
			claim, _ := h.api.Kube.CoreV1().PersistentVolumeClaims(testNS).Get(context.Background(), "pvc1", metav1.GetOptions{})
			if got := !snapshot.HasFinalizer(claim, snapshot.FinalizerPVCAsSource); got != tc.release {
				t.Fatalf("released = %v, want %v (finalizers %v)", got, tc.release, claim.Finalizers)
			}
			if !snapshot.HasFinalizer(claim, "kubernetes.io/pvc-protection") {
				t.Error("another component's finalizer was removed")
			}
		})
	}
}

func TestBackupToolContentGetsFinalizerBoundOrNot(t *testing.T) {
	velero := newContent(testkit.Snapshot("gone"), testkit.Named("velero-c"), testkit.PreProvisioned("h1"), testkit.Finalizers(), testkit.RefUID(""))
	velero.Finalizers = []string{"velero.io/volume-snapshot-content-protect-finalizer"}
	h := newHarness(t, velero)
	if _, err := h.c.syncContent(context.Background(), "velero-c"); err != nil {
		t.Fatal(err)
	}
	got := h.getContent("velero-c").Finalizers
	want := []string{"velero.io/volume-snapshot-content-protect-finalizer", snapshot.FinalizerContentBound}
	if !slices.Equal(got, want) {
		t.Fatalf("finalizers = %v, want %v", got, want)
	}
}

func TestAPIErrorsAreReturnedForRetry(t *testing.T) {
	pvc, pv := testkit.BoundClaim("pvc1")
	cases := map[string]struct {
		verb, resource string
		err            error
	}{
		"a conflict on the snapshot": {"patch", "volumesnapshots", apierrors.NewConflict(schema.GroupResource{Resource: "volumesnapshots"}, "s1", nil)},
		"a failing claim update":     {"update", "persistentvolumeclaims", apierrors.NewInternalError(errors.New("boom"))},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, testkit.Snapshot("s1"), pvc, pv, testkit.SnapshotClass("gold", testkit.DefaultClass()))
			h.api.Inject(testkit.Fault{Verb: tc.verb, Resource: tc.resource, Err: tc.err})
			if _, err := h.syncSnapshot("s1"); err == nil {
				t.Fatal("want the error back, for a rate-limited retry")
			}
			if _, err := h.api.Snap.SnapshotV1().VolumeSnapshotContents().Get(context.Background(), snapshot.ContentNameFor("uid-s1"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Fatalf("content created although a protection write failed: %v", err)
			}
		})
	}
}

// A cache listed while another process released and the API server
// removed a snapshot (or a group) still shows it alive with its finalizers.
// The binder must not make its content from that copy: the content would
// outlive it, with its backend snapshot, for good (found by
// TestControllerKills, docs/history/runs.md). One rule of the lifecycle,
// checked for both kinds.
func TestNoContentForASubjectGoneBehindTheCache(t *testing.T) {
	pvc, pv := testkit.BoundClaim("pvc1")
	pvc.Labels = map[string]string{"app": "db"}
	vs := testkit.Snapshot("s1", testkit.ClassName("gold"), testkit.Finalizers(snapshot.FinalizerSnapshotAsSource, snapshot.FinalizerSnapshotBound))
	gold := "gold"
	g := &groupv1.VolumeGroupSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: "g1", Namespace: testNS, UID: "uid-g1", Finalizers: []string{snapshot.FinalizerGroupSnapshotBound}},
		Spec: groupv1.VolumeGroupSnapshotSpec{VolumeGroupSnapshotClassName: &gold, Source: groupv1.VolumeGroupSnapshotSource{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}},
	}
	groupClass := &groupv1.VolumeGroupSnapshotClass{ObjectMeta: metav1.ObjectMeta{Name: "gold"}, Driver: testDriver,
		DeletionPolicy: snapv1.VolumeSnapshotContentDelete}
	cases := map[string]struct {
		subject func(h *harness) subject
		remove  func(ctx context.Context, h *harness) error
		content string
	}{
		"snapshot": {
			subject: func(h *harness) subject { return h.c.snap(h.getSnapshot("s1")) },
			remove: func(ctx context.Context, h *harness) error {
				return h.api.Snap.SnapshotV1().VolumeSnapshots(testNS).Delete(ctx, "s1", metav1.DeleteOptions{})
			},
			content: "volumesnapshotcontents",
		},
		"group": {
			subject: func(h *harness) subject {
				cached, err := h.c.groups.VolumeGroupSnapshots(testNS).Get("g1")
				if err != nil {
					t.Fatal(err)
				}
				return h.c.group(cached)
			},
			remove: func(ctx context.Context, h *harness) error {
				return h.api.Snap.GroupsnapshotV1().VolumeGroupSnapshots(testNS).Delete(ctx, "g1", metav1.DeleteOptions{})
			},
			content: "volumegroupsnapshotcontents",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarnessWith(t, func(cfg *Config) { cfg.Groups = true }, vs, g, pvc, pv, testkit.SnapshotClass("gold"), groupClass)
			cached := tc.subject(h)
			if err := tc.remove(context.Background(), h); err != nil {
				t.Fatal(err)
			}
			h.api.ClearActions()
			if _, err := h.c.dynamic(context.Background(), cached); err != nil {
				t.Fatal(err)
			}
			for _, w := range h.writes() {
				if strings.Contains(w, tc.content) {
					t.Errorf("wrote %q for a %s the API server no longer holds", w, name)
				}
			}
		})
	}
}
