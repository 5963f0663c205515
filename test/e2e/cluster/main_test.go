// Package cluster runs the snapshot lifecycle with the real neighbours of a
// cluster around it: kube-controller-manager (PersistentVolume binder,
// garbage collector, namespace controller, PVC protection) and the real
// csi-provisioner next to the mock CSI driver, besides the webhook over TLS
// and our controller. Claims are provisioned and bound by those
// components, never by hand. docs/testing.md, "The cluster-like plane".
package cluster

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

func TestMain(m *testing.M) { framework.MainWith(m, framework.ControlPlaneOptions{Cluster: true}) }

const (
	ours      = "ours"
	community = "community"
	gi        = int64(1 << 30)
	groupGate = "--feature-gates=CSIVolumeGroupSnapshot=true"
)

// pairing is which implementation runs the binder and which the CSI side.
type pairing struct{ Binder, CSI string }

func (p pairing) String() string { return p.Binder + "-binder/" + p.CSI + "-csi" }

// oursPair is our binder and CSI side; mixedPairs put one of them next to
// the community's other half (external-snapshotter at framework.CommunityVersion).
var (
	oursPair   = pairing{ours, ours}
	mixedPairs = []pairing{{community, ours}, {ours, community}}
)

// forPairings runs scenario as a subtest for our pair and, where the
// community binaries are built, for each mixed pair.
func forPairings(t *testing.T, scenario func(t *testing.T, p pairing)) {
	t.Run("ours", func(t *testing.T) { scenario(t, oursPair) })
	for _, p := range mixedPairs {
		name := "community-csi"
		if p.Binder == community {
			name = "community-binder"
		}
		t.Run(name, func(t *testing.T) {
			if _, err := framework.Tool("snapshot-controller"); err != nil {
				t.Skipf("community peers not built: %v", err)
			}
			scenario(t, p)
		})
	}
}

// world is one test's framework.Scenario on the cluster-like plane (a
// driver of its own, a csi-provisioner next to it with StorageClass
// "sc-<ns>", a default VolumeSnapshotClass), the webhook registered over
// TLS, a default group class, and the binder and the CSI side of a pairing
// as two processes, as the chart deploys them.
type world struct {
	*framework.Scenario
	pair       pairing
	groupClass string
	wh         *framework.Webhook
	binder     *framework.Process
	csi        *framework.Process
	// repeatsAllowed: a DeleteSnapshot may be answered OK twice (a call
	// that waited for a driver coming back may outlive the CSI side's
	// timeout: its reply is lost and the retry deletes again).
	repeatsAllowed bool
}

type worldOptions struct {
	Policy snapv1.DeletionPolicy
	Faults []framework.FaultRule
	// ProvisionerArgs are more csi-provisioner flags.
	ProvisionerArgs []string
}

func newWorld(t *testing.T, p pairing, o worldOptions) *world {
	t.Helper()
	if o.Policy == "" {
		o.Policy = snapv1.VolumeSnapshotContentDelete
	}
	s := framework.NewScenario(t, framework.ScenarioOptions{DriverPrefix: "cluster", Faults: o.Faults,
		Policy: o.Policy, DefaultClass: true, NoController: true, ProvisionerArgs: o.ProvisionerArgs})
	if s.Prov == nil {
		t.Fatal("the cluster-like plane gave the scenario no csi-provisioner")
	}
	w := &world{Scenario: s, pair: p, groupClass: "group-class-" + s.NS}
	framework.MustCreate(t, s.Env.Snap.GroupsnapshotV1().VolumeGroupSnapshotClasses().Create,
		framework.GroupSnapshotClass(w.groupClass, s.Drv.Name, o.Policy, true))
	t.Cleanup(func() {
		_ = s.Env.Snap.GroupsnapshotV1().VolumeGroupSnapshotClasses().Delete(context.Background(), w.groupClass, metav1.DeleteOptions{})
	})
	w.wh = s.Env.StartWebhook(t)
	w.startBinder(t)
	w.startCSISide(t)
	return w
}

// communityFlags: the community binaries at our client limits.
var communityFlags = []string{"--leader-election=false", "-v=3", "--kube-api-qps=100", "--kube-api-burst=200", "--worker-threads=100", groupGate}

func (w *world) startBinder(t *testing.T) {
	t.Helper()
	if w.pair.Binder == ours {
		w.binder = w.StartController(t, "--components=binder", groupGate).Proc
		return
	}
	w.binder = w.launchCommunity(t, "snapshot-controller", nil)
}

// startCSISide starts the CSI side of the pairing next to the driver (again,
// after stopCSISide), with more flags.
func (w *world) startCSISide(t *testing.T, args ...string) {
	t.Helper()
	args = append([]string{"--csi-address=" + w.Drv.Socket}, args...)
	if w.pair.CSI == ours {
		w.csi = w.StartController(t, append([]string{"--components=csi", groupGate}, args...)...).Proc
		return
	}
	w.csi = w.launchCommunity(t, "csi-snapshotter", w.Drv, args...)
}

func (w *world) stopCSISide() { w.csi.Stop(15 * time.Second) }

func (w *world) launchCommunity(t *testing.T, name string, drv *framework.CSIDriver, args ...string) *framework.Process {
	t.Helper()
	return w.Env.StartCommunity(t, name, append(append([]string{}, communityFlags...), args...), drv)
}

