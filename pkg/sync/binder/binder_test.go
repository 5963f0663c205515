package binder

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

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

// A problem of a dynamic subject is shown in its status and an event, once.
// The class rules and the claim's state are the same for both kinds; the
// group reads its claims by its selector (labelled pvc1 here).
func TestSnapshotProblemsBecomeStatusErrorsWithoutContent(t *testing.T) {
	pvc, pv := testkit.BoundClaim("pvc1")
	pvc.Labels = map[string]string{testkit.GroupLabel: testkit.GroupLabelValue}
	unbound := pvc.DeepCopy()
	unbound.Status.Phase = corev1.ClaimPending
	deleting := pvc.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{}
	deleting.Finalizers = []string{"kubernetes.io/pvc-protection"}
	cases := map[string]struct {
		objs    func(k kind) []runtime.Object
		subject []subjectOption
		// message and reason in the snapshot kind's words; group is the
		// group kind's message where it says more than other words.
		message, group string
		reason         string
		snapshotOnly   bool
	}{
		"no default class names the annotation to set": {
			objs:    func(k kind) []runtime.Object { return objs(pvc, pv) },
			message: "no default VolumeSnapshotClass for driver \"drv.example.com\"", reason: "SetDefaultSnapshotClassFailed",
		},
		"two default classes are named": {
			objs: func(k kind) []runtime.Object {
				return objs(pvc, pv, k.class("a", testkit.DefaultClass()), k.class("b", testkit.DefaultClass()))
			},
			message: "2 VolumeSnapshotClasses are the default for driver \"drv.example.com\" (a, b)", reason: "SetDefaultSnapshotClassFailed",
		},
		"a class of another driver is refused": {
			objs:    func(k kind) []runtime.Object { return objs(pvc, pv, k.class("x", testkit.Driver("x.driver"))) },
			subject: []subjectOption{testkit.ClassName("x")},
			message: "is for driver \"x.driver\" but the volume", group: "is for driver \"x.driver\" but the chosen claims' volumes",
			reason: "GetSnapshotClassFailed",
		},
		"a missing class is waited for": {
			objs:    func(k kind) []runtime.Object { return objs(pvc, pv) },
			subject: []subjectOption{testkit.ClassName("later")},
			message: "VolumeSnapshotClass \"later\" does not exist yet", reason: "GetSnapshotClassFailed",
		},
		"a missing claim is waited for": {
			objs:    func(k kind) []runtime.Object { return objs(k.class("a", testkit.DefaultClass())) },
			message: "PersistentVolumeClaim ns/pvc1 does not exist yet", reason: "SnapshotContentCreationFailed",
			snapshotOnly: true, // a group selects claims: none is missing, it matches none
		},
		"an unbound claim is waited for": {
			objs:    func(k kind) []runtime.Object { return objs(unbound, pv, k.class("a", testkit.DefaultClass())) },
			message: "is not bound yet", reason: "SnapshotContentCreationFailed",
		},
		"a claim being deleted is refused and gets no finalizer": {
			objs:    func(k kind) []runtime.Object { return objs(deleting, pv, k.class("a", testkit.DefaultClass())) },
			message: "is being deleted", reason: "SnapshotContentCreationFailed",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			forKinds(t, func(t *testing.T, k kind) {
				if k.Group && tc.snapshotOnly {
					t.Skip("a rule of snapshots only")
				}
				message := k.Says(tc.message)
				if k.Group && tc.group != "" {
					message = tc.group
				}
				h := k.harness(t, append(tc.objs(k), k.subject("s1", tc.subject...))...)
				res, err := k.sync(h, "s1")
				if err != nil {
					t.Fatal(err)
				}
				if res.RequeueAfter == 0 {
					t.Error("a waiting snapshot must be re-checked later")
				}
				if got := h.writes(); !slices.Equal(got, k.SaysAll("patch volumesnapshots/status")) {
					t.Fatalf("writes = %v, want one status patch", got)
				}
				st := k.statusError(k.get(h, "s1"))
				if st == nil || !strings.Contains(*st.Message, message) {
					t.Fatalf("status.error %+v, want an error containing %q", st, message)
				}
				if ev := h.events(); len(ev) != 1 || !strings.Contains(ev[0], k.Says(tc.reason)) {
					t.Errorf("events = %v, want one %s", ev, k.Says(tc.reason))
				}
				// Same problem again: no write, no event (transitions only).
				// The cache may lag; the server copy is used.
				h.api.ClearActions()
				if err := h.c.report(context.Background(), k.live(h, "s1"), problemf(k.Says(tc.reason), "%s", *st.Message)); err != nil {
					t.Fatal(err)
				}
				if got := h.writes(); len(got) != 0 {
					t.Errorf("repeating the same problem wrote %v", got)
				}
			})
		})
	}
}

