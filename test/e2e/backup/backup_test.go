package backup

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

const groupGate = "--feature-gates=CSIVolumeGroupSnapshot=true"

// pair is who runs the snapshot controllers: snapkeeper (binder, CSI side
// and webhook) or the community's snapshot-controller and csi-snapshotter
// at framework.CommunityVersion (which ship no webhook).
type pair string

const (
	ours      pair = "snapkeeper"
	community pair = "community"
)

// forPairs runs scenario for our pair and, where they are built, for the
// community's.
func forPairs(t *testing.T, scenario func(t *testing.T, p pair)) {
	t.Run(string(ours), func(t *testing.T) { scenario(t, ours) })
	t.Run(string(community), func(t *testing.T) {
		if _, err := framework.Tool("snapshot-controller"); err != nil {
			t.Skipf("community peers not built: %v", err)
		}
		scenario(t, community)
	})
}

// claims are the claims of the application namespace Velero backs up.
var claims = []string{"db", "logs", "media"}

// world is one scenario's plane: a mock driver keeping data in dataDir
// with a csi-provisioner and a VolumeSnapshotClass labelled for Velero,
// the snapshot controllers of a pair, and Velero.
type world struct {
	*framework.Scenario
	pair    pair
	dataDir string
	wh      *framework.Webhook
	binder  *framework.Process
	csi     *framework.Process
	velero  *velero
	// data is what each claim of the application namespace holds.
	data map[string][]byte
}

