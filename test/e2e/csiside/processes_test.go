package csiside

import (
	"context"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"

	"github.com/snapkeeper/snapkeeper/pkg/csi/csitest"
	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

// The CSI side runs as its own process next to the driver socket, with the
// binder in another process: a snapshot goes ready and is deleted, and only
// the CSI-side process talks to the driver.
func TestSeparateBinderAndCSIProcesses(t *testing.T) {
	s := newWorld(t, framework.ScenarioOptions{NoController: true})
	ctx := context.Background()
	binder := s.StartController(t, "--components=binder")
	csiSide := s.StartController(t, "--components=csi", "--csi-address="+s.Drv.Socket)
	_, contentName := s.snapData(t)
	s.WaitReady(t, "snap", 30*time.Second)
	s.BackendMatchesContents(t)
	s.DeleteAndExpectNothingLeft(t, "snap", contentName)

	for _, m := range []string{mCreate, mDelete} {
		n, err := csiSide.Metric(ctx, "csi_sidecar_operations_seconds_count", `method_name="`+m+`"`, `grpc_status_code="OK"`)
		if err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Errorf("CSI-side process made %v successful %s calls, want 1", n, m)
		}
		n, err = binder.Metric(ctx, "csi_sidecar_operations_seconds_count", `method_name="`+m+`"`)
		if err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("binder process made %v %s calls, want none", n, m)
		}
	}
}

// Velero's flow: a backup tool creates an unbound Delete content for a
// backend snapshot (its volumeSnapshotRef names a VolumeSnapshot that does
// not exist) and deletes it two seconds later to remove the backend
// snapshot. With the CSI side slow to start (here: only after the
// deletion), the finalizer the binder put on at once must keep the object
// until the CSI side has deleted the backend snapshot.
func TestVeleroStyleDelete(t *testing.T) {
	for _, csiLate := range []bool{true, false} {
		name := "CSI side starts after the deletion"
		if !csiLate {
			name = "binder and CSI side in one process"
		}
		t.Run(name, func(t *testing.T) {
			s := newWorld(t, framework.ScenarioOptions{NoController: true})
			if csiLate {
				s.StartController(t, "--components=binder")
			} else {
				s.StartController(t, "--components=binder,csi", "--csi-address="+s.Drv.Socket)
			}
			snap := s.cutBackendSnapshot(t, "velero-"+s.NS, "vol-velero")
			contentName := "velero-" + s.NS
			created := time.Now()
			s.PreProvisionedContent(t, contentName, snap.SnapshotId, "velero-vs-that-does-not-exist", snapv1.VolumeSnapshotContentDelete)

			time.Sleep(time.Until(created.Add(2 * time.Second)))
			c := s.Content(t, contentName)
			if !snapshot.HasFinalizer(c, snapshot.FinalizerContentBound) {
				t.Fatalf("2 s after its creation the content still lacks %s: %v", snapshot.FinalizerContentBound, c.Finalizers)
			}
			s.DeleteContent(t, contentName)

			if csiLate {
				// Nothing can delete the backend snapshot yet: the
				// finalizer keeps the content.
				time.Sleep(2 * time.Second)
				c = s.Content(t, contentName)
				if c.DeletionTimestamp == nil {
					t.Fatal("content not marked deleted")
				}
				if b := s.Drv.Created(t); len(b) != 1 {
					t.Fatalf("driver holds %+v before the CSI side started", b)
				}
				s.StartController(t, "--components=csi", "--csi-address="+s.Drv.Socket)
			}
			s.WaitContentGone(t, contentName)
			if b := s.Drv.Created(t); len(b) != 0 {
				t.Fatalf("driver still holds %+v", b)
			}
			s.wantCalls(t, mDelete, "OK", 1, "")
			s.BackendMatchesContents(t)
		})
	}
}

// A content deleted directly (kubectl delete) while its VolumeSnapshot is
// bound and not being deleted must not lose the backend snapshot: the CSI
// side waits for the binder's being-deleted mark, which comes only when
// the VolumeSnapshot is deleted.
func TestContentDeletedUnderBoundSnapshotKeepsBackend(t *testing.T) {
	s := newWorld(t, framework.ScenarioOptions{})
	_, contentName := s.snapData(t)
	s.WaitReady(t, "snap", 30*time.Second)
	s.DeleteContent(t, contentName)

	time.Sleep(3 * time.Second)
	c := s.Content(t, contentName)
	if c.DeletionTimestamp == nil || !snapshot.HasFinalizer(c, snapshot.FinalizerContentBound) {
		t.Fatalf("content: deletionTimestamp %v, finalizers %v", c.DeletionTimestamp, c.Finalizers)
	}
	if b := s.Drv.Created(t); len(b) != 1 || b[0].ID != handleOf(c) {
		t.Fatalf("driver holds %+v, want the bound snapshot's %q", b, handleOf(c))
	}
	if n := s.calls(t, mDelete, "OK"); n != 0 {
		t.Fatalf("DeleteSnapshot called %d times for a content whose snapshot is bound", n)
	}
	s.BackendMatchesContents(t)

	s.DeleteAndExpectNothingLeft(t, "snap", contentName)
}

// The driver crashes while a CreateSnapshot is in flight (the backend it
// cut is lost with it) and comes back on the same socket: the controller
// reconnects, cuts the snapshot again under the same name, and ends ready
// with exactly one backend snapshot.
func TestDriverRestartDuringCreate(t *testing.T) {
	s := newWorld(t, framework.ScenarioOptions{})
	// Installed over HTTP, so that the restarted driver comes without it.
	s.Drv.SetFaults(t, framework.Faults{Rules: []framework.FaultRule{{Method: "CreateSnapshot", Hang: csitest.Duration(60 * time.Second), Times: 1}}})
	vs, contentName := s.snapData(t)
	s.WaitBackend(t, 1, 30*time.Second)

	s.Drv.Crash(t)
	s.Drv.Start(t)

	s.WaitReady(t, "snap", 30*time.Second)
	c := s.Content(t, contentName)
	b := s.Drv.Created(t)
	if len(b) != 1 || b[0].ID != handleOf(c) {
		t.Fatalf("driver holds %+v, want exactly the content's %q", b, handleOf(c))
	}
	if want := csiName("snapshot", string(vs.UID), -1); b[0].Name != want {
		t.Errorf("re-cut snapshot named %q, want %q", b[0].Name, want)
	}
	s.BackendMatchesContents(t)

	s.DeleteAndExpectNothingLeft(t, "snap", contentName)
}
