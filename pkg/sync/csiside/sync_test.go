package csiside

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/sync/testkit"
)

// syncCase is one sync of content "c1" against a scripted driver.
type syncCase struct {
	setup
	// content is c1 of either kind (kind.content), for a kindCase.
	content runtime.Object
	calls   []call
	inject  []testkit.Fault

	wantRequeue time.Duration
	wantErr     bool
	wantWrites  []string
	wantEvents  []string
	// The content on the API server afterwards; wantGone: it was deleted.
	wantGone       bool
	wantMark       bool
	wantFinalizers []string
	// wantStatus is a *VolumeSnapshotContentStatus, or of a group content
	// a *VolumeGroupSnapshotContentStatus.
	wantStatus any
}

var ignoreErrorTime = cmpopts.IgnoreFields(snapv1.VolumeSnapshotError{}, "Time")

// runSyncCases runs cases of the snapshot kind only.
func runSyncCases(t *testing.T, cases map[string]syncCase) {
	t.Helper()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) { runSyncCase(t, snapshotKind, tc) })
	}
}

func runSyncCase(t *testing.T, k kind, tc syncCase) {
	t.Helper()
	h := newHarness(t, k.setup(tc.setup, tc.content))
	h.driver.script(tc.calls...)
	h.api.Inject(tc.inject...)
	res, err := k.sync(h, "c1")
	if (err != nil) != tc.wantErr {
		t.Errorf("sync error = %v, want error: %v", err, tc.wantErr)
	}
	checkRequeue(t, res.RequeueAfter, tc.wantRequeue)
	if diff := cmp.Diff(tc.wantWrites, h.writes(), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(tc.wantEvents, h.events(), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	checkServer(t, h, k, tc)
}

// checkRequeue compares a requeue delay.
func checkRequeue(t *testing.T, got, want time.Duration) {
	t.Helper()
	if got != want {
		t.Errorf("requeue after %v, want %v", got, want)
	}
}

func checkServer(t *testing.T, h *harness, k kind, tc syncCase) {
	t.Helper()
	got, status := k.read(h, "c1")
	if tc.wantGone || got == nil {
		if tc.wantGone != (got == nil) {
			t.Errorf("content gone: %v, want %v", got == nil, tc.wantGone)
		}
		return
	}
	if m := snapshot.HasAnnotation(got, k.beingCreated(), snapshot.ValueYes); m != tc.wantMark {
		t.Errorf("being-created mark: %v, want %v", m, tc.wantMark)
	}
	if diff := cmp.Diff(tc.wantFinalizers, got.GetFinalizers(), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("finalizers (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(tc.wantStatus, status, ignoreErrorTime); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
}

var (
	bound        = []string{snapshot.FinalizerContentBound}
	veleroFinal  = "velero.io/volume-snapshot-content-protect-finalizer"
	classes      = []runtime.Object{goldClass()}
	credsSecrets = []runtime.Object{testkit.Secret("secrets", "creds", testSecrets)}
)

func objs(o ...runtime.Object) []runtime.Object { return o }