func newWorld(t *testing.T, p pair, faults ...framework.FaultRule) *world {
	t.Helper()
	dataDir := t.TempDir()
	// A member of a group snapshot may be deleted on its own, as the CSI
	// hostpath driver allows: Velero deletes a group backup's snapshots
	// one by one.
	s := framework.NewScenario(t, framework.ScenarioOptions{DriverPrefix: "backup", DefaultClass: true, NoController: true,
		Faults: faults, DriverArgs: []string{"--data-dir=" + dataDir, "--allow-member-delete"}})
	w := &world{Scenario: s, pair: p, dataDir: dataDir, data: map[string][]byte{}}
	// Velero picks the class of a claim's driver by this label.
	class, err := s.Env.Snap.SnapshotV1().VolumeSnapshotClasses().Get(context.Background(), s.Class, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	class.Labels = map[string]string{"velero.io/csi-volumesnapshot-class": "true"}
	if _, err := s.Env.Snap.SnapshotV1().VolumeSnapshotClasses().Update(context.Background(), class, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if p == ours {
		w.wh = s.Env.StartWebhook(t)
	}
	w.startBinder(t)
	w.startCSISide(t)
	w.velero = startVelero(t, s.Env)
	return w
}

func (w *world) startBinder(t *testing.T) {
	t.Helper()
	if w.pair == ours {
		w.binder = w.StartController(t, "--components=binder", groupGate).Proc
		return
	}
	w.binder = w.launchCommunity(t, "snapshot-controller", nil)
}

func (w *world) startCSISide(t *testing.T) {
	t.Helper()
	if w.pair == ours {
		w.csi = w.StartController(t, "--components=csi", groupGate, "--csi-address="+w.Drv.Socket).Proc
		return
	}
	w.csi = w.launchCommunity(t, "csi-snapshotter", w.Drv, "--csi-address="+w.Drv.Socket)
}

func (w *world) launchCommunity(t *testing.T, name string, drv *framework.CSIDriver, args ...string) *framework.Process {
	t.Helper()
	flags := []string{"--leader-election=false", "-v=3", "--kube-api-qps=100", "--kube-api-burst=200", groupGate}
	return w.Env.StartCommunity(t, name, append(flags, args...), drv)
}

// fill provisions the application's claims and writes distinct data into
// each volume, as the application would.
func (w *world) fill(t *testing.T) {
	t.Helper()
	for _, c := range claims {
		w.PVC(t, c)
		b := make([]byte, 64<<10)
		_, _ = rand.Read(b)
		dir := filepath.Join(w.dataDir, "volumes", w.Handle(c))
		if err := os.WriteFile(filepath.Join(dir, "data"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		w.data[c] = b
	}
}

// sameData waits until every claim of ns is bound and checks that its
// volume holds what the claim of the same name held when it was backed up.
func (w *world) sameData(t *testing.T, ns string) {
	t.Helper()
	for _, c := range claims {
		_, pv := w.Env.WaitClaimBound(t, ns, c, 2*time.Minute)
		got, err := os.ReadFile(filepath.Join(w.dataDir, "volumes", pv.Spec.CSI.VolumeHandle, "data"))
		if err != nil {
			t.Errorf("claim %s/%s: %v", ns, c, err)
			continue
		}
		if !bytes.Equal(got, w.data[c]) {
			t.Errorf("claim %s/%s restored %d bytes that differ from the %d backed up", ns, c, len(got), len(w.data[c]))
		}
	}
	t.Logf("namespace %s: %d claims bound from the backup's snapshots, data identical", ns, len(claims))
}

// backendIDs are the driver's snapshots (not its built-ins).
func (w *world) backendIDs(t *testing.T) map[string]bool {
	t.Helper()
	b, err := w.Drv.GetCreated(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, s := range b {
		out[s.ID] = true
	}
	return out
}

func newIDs(before, after map[string]bool) []string {
	var out []string
	for id := range after {
		if !before[id] {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// noSnapshotObjects checks that Velero left no VolumeSnapshot in ns and no
// content bound to one of ns: after a backup its snapshots live on as
// backend snapshots the backup records.
func (w *world) noSnapshotObjects(t *testing.T, ns string) {
	t.Helper()
	framework.Eventually(t, time.Minute, "no snapshot objects of "+ns+" left", func() (bool, error) {
		vss, err := w.Env.Snap.SnapshotV1().VolumeSnapshots(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		contents, err := w.Env.Snap.SnapshotV1().VolumeSnapshotContents().List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		n := 0
		for _, c := range contents.Items {
			if c.Spec.VolumeSnapshotRef.Namespace == ns {
				n++
			}
		}
		return len(vss.Items)+n == 0, fmt.Errorf("%d snapshots, %d contents", len(vss.Items), n)
	})
}

// deleteNamespace deletes ns and waits until it is gone (its claims'
// volumes deleted by the provisioner).
func (w *world) deleteNamespace(t *testing.T, ns string) {
	t.Helper()
	if err := w.namespaceGone(ns); err != nil {
		t.Fatal(err)
	}
}

// namespaceHeld is deleteNamespace where a namespace may stay: it reports
// whether ns is still there after two minutes and logs the claims whose
// finalizers hold it besides its snapshots.
func (w *world) namespaceHeld(t *testing.T, ns string) bool {
	t.Helper()
	err := w.namespaceGone(ns)
	if err == nil {
		return false
	}
	t.Logf("namespace %s: %v", ns, err)
	pvcs, err := w.Env.Kube.CoreV1().PersistentVolumeClaims(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, pvc := range pvcs.Items {
		t.Logf("namespace %s held after 2 minutes by claim %s (finalizers %v)", ns, pvc.Name, pvc.Finalizers)
	}
	return true
}

// namespaceGone deletes ns and waits two minutes for it to go; the error
// names the snapshots still there, with their finalizers.
func (w *world) namespaceGone(ns string) error {
	ctx := context.Background()
	if err := w.Env.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return framework.Poll(2*time.Minute, "namespace "+ns+" gone", func() (bool, error) {
		_, err := w.Env.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || err != nil {
			return apierrors.IsNotFound(err), err
		}
		vss, err := w.Env.Snap.SnapshotV1().VolumeSnapshots(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		var left []string
		for _, vs := range vss.Items {
			bound := ""
			if vs.Status != nil && vs.Status.BoundVolumeSnapshotContentName != nil {
				bound = *vs.Status.BoundVolumeSnapshotContentName
			}
			left = append(left, fmt.Sprintf("%s (finalizers %v, content %q)", vs.Name, vs.Finalizers, bound))
		}
		return false, fmt.Errorf("snapshots left: %v", left)
	})
}

// webhookCounts is how many requests our webhook denied so far, and how
// many it allowed by resource (none without our webhook).
func (w *world) webhookCounts(t *testing.T) (denied float64, allowed map[string]float64) {
	t.Helper()
	allowed = map[string]float64{}
	if w.wh == nil {
		return 0, allowed
	}
	s, err := w.wh.Scrape(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"volumesnapshots", "volumesnapshotcontents", "persistentvolumeclaims"} {
		allowed[r] = s.Sum("snapkeeper_webhook_requests_total", `resource="`+r+`"`, `verdict="allowed"`)
	}
	return s.Sum("snapkeeper_webhook_requests_total", `verdict="denied"`), allowed
}

func expectPhase(t *testing.T, s status, phase string) {
	t.Helper()
	if s.Phase != phase {
		t.Fatalf("%v: want phase %s", s, phase)
	}
}

// TestVeleroBackupRestoreDelete: Velero backs up a namespace of three
// claims holding data (its snapshots then live on as Retain backend
// snapshots); the namespace is deleted and restored, then restored again
// into another namespace (a mapping): claims bound from the snapshots,
// data identical, our webhook admitting every object Velero wrote. A
// second backup is taken of the restored namespace and a third of the
// mapped one; deleting the first two removes exactly their backend
// snapshots, and deleting the third leaves the backend with nothing but
// what live contents point at.
func TestVeleroBackupRestoreDelete(t *testing.T) {
	forPairs(t, func(t *testing.T, p pair) {
		w := newWorld(t, p)
		ns := w.NS
		w.fill(t)
		before := w.backendIDs(t)
		writes, err := w.Env.APIWrites(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		b1 := "b1-" + ns
		s := w.velero.backup(t, b1, ns, true)
		expectPhase(t, s, "Completed")
		if s.SnapshotsCompleted != int64(len(claims)) {
			t.Errorf("%v: want %d CSI snapshots", s, len(claims))
		}
		t.Logf("backup of %d claims: %v to Completed", len(claims), time.Since(start).Round(time.Millisecond))
		after, err := w.Env.WaitQuietWrites(context.Background(), framework.IsContractWrite, 3*time.Second, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		d := after.Sub(writes)
		t.Logf("writes to snapshot objects and claims during the backup (Velero's and the controllers'): %.1f per claim; %v",
			d.Total(framework.IsContractWrite)/float64(len(claims)), d)
		b1IDs := newIDs(before, w.backendIDs(t))
		if len(b1IDs) != len(claims) {
			t.Fatalf("the backup left %d backend snapshots (%v), want %d", len(b1IDs), b1IDs, len(claims))
		}
		w.noSnapshotObjects(t, ns)

		// Restore into the same namespace after it is gone.
		w.deleteNamespace(t, ns)
		denied, allowedBefore := w.webhookCounts(t)
		start = time.Now()
		s = w.velero.restore(t, "r1-"+ns, b1, true)
		expectPhase(t, s, "Completed")
		w.sameData(t, ns)
		t.Logf("restore of %d claims: %v to data read back", len(claims), time.Since(start).Round(time.Millisecond))

		// And into another namespace.
		mapped := ns + "-copy"
		t.Cleanup(func() {
			_ = w.Env.Kube.CoreV1().Namespaces().Delete(context.Background(), mapped, metav1.DeleteOptions{})
		})
		s = w.velero.restore(t, "r2-"+ns, b1, true, "--namespace-mappings", ns+":"+mapped)
		expectPhase(t, s, "Completed")
		w.sameData(t, mapped)
		deniedAfter, allowedAfter := w.webhookCounts(t)
		if d := deniedAfter - denied; d != 0 {
			t.Errorf("our webhook denied %v requests during the restores", d)
		}
		if w.wh != nil {
			t.Logf("our webhook admitted during the restores: %v volumesnapshots, %v volumesnapshotcontents, %v persistentvolumeclaims",
				allowedAfter["volumesnapshots"]-allowedBefore["volumesnapshots"], allowedAfter["volumesnapshotcontents"]-allowedBefore["volumesnapshotcontents"],
				allowedAfter["persistentvolumeclaims"]-allowedBefore["persistentvolumeclaims"])
		}

		// Two more backups while the restores' snapshot objects exist.
		before = w.backendIDs(t)
		b2 := "b2-" + ns
		expectPhase(t, w.velero.backup(t, b2, ns, true), "Completed")
		b2IDs := newIDs(before, w.backendIDs(t))
		before = w.backendIDs(t)
		b3 := "b3-" + ns
		expectPhase(t, w.velero.backup(t, b3, mapped, true), "Completed")
		b3IDs := newIDs(before, w.backendIDs(t))
		if len(b2IDs) != len(claims) || len(b3IDs) != len(claims) {
			t.Fatalf("backend snapshots of the second and third backups: %v and %v, want %d each", b2IDs, b3IDs, len(claims))
		}
		all := w.backendIDs(t)
		t.Logf("backend snapshots before deleting backups: %d (b1 %d, b2 %d, b3 %d)", len(all), len(b1IDs), len(b2IDs), len(b3IDs))

		w.velero.deleteBackups(t, b1, b2)
		left := w.backendIDs(t)
		for _, id := range append(append([]string{}, b1IDs...), b2IDs...) {
			if left[id] {
				t.Errorf("backend snapshot %s of a deleted backup is still there", id)
			}
		}
		for _, id := range b3IDs {
			if !left[id] {
				t.Errorf("backend snapshot %s of backup %s, which was not deleted, is gone", id, b3)
			}
		}
		t.Logf("backend snapshots after deleting %s and %s: %d (were %d)", b1, b2, len(left), len(all))
		w.velero.deleteBackups(t, b3)
		for _, id := range b3IDs {
			if w.backendIDs(t)[id] {
				t.Errorf("backend snapshot %s of deleted backup %s is still there", id, b3)
			}
		}
		if left := w.backendIDs(t); len(left) != 0 {
			t.Errorf("backend snapshots left after every backup was deleted: %v", left)
		}
		// The restores' snapshots and contents stay in the namespaces
		// (Velero leaves them; their contents are Retain and now point at
		// deleted backend snapshots): report them, then delete them as a
		// user would, and nothing may be stuck.
		w.objectReport(t, ns, mapped)
		w.deleteNamespace(t, ns)
		w.deleteNamespace(t, mapped)
		w.deleteContents(t)
		w.BackendMatchesContents(t)
	})
}

// deleteContents deletes every content of the world's driver and waits
// until they are gone.
func (w *world) deleteContents(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	contents, err := w.Env.Snap.SnapshotV1().VolumeSnapshotContents().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range contents.Items {
		if c.Spec.Driver == w.Drv.Name {
			n++
			if err := w.Env.Snap.SnapshotV1().VolumeSnapshotContents().Delete(ctx, c.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
		}
	}
	framework.Eventually(t, time.Minute, "the driver's contents deleted", func() (bool, error) {
		contents, err := w.Env.Snap.SnapshotV1().VolumeSnapshotContents().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		var left []string
		for _, c := range contents.Items {
			if c.Spec.Driver == w.Drv.Name {
				left = append(left, fmt.Sprintf("%s (finalizers %v)", c.Name, c.Finalizers))
			}
		}
		return len(left) == 0, fmt.Errorf("left: %v", left)
	})
	t.Logf("%d contents of the driver left in the cluster deleted, none stuck", n)
}

// objectReport logs the snapshot objects the restores left in the
// namespaces, which Velero does not remove.
func (w *world) objectReport(t *testing.T, namespaces ...string) {
	t.Helper()
	var lines []string
	for _, ns := range namespaces {
		vss, err := w.Env.Snap.SnapshotV1().VolumeSnapshots(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, vs := range vss.Items {
			ready := vs.Status != nil && vs.Status.ReadyToUse != nil && *vs.Status.ReadyToUse
			lines = append(lines, fmt.Sprintf("%s/%s ready=%v", ns, vs.Name, ready))
		}
	}
	contents, err := w.Env.Snap.SnapshotV1().VolumeSnapshotContents().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range contents.Items {
		if c.Spec.Driver == w.Drv.Name {
			lines = append(lines, fmt.Sprintf("content %s policy=%s ref=%s/%s", c.Name, c.Spec.DeletionPolicy, c.Spec.VolumeSnapshotRef.Namespace, c.Spec.VolumeSnapshotRef.Name))
		}
	}
	t.Logf("snapshot objects left after the backups were deleted (%d):\n%s", len(lines), strings.Join(lines, "\n"))
}

// TestVeleroGroupBackup: the claims carry Velero's group label
// (velero.io/volume-group), so Velero snapshots them together as one
// VolumeGroupSnapshot of the class labelled for it. Velero v1.18.3 then
// waits for member VolumeSnapshots owned by its group snapshot through an
// owner reference of API version groupsnapshot.storage.k8s.io/v1beta2,
// while the community controller (v8.6.0 and v8.7.0), and snapkeeper with it, write
// the served v1: with either pair the group is cut and ready, and Velero
// never sees its members (docs/backup.md). The test pins that behaviour,
// the same for both pairs, with a short --csi-snapshot-timeout, and checks
// that nothing leaks: deleting the backup and the namespace leaves the
// backend empty.
func TestVeleroGroupBackup(t *testing.T) {
	forPairs(t, func(t *testing.T, p pair) {
		w := newWorld(t, p)
		ns := w.NS
		groupClass := "group-" + ns
		gc := framework.GroupSnapshotClass(groupClass, w.Drv.Name, snapv1.VolumeSnapshotContentDelete, false)
		gc.Labels = map[string]string{"velero.io/csi-volumegroupsnapshot-class": "true"}
		framework.MustCreate(t, w.Env.Snap.GroupsnapshotV1().VolumeGroupSnapshotClasses().Create, gc)
		t.Cleanup(func() {
			_ = w.Env.Snap.GroupsnapshotV1().VolumeGroupSnapshotClasses().Delete(context.Background(), groupClass, metav1.DeleteOptions{})
		})
		w.fill(t)
		for _, c := range claims {
			pvc, err := w.Env.Kube.CoreV1().PersistentVolumeClaims(ns).Get(context.Background(), c, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if pvc.Labels == nil {
				pvc.Labels = map[string]string{}
			}
			pvc.Labels["velero.io/volume-group"] = "app"
			if _, err := w.Env.Kube.CoreV1().PersistentVolumeClaims(ns).Update(context.Background(), pvc, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		b := "g1-" + ns
		s := w.velero.backup(t, b, ns, true, "--csi-snapshot-timeout=20s")
		if s.Phase != "PartiallyFailed" && s.Phase != "Completed" {
			t.Errorf("%v: want PartiallyFailed (Velero does not see the members) or Completed", s)
		}
		groups, err := w.Drv.GetGroups(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		vgs, err := w.Env.Snap.GroupsnapshotV1().VolumeGroupSnapshots(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range vgs.Items {
			ready := g.Status != nil && g.Status.ReadyToUse != nil && *g.Status.ReadyToUse
			t.Logf("VolumeGroupSnapshot %s/%s (Velero's) ready=%v; the driver holds %d group snapshots", ns, g.Name, ready, len(groups))
			if !ready {
				t.Errorf("Velero's group snapshot %s is not ready", g.Name)
			}
		}
		w.velero.deleteBackups(t, b)
		w.deleteNamespace(t, ns)
		w.deleteContents(t)
		if left := w.backendIDs(t); len(left) != 0 {
			t.Errorf("backend snapshots left after the backup and the namespace were deleted: %v", left)
		}
		w.Env.WaitBackendGroupsMatchGroupContents(t, w.Drv)
		w.BackendMatchesContents(t)
	})
}

// TestVeleroFaults: backups and restores through a cluster's faults.
// The snapshot controllers (binder and CSI side) are killed while Velero
// backs the namespace up, and again while it restores it; the driver
// answers CreateSnapshot 10 s late, once within Velero's CSI snapshot
// timeout and once beyond it; and a driver that fails every
// CreateSnapshot. Each outcome is what Velero reports; at the end, with
// every backup deleted, the backend holds nothing and no object is stuck.
func TestVeleroFaults(t *testing.T) {
	forPairs(t, func(t *testing.T, p pair) {
		w := newWorld(t, p)
		ns := w.NS
		w.fill(t)

		// Killed during a backup.
		before := w.backendIDs(t)
		b1 := "kb-" + ns
		w.velero.backup(t, b1, ns, false)
		w.waitSnapshotIn(t, ns)
		w.killControllers(t)
		s := w.velero.wait(t, backupGVR, b1, 5*time.Minute)
		t.Logf("killed during the backup: %v", s)
		expectPhase(t, s, "Completed")
		if ids := newIDs(before, w.backendIDs(t)); len(ids) != len(claims) {
			t.Errorf("backup %s left %d backend snapshots (%v), want %d", b1, len(ids), ids, len(claims))
		}
		w.noSnapshotObjects(t, ns)

		// Killed during a restore.
		w.deleteNamespace(t, ns)
		r1 := "kr-" + ns
		w.velero.restore(t, r1, b1, false)
		w.waitSnapshotIn(t, ns)
		w.killControllers(t)
		s = w.velero.wait(t, restoreGVR, r1, 5*time.Minute)
		t.Logf("killed during the restore: %v", s)
		expectPhase(t, s, "Completed")
		w.sameData(t, ns)

		// A slow driver: 10 s per CreateSnapshot, within Velero's timeout.
		slow := framework.Faults{Rules: []framework.FaultRule{{Method: "CreateSnapshot", Latency: framework.Duration(10 * time.Second)}}}
		w.Drv.SetFaults(t, slow)
		start := time.Now()
		s = w.velero.backup(t, "slow-"+ns, ns, true)
		t.Logf("CreateSnapshot 10 s late: %v, %v after create", s, time.Since(start).Round(time.Second))
		expectPhase(t, s, "Completed")

		// Beyond it: Velero gives up after 5 s while the driver still cuts
		// the snapshots.
		s = w.velero.backup(t, "late-"+ns, ns, true, "--csi-snapshot-timeout=5s")
		t.Logf("CreateSnapshot 10 s late, Velero's CSI snapshot timeout 5 s: %v", s)
		if s.Phase == "Completed" {
			t.Errorf("%v: Velero should not complete a backup whose snapshots were not ready in time", s)
		}
		w.Drv.SetFaults(t, framework.Faults{})

		// A driver that fails every CreateSnapshot.
		w.Drv.SetFaults(t, framework.Faults{Rules: []framework.FaultRule{{Method: "CreateSnapshot", Code: "ResourceExhausted", Message: "backend full"}}})
		s = w.velero.backup(t, "fail-"+ns, ns, true, "--csi-snapshot-timeout=30s")
		t.Logf("every CreateSnapshot failing: %v", s)
		if s.Phase == "Completed" {
			t.Errorf("%v: a backup whose snapshots all failed completed", s)
		}
		w.snapshotErrors(t, ns)
		w.Drv.SetFaults(t, framework.Faults{})

		// Nothing leaked or stuck.
		list, err := w.Env.Dynamic.Resource(backupGVR).Namespace(veleroNS).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, b := range list.Items {
			names = append(names, b.GetName())
		}
		w.velero.deleteBackups(t, names...)
		if p == community {
			// The community controllers keep the failed and timed-out
			// backups' snapshots and their claims for longer than the
			// wait (docs/compatibility.md, "Velero"): recorded, and the
			// leak checks below need a namespace that goes.
			if w.namespaceHeld(t, ns) {
				t.Logf("community pair: namespace %s still held after 2 minutes; leak checks skipped", ns)
				return
			}
		} else {
			w.deleteNamespace(t, ns)
		}
		w.deleteContents(t)
		framework.Eventually(t, time.Minute, "backend empty", func() (bool, error) {
			left := w.backendIDs(t)
			return len(left) == 0, fmt.Errorf("backend snapshots left: %v", left)
		})
		w.BackendMatchesContents(t)
	})
}

// waitSnapshotIn waits until Velero has created a VolumeSnapshot in ns.
func (w *world) waitSnapshotIn(t *testing.T, ns string) {
	t.Helper()
	framework.Eventually(t, time.Minute, "Velero's first VolumeSnapshot in "+ns, func() (bool, error) {
		vss, err := w.Env.Snap.SnapshotV1().VolumeSnapshots(ns).List(context.Background(), metav1.ListOptions{})
		return err == nil && len(vss.Items) > 0, err
	})
}

// killControllers kills the binder and the CSI side (SIGKILL, as an
// evicted or OOM-killed pod dies) and starts them again.
func (w *world) killControllers(t *testing.T) {
	t.Helper()
	for _, p := range []*framework.Process{w.binder, w.csi} {
		p.Signal(syscall.SIGKILL)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_ = p.Wait(ctx)
		cancel()
	}
	w.startBinder(t)
	w.startCSISide(t)
	t.Logf("binder and CSI side killed and started again")
}

// snapshotErrors logs the errors the namespace's VolumeSnapshots carry.
func (w *world) snapshotErrors(t *testing.T, ns string) {
	t.Helper()
	vss, err := w.Env.Snap.SnapshotV1().VolumeSnapshots(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, vs := range vss.Items {
		if vs.Status != nil && vs.Status.Error != nil && vs.Status.Error.Message != nil {
			t.Logf("VolumeSnapshot %s/%s error: %s", ns, vs.Name, *vs.Status.Error.Message)
		}
	}
	t.Logf("%d VolumeSnapshots left in %s after the failed backup", len(vss.Items), ns)
}