func objs(o ...runtime.Object) []runtime.Object { return o }

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
	if _, err := h.c.bound(context.Background(), h.c.snap(got), snap{h.c, got}.bindTo(content)); err != nil {
		t.Fatal(err)
	}
	if w := h.writes(); len(w) != 0 {
		t.Fatalf("a ready snapshot cost writes: %v", w)
	}
}

func TestPreProvisionedBinding(t *testing.T) {
	cases := map[string]struct {
		// content is the pre-provisioned content "pre" of the subject named
		// for (s1 or another).
		for_    string
		content []contentOption
		writes  []string
		message string
	}{
		"an unclaimed content gets the snapshot's uid and its finalizer in one write": {
			for_: "s1", content: []contentOption{testkit.RefUID(""), testkit.Finalizers()},
			writes: []string{"patch volumesnapshots", "patch volumesnapshotcontents"},
		},
		"a content of another snapshot is refused": {
			for_:    "other",
			writes:  []string{"patch volumesnapshots/status"},
			message: "is bound to VolumeSnapshot ns/other",
		},
		"a content claimed by an older namesake is refused": {
			for_: "s1", content: []contentOption{testkit.RefUID("old-uid")},
			writes:  []string{"patch volumesnapshots/status"},
			message: "uid \"old-uid\"",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			forKinds(t, func(t *testing.T, k kind) {
				s := k.subject("s1", testkit.FromContent("pre"))
				opts := append([]contentOption{testkit.Named("pre"), testkit.PreProvisioned("h1")}, tc.content...)
				h := k.harness(t, s, k.content(k.subject(tc.for_), opts...))
				if _, err := k.sync(h, "s1"); err != nil {
					t.Fatal(err)
				}
				if got := h.writes(); !slices.Equal(got, k.SaysAll(tc.writes...)) {
					t.Fatalf("writes = %v, want %v", got, k.SaysAll(tc.writes...))
				}
				if tc.message == "" {
					c, ref := k.getContent(h, "pre")
					if ref.UID != s.GetUID() || !snapshot.HasFinalizer(c, k.contentFinalizer()) {
						t.Fatalf("content not bound: %+v", c)
					}
					return
				}
				st := k.statusError(k.get(h, "s1"))
				if st == nil || !strings.Contains(*st.Message, k.Says(tc.message)) {
					t.Fatalf("status.error %+v, want error %q", st, k.Says(tc.message))
				}
			})
		})
	}
}

