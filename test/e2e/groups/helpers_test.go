package groups

import (
	"context"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

// world is one test's framework.Scenario (a driver named group-*, without
// a VolumeSnapshotClass) with a default group class of its driver and a
// controller running both components with group snapshots on.
type world struct {
	*framework.Scenario
	class string // the VolumeGroupSnapshotClass
}

// newWorld takes the Scenario's Faults, ClaimSizes and Policy.
func newWorld(t *testing.T, o framework.ScenarioOptions) *world {
	t.Helper()
	if o.Policy == "" {
		o.Policy = snapv1.VolumeSnapshotContentDelete
	}
	o.DriverPrefix, o.NoClass = "group", true
	o.ControllerArgs = []string{"--feature-gates=CSIVolumeGroupSnapshot=true"}
	w := &world{Scenario: framework.NewScenario(t, o)}
	w.class = "group-class-" + w.NS
	framework.MustCreate(t, w.Env.Snap.GroupsnapshotV1().VolumeGroupSnapshotClasses().Create,
		framework.GroupSnapshotClass(w.class, w.Drv.Name, o.Policy, true))
	return w
}

func (w *world) pvc(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	w.PVC(t, name)
	w.label(t, name, labels)
}

func (w *world) group(t *testing.T, name string, sel *metav1.LabelSelector) *groupv1.VolumeGroupSnapshot {
	t.Helper()
	g := &groupv1.VolumeGroupSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.NS},
		Spec:       groupv1.VolumeGroupSnapshotSpec{Source: groupv1.VolumeGroupSnapshotSource{Selector: sel}},
	}
	out, err := w.Env.Snap.GroupsnapshotV1().VolumeGroupSnapshots(w.NS).Create(context.Background(), g, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (w *world) getGroup(t *testing.T, name string) *groupv1.VolumeGroupSnapshot {
	t.Helper()
	g, err := w.Env.Snap.GroupsnapshotV1().VolumeGroupSnapshots(w.NS).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func (w *world) waitGroupReady(t *testing.T, name string, timeout time.Duration) *groupv1.VolumeGroupSnapshot {
	t.Helper()
	return w.Env.WaitGroupReady(t, w.NS, name, timeout)
}

func (w *world) deleteGroup(t *testing.T, name string) {
	t.Helper()
	if err := w.Env.Snap.GroupsnapshotV1().VolumeGroupSnapshots(w.NS).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (w *world) waitGroupGone(t *testing.T, name string) {
	t.Helper()
	w.Env.WaitGroupGone(t, w.NS, name, 30*time.Second)
}

// members lists the snapshots the group owns, by name.
func (w *world) members(t *testing.T, group string) []snapv1.VolumeSnapshot {
	t.Helper()
	list, err := w.Env.Snap.SnapshotV1().VolumeSnapshots(w.NS).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []snapv1.VolumeSnapshot
	for _, vs := range list.Items {
		if snapshot.GroupOwner(&vs) == group {
			out = append(out, vs)
		}
	}
	slices.SortFunc(out, func(a, b snapv1.VolumeSnapshot) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// noLeak waits until the driver holds exactly the snapshots the contents
// point at and the groups the group contents point at.
func (w *world) noLeak(t *testing.T) {
	t.Helper()
	w.BackendMatchesContents(t)
	w.Env.WaitBackendGroupsMatchGroupContents(t, w.Drv)
}

// nothingLeft is noLeak once every group is gone: the driver holds no group.
func (w *world) nothingLeft(t *testing.T) {
	t.Helper()
	w.noLeak(t)
	if b := w.Drv.Groups(t); len(b) != 0 {
		t.Fatalf("backend groups left: %s", framework.JSON(b))
	}
}

// restart kills the controller with SIGKILL and starts a new one.
func (w *world) restart(t *testing.T) {
	t.Helper()
	w.Ctrl.Proc.Signal(syscall.SIGKILL)
	_ = w.Ctrl.Proc.Wait(context.Background())
	w.Ctrl = w.StartController(t, w.Args...)
}

// groupDeletesNamedTheirMembers checks that every DeleteVolumeGroupSnapshot
// the driver received named exactly n snapshot ids (the field is required by
// the CSI spec), and that there was at least one.
func (w *world) groupDeletesNamedTheirMembers(t *testing.T, n int) {
	t.Helper()
	seen := 0
	for _, e := range w.Drv.CallLog(t, 0).Entries {
		if e.Method != "DeleteVolumeGroupSnapshot" {
			continue
		}
		seen++
		if len(e.SnapshotIDs) != n {
			t.Errorf("DeleteVolumeGroupSnapshot %s named snapshot ids %v, want the %d members", e.GroupSnapshotID, e.SnapshotIDs, n)
		}
	}
	if seen == 0 {
		t.Error("no DeleteVolumeGroupSnapshot reached the driver")
	}
}
