// Package csiside proves the CSI side of the controller (docs/csi-side.md) end to end:
// the real controller binary, on a real kube-apiserver with the snapshot
// CRDs, next to the mock CSI driver on a unix socket, with faults injected
// into the driver. Every test ends by checking that the driver holds exactly
// the snapshots that contents of its driver name point at: nothing leaked,
// nothing cut twice.
package csiside

import (
	"context"
	"path"
	"strings"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

// Full gRPC method names, as the mock counts them in /calls.
const (
	mCreate = "/csi.v1.Controller/CreateSnapshot"
	mDelete = "/csi.v1.Controller/DeleteSnapshot"
	mList   = "/csi.v1.Controller/ListSnapshots"
)

// world is one test's world (framework.Scenario) with a driver named
// csiside-*; the helpers below are the CSI side's own.
type world struct{ *framework.Scenario }

func newWorld(t *testing.T, o framework.ScenarioOptions) *world {
	t.Helper()
	o.DriverPrefix = "csiside"
	return &world{framework.NewScenario(t, o)}
}

// snapData creates claim "data" and VolumeSnapshot "snap" of it in the
// scenario's class, and returns the snapshot and the name of its content.
func (s *world) snapData(t *testing.T) (*snapv1.VolumeSnapshot, string) {
	t.Helper()
	s.PVC(t, "data")
	vs := s.Snapshot(t, "snap", "data", &s.Class)
	return vs, snapshot.ContentNameFor(vs.UID)
}

// calls returns how often the driver answered method with code.
func (s *world) calls(t *testing.T, method, code string) int64 {
	t.Helper()
	return s.Drv.Calls(t).Count(method, code)
}

// wantCalls checks that the driver answered method with code exactly want
// times; why, if not empty, says why that many.
func (s *world) wantCalls(t *testing.T, method, code string, want int64, why string) {
	t.Helper()
	if n := s.calls(t, method, code); n != want {
		if why != "" {
			why = " (" + why + ")"
		}
		t.Errorf("%s answered %s %d times, want %d%s", path.Base(method), code, n, want, why)
	}
}

// csiName is the CreateSnapshot name the controller must derive from uid
// with the given prefix and UID length (-1: whole UID), written out here
// independently of the product's helper.
func csiName(prefix string, uid string, uuidLength int) string {
	if uuidLength >= 0 {
		uid = strings.ReplaceAll(uid, "-", "")
		if len(uid) > uuidLength {
			uid = uid[:uuidLength]
		}
	}
	return prefix + "-" + uid
}

// cutBackendSnapshot creates a snapshot directly on the driver over its
// socket, as a backup tool or an admin would before importing it.
func (s *world) cutBackendSnapshot(t *testing.T, name, volume string) *csipb.Snapshot {
	t.Helper()
	snap, err := framework.CutSnapshot(context.Background(), s.Drv.Socket, name, volume, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func beingCreated(c *snapv1.VolumeSnapshotContent) bool {
	_, ok := c.Annotations[snapshot.AnnBeingCreated]
	return ok
}

func handleOf(c *snapv1.VolumeSnapshotContent) string {
	if c.Status == nil || c.Status.SnapshotHandle == nil {
		return ""
	}
	return *c.Status.SnapshotHandle
}