func TestDeletion(t *testing.T) {
	const keep = "other.io/keep"
	cases := map[string]struct {
		// content is the subject's content, nil for none; restoring puts a
		// claim restoring from it.
		content   []contentOption
		restoring bool
		// gone answers NotFound to this write of the content: it went
		// between the cache's copy and our write (v8.7.0: not an error).
		gone   string
		writes []string
		// released: only the other finalizer is left; else all stay.
		released bool
	}{
		"a Delete content is marked and deleted; the snapshot waits for it": {
			content: []contentOption{testkit.Ready("h")},
			writes:  []string{"patch volumesnapshotcontents", "delete volumesnapshotcontents"},
		},
		"a Retain content is marked and the snapshot released at once": {
			content:  []contentOption{testkit.Ready("h"), testkit.Retain()},
			writes:   []string{"patch volumesnapshotcontents", "patch volumesnapshots"},
			released: true,
		},
		"with the content gone the snapshot is released, other finalizers kept": {
			writes:   []string{"patch volumesnapshots"},
			released: true,
		},
		"a content gone before its mark: the snapshot is released, no error": {
			content:  []contentOption{testkit.Ready("h")},
			gone:     "patch",
			writes:   []string{"patch volumesnapshotcontents", "patch volumesnapshots"},
			released: true,
		},
		"a content gone before its delete: the snapshot is released, no error": {
			content:  []contentOption{testkit.Ready("h")},
			gone:     "delete",
			writes:   []string{"patch volumesnapshotcontents", "delete volumesnapshotcontents", "patch volumesnapshots"},
			released: true,
		},
		"a pending restore keeps every finalizer and leaves the content alone": {
			content:   []contentOption{testkit.Ready("h")},
			restoring: true,
		},
		"a content of another snapshot is never touched": {
			content:  []contentOption{testkit.Ready("h"), testkit.RefUID("someone-else")},
			writes:   []string{"patch volumesnapshots"},
			released: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			forKinds(t, func(t *testing.T, k kind) {
				fins := append(k.ours(), keep)
				s := k.subject("s1", testkit.Deleted(), testkit.Finalizers(fins...), testkit.BoundTo(k.contentName("uid-s1")))
				objs := []runtime.Object{s}
				if tc.content != nil {
					objs = append(objs, k.content(s, tc.content...))
				}
				if tc.restoring {
					objs = append(objs, k.restoring(s)...)
				}
				h := k.harness(t, objs...)
				if tc.gone != "" {
					res := k.Says("volumesnapshotcontents")
					h.api.Inject(testkit.Fault{Verb: tc.gone, Resource: res, Err: apierrors.NewNotFound(schema.GroupResource{Resource: res}, k.contentName("uid-s1"))})
				}
				if _, err := k.sync(h, "s1"); err != nil {
					t.Fatal(err)
				}
				if got := h.writes(); !slices.Equal(got, k.SaysAll(tc.writes...)) {
					t.Fatalf("writes = %v, want %v", got, k.SaysAll(tc.writes...))
				}
				want := fins
				if tc.released {
					want = []string{keep}
				}
				if got := k.get(h, "s1").GetFinalizers(); !slices.Equal(got, want) {
					t.Errorf("finalizers = %v, want %v", got, want)
				}
				c, ref := k.getContent(h, k.contentName("uid-s1"))
				marked := c != nil && snapshot.HasAnnotation(c, k.beingDeleted(), snapshot.ValueYes)
				if c != nil && ref.UID == s.GetUID() && len(tc.writes) > 0 && !marked && tc.gone == "" {
					t.Error("own content lacks the being-deleted mark")
				}
				if c != nil && len(tc.writes) == 0 && (marked || c.GetDeletionTimestamp() != nil) {
					t.Error("the content of a snapshot a claim restores from was marked or deleted")
				}
			})
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
	pvc.Labels = map[string]string{testkit.GroupLabel: testkit.GroupLabelValue}
	cases := map[string]struct {
		verb, resource string
		err            error
		snapshotOnly   bool
	}{
		"a conflict on the snapshot": {verb: "patch", resource: "volumesnapshots", err: apierrors.NewConflict(schema.GroupResource{Resource: "volumesnapshots"}, "s1", nil)},
		"a failing claim update": {verb: "update", resource: "persistentvolumeclaims", err: apierrors.NewInternalError(errors.New("boom")),
			snapshotOnly: true}, // a group protects no claim
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			forKinds(t, func(t *testing.T, k kind) {
				if k.Group && tc.snapshotOnly {
					t.Skip("a rule of snapshots only")
				}
				h := k.harness(t, k.subject("s1"), pvc, pv, k.class("gold", testkit.DefaultClass()))
				h.api.Inject(testkit.Fault{Verb: tc.verb, Resource: k.Says(tc.resource), Err: tc.err})
				if _, err := k.sync(h, "s1"); err == nil {
					t.Fatal("want the error back, for a rate-limited retry")
				}
				if c, _ := k.getContent(h, k.contentName("uid-s1")); c != nil {
					t.Fatal("content created although a protection write failed")
				}
			})
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
	pvc.Labels = map[string]string{testkit.GroupLabel: testkit.GroupLabelValue}
	forKinds(t, func(t *testing.T, k kind) {
		s := k.subject("s1", testkit.ClassName("gold"), testkit.Finalizers(k.ours()...))
		h := k.harness(t, s, pvc, pv, k.class("gold"))
		cached := k.live(h, "s1")
		if err := k.delete(h, "s1"); err != nil {
			t.Fatal(err)
		}
		h.api.ClearActions()
		if _, err := h.c.dynamic(context.Background(), cached); err != nil {
			t.Fatal(err)
		}
		for _, w := range h.writes() {
			if strings.Contains(w, k.Says("volumesnapshotcontents")) {
				t.Errorf("wrote %q for a %s the API server no longer holds", w, k.Name)
			}
		}
	})
}
