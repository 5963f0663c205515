package groups

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

// world is one test's driver (unique name, group controller on, a size per
// volume), its default group class, and a controller running both
// components with group snapshots on.
type world struct {
	env   *framework.Env
	ns    string
	drv   *framework.CSIDriver
	ctrl  *framework.Component
	class string
	args  []string
}

type worldOpts struct {
	policy snapv1.DeletionPolicy
	faults []framework.FaultRule
	// sizes are snapshot sizes in bytes by claim name.
	sizes map[string]int64
}

func newWorld(t *testing.T, o worldOpts) *world {
	t.Helper()
	env := framework.Shared(t)
	w := &world{env: env, ns: env.Namespace(t)}
	name := fmt.Sprintf("group-%04x.csi.snapkeeper.io", rand.IntN(0xffff))
	var sizes []string
	for claim, n := range o.sizes {
		sizes = append(sizes, fmt.Sprintf("%s=%d", w.handle(claim), n))
	}
	sort.Strings(sizes)
	w.drv = env.StartCSIDriver(t, framework.CSIDriverOptions{Name: name, Faults: o.faults,
		Args: []string{"--volume-sizes=" + strings.Join(sizes, ",")}})
	if o.policy == "" {
		o.policy = snapv1.VolumeSnapshotContentDelete
	}
	w.class = "group-class-" + w.ns
	class := &groupv1.VolumeGroupSnapshotClass{
		ObjectMeta: metav1.ObjectMeta{Name: w.class,
			Annotations: map[string]string{snapshot.AnnGroupDefaultClass: "true"}},
		Driver: name, DeletionPolicy: o.policy,
	}
	if _, err := env.Snap.GroupsnapshotV1().VolumeGroupSnapshotClasses().Create(context.Background(), class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.args = []string{"--components=binder,csi", "--csi-address=" + w.drv.Socket, "-v=2",
		"--feature-gates=CSIVolumeGroupSnapshot=true"}
	w.ctrl = env.StartController(t, w.args...)
	return w
}

// handle is the volume handle framework.CreateBoundPVC gives claim.
func (w *world) handle(claim string) string { return "vol-" + w.ns + "-" + claim }

func (w *world) pvc(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	w.env.CreateBoundPVC(t, w.ns, name, framework.PVCOptions{Driver: w.drv.Name})
	w.label(t, name, labels)
}

func (w *world) group(t *testing.T, name string, sel *metav1.LabelSelector) *groupv1.VolumeGroupSnapshot {
	t.Helper()
	g := &groupv1.VolumeGroupSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.ns},
		Spec:       groupv1.VolumeGroupSnapshotSpec{Source: groupv1.VolumeGroupSnapshotSource{Selector: sel}},
	}
	out, err := w.env.Snap.GroupsnapshotV1().VolumeGroupSnapshots(w.ns).Create(context.Background(), g, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (w *world) getGroup(t *testing.T, name string) *groupv1.VolumeGroupSnapshot {
	t.Helper()
	g, err := w.env.Snap.GroupsnapshotV1().VolumeGroupSnapshots(w.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func (w *world) waitGroupReady(t *testing.T, name string, timeout time.Duration) *groupv1.VolumeGroupSnapshot {
	t.Helper()
	var g *groupv1.VolumeGroupSnapshot
	framework.Eventually(t, timeout, "group "+name+" ready", func() (bool, error) {
		var err error
		g, err = w.env.Snap.GroupsnapshotV1().VolumeGroupSnapshots(w.ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return g.Status != nil && g.Status.ReadyToUse != nil && *g.Status.ReadyToUse, fmt.Errorf("status %s", framework.JSON(g.Status))
	})
	return g
}

func (w *world) deleteGroup(t *testing.T, name string) {
	t.Helper()
	if err := w.env.Snap.GroupsnapshotV1().VolumeGroupSnapshots(w.ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (w *world) waitGroupGone(t *testing.T, name string) {
	t.Helper()
	framework.Eventually(t, 30*time.Second, "group "+name+" gone", func() (bool, error) {
		_, err := w.env.Snap.GroupsnapshotV1().VolumeGroupSnapshots(w.ns).Get(context.Background(), name, metav1.GetOptions{})
		return err != nil, err
	})
}

// members lists the snapshots the group owns, by name.
func (w *world) members(t *testing.T, group string) []snapv1.VolumeSnapshot {
	t.Helper()
	list, err := w.env.Snap.SnapshotV1().VolumeSnapshots(w.ns).List(context.Background(), metav1.ListOptions{})
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

// backendGroups are the driver's group snapshots.
func (w *world) backendGroups(t *testing.T) []framework.BackendGroup {
	t.Helper()
	groups, err := w.drv.Groups(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return groups
}

// restoreClaim creates a Pending claim restoring from member snapshot snap.
func (w *world) restoreClaim(t *testing.T, name, snap string) (*corev1.PersistentVolumeClaim, error) {
	t.Helper()
	group := snapshot.GroupName
	storageClass := ""
	c := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &storageClass,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			DataSource:       &corev1.TypedLocalObjectReference{APIGroup: &group, Kind: snapshot.KindSnapshot, Name: snap},
		},
	}
	return w.env.Kube.CoreV1().PersistentVolumeClaims(w.ns).Create(context.Background(), c, metav1.CreateOptions{})
}

// noLeak waits until the driver holds exactly the snapshots the contents
// point at and the groups the group contents point at.
func (w *world) noLeak(t *testing.T) {
	t.Helper()
	w.env.WaitBackendMatchesContents(t, w.drv)
	framework.Eventually(t, 30*time.Second, "backend groups == group content handles", func() (bool, error) {
		groups, err := w.drv.Groups(context.Background())
		if err != nil {
			return false, err
		}
		var have, want []string
		for _, g := range groups {
			have = append(have, g.ID)
		}
		list, err := w.env.Snap.GroupsnapshotV1().VolumeGroupSnapshotContents().List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range list.Items {
			if c.Spec.Driver != w.drv.Name {
				continue
			}
			switch {
			case c.Status != nil && c.Status.VolumeGroupSnapshotHandle != nil:
				want = append(want, *c.Status.VolumeGroupSnapshotHandle)
			case c.Spec.Source.GroupSnapshotHandles != nil:
				want = append(want, c.Spec.Source.GroupSnapshotHandles.VolumeGroupSnapshotHandle)
			}
		}
		sort.Strings(have)
		sort.Strings(want)
		return slices.Equal(have, want), fmt.Errorf("backend groups %v, group content handles %v", have, want)
	})
}

// restart kills the controller with SIGKILL and starts a new one.
func (w *world) restart(t *testing.T) {
	t.Helper()
	w.ctrl.Proc.Signal(syscall.SIGKILL)
	_ = w.ctrl.Proc.Wait(context.Background())
	w.ctrl = w.env.StartController(t, w.args...)
}

// groupDeletesNamedTheirMembers checks that every DeleteVolumeGroupSnapshot
// the driver received named exactly n snapshot ids (the field is required by
// the CSI spec), and that there was at least one.
func (w *world) groupDeletesNamedTheirMembers(t *testing.T, n int) {
	t.Helper()
	log, err := w.drv.CallLog(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, e := range log.Entries {
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
