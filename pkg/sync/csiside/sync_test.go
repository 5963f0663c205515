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
	calls  []call
	inject []testkit.Fault

	wantRequeue time.Duration
	wantErr     bool
	wantWrites  []string
	wantEvents  []string
	// The content on the API server afterwards; wantGone: it was deleted.
	wantGone       bool
	wantMark       bool
	wantFinalizers []string
	wantStatus     *snapv1.VolumeSnapshotContentStatus
}

var ignoreErrorTime = cmpopts.IgnoreFields(snapv1.VolumeSnapshotError{}, "Time")

func runSyncCases(t *testing.T, cases map[string]syncCase) {
	t.Helper()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, tc.setup)
			h.driver.script(tc.calls...)
			h.api.Inject(tc.inject...)
			res, err := h.sync("c1")
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
			checkServer(t, h, tc)
		})
	}
}

// checkRequeue compares a requeue delay.
func checkRequeue(t *testing.T, got, want time.Duration) {
	t.Helper()
	if got != want {
		t.Errorf("requeue after %v, want %v", got, want)
	}
}

func checkServer(t *testing.T, h *harness, tc syncCase) {
	t.Helper()
	got := h.api.Content("c1")
	if tc.wantGone || got == nil {
		if tc.wantGone != (got == nil) {
			t.Errorf("content gone: %v, want %v", got == nil, tc.wantGone)
		}
		return
	}
	if m := snapshot.HasAnnotation(got, snapshot.AnnBeingCreated, snapshot.ValueYes); m != tc.wantMark {
		t.Errorf("being-created mark: %v, want %v", m, tc.wantMark)
	}
	if diff := cmp.Diff(tc.wantFinalizers, got.Finalizers, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("finalizers (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(tc.wantStatus, got.Status, ignoreErrorTime); diff != "" {
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