// source provisions claim name with a volume of 1 GiB whose snapshots
// report that size (their restoreSize).
func (w *world) source(t *testing.T, name string) {
	t.Helper()
	w.PVC(t, name)
	w.Drv.SetVolumeSize(t, w.Handle(name), gi)
}

// readySnapshot provisions claim "data" (source) and waits until a
// snapshot name of it (default class) is ready.
func (w *world) readySnapshot(t *testing.T, name string) *snapv1.VolumeSnapshot {
	t.Helper()
	w.source(t, "data")
	w.Snapshot(t, name, "data", nil)
	return w.WaitReady(t, name, 60*time.Second)
}

// restore creates a claim of the provisioner's class restoring from
// snapshot snap.
func (w *world) restore(t *testing.T, name, snap string, viaRef bool) {
	t.Helper()
	w.Env.CreateClaim(t, w.NS, name, framework.ClaimOptions{StorageClass: w.Prov.StorageClass, RestoreFrom: snap, ViaDataSourceRef: viaRef})
}

// handleOf is the backend snapshot handle of ready snapshot name.
func (w *world) handleOf(t *testing.T, name string) (content, handle string) {
	t.Helper()
	vs := w.GetSnapshot(t, name)
	if vs.Status == nil || vs.Status.BoundVolumeSnapshotContentName == nil {
		t.Fatalf("snapshot %s is not bound: %s", name, framework.JSON(vs.Status))
	}
	c := w.Content(t, *vs.Status.BoundVolumeSnapshotContentName)
	if c.Status == nil || c.Status.SnapshotHandle == nil {
		t.Fatalf("content %s has no handle", c.Name)
	}
	return c.Name, *c.Status.SnapshotHandle
}

// restoresFrom are the CreateVolume calls of the driver that restored from
// backend snapshot handle, by result code.
func (w *world) restoresFrom(t *testing.T, handle string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, e := range w.Drv.CallLog(t, 0).Entries {
		if e.Method == "CreateVolume" && e.SnapshotID == handle {
			out[e.Code]++
		}
	}
	return out
}

// deleteCalls counts the driver's successful DeleteSnapshot calls by
// snapshot id and the name of the latest CreateSnapshot that answered that
// id before the delete (a mock restarted without its state hands out ids
// again, so one id can name two snapshots).
func (w *world) deleteCalls(t *testing.T) map[string]int {
	t.Helper()
	out := map[string]int{}
	nameOf := map[string]string{}
	for _, e := range w.Drv.CallLog(t, 0).Entries {
		switch {
		case e.Method == "CreateSnapshot" && e.Code == "OK" && e.SnapshotID != "":
			nameOf[e.SnapshotID] = e.Name
		case e.Method == "DeleteSnapshot" && e.Code == "OK":
			out[e.SnapshotID+" ("+nameOf[e.SnapshotID]+")"]++
		}
	}
	return out
}

// invariants are checked after every scenario: the driver holds exactly
// the snapshots and groups its contents point at (no leak, no duplicate),
// no snapshot of the namespace is stuck being deleted, no snapshot was
// deleted twice at the driver, and no process panicked.
func (w *world) invariants(t *testing.T) {
	t.Helper()
	w.BackendMatchesContents(t)
	w.Env.WaitBackendGroupsMatchGroupContents(t, w.Drv)
	framework.Eventually(t, 60*time.Second, "no snapshot stuck Terminating", func() (bool, error) {
		return w.noneTerminating(context.Background())
	})
	for id, n := range w.deleteCalls(t) {
		if n > 1 && !w.repeatsAllowed {
			t.Errorf("DeleteSnapshot of %s answered OK %d times", id, n)
		}
	}
	w.noPanic(t)
}

func (w *world) noneTerminating(ctx context.Context) (bool, error) {
	list, err := w.Env.Snap.SnapshotV1().VolumeSnapshots(w.NS).List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	var stuck []string
	for _, vs := range list.Items {
		if vs.DeletionTimestamp != nil {
			stuck = append(stuck, fmt.Sprintf("%s finalizers %v", vs.Name, vs.Finalizers))
		}
	}
	return len(stuck) == 0, fmt.Errorf("terminating: %v", stuck)
}

func (w *world) noPanic(t *testing.T) {
	t.Helper()
	procs := []*framework.Process{w.binder, w.csi, w.Prov.Proc}
	if kcm := w.Env.ControllerManager(); kcm != nil {
		procs = append(procs, kcm)
	}
	for _, p := range procs {
		b, err := os.ReadFile(p.LogPath)
		if err != nil {
			t.Fatal(err)
		}
		if i := strings.Index(string(b), "panic:"); i >= 0 {
			t.Errorf("%s panicked:\n%s", p.Name, string(b[i:min(len(b), i+2000)]))
		}
	}
}

// finalizers of VolumeSnapshot name, or nil when it is gone.
func (w *world) finalizers(t *testing.T, name string) []string {
	t.Helper()
	vs, err := w.Env.Snap.SnapshotV1().VolumeSnapshots(w.NS).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return vs.Finalizers
}

func hasString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// claimPhase is the phase of claim name ("" when it is gone).
func (w *world) claimPhase(t *testing.T, name string) corev1.PersistentVolumeClaimPhase {
	t.Helper()
	c, err := w.Env.Kube.CoreV1().PersistentVolumeClaims(w.NS).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return c.Status.Phase
}
