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
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

const groupGate = "--feature-gates=CSIVolumeGroupSnapshot=true"

// pair is who runs the snapshot controllers: snapkeeper (binder, CSI side
// and webhook) or the community's snapshot-controller and csi-snapshotter
// v8.6.0 (which ship no webhook).
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
	s := framework.NewScenario(t, framework.ScenarioOptions{DriverPrefix: "backup", DefaultClass: true, NoController: true,
		Faults: faults, DriverArgs: []string{"--data-dir=" + dataDir}})
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
	p, err := w.Env.LaunchCommunity(w.Env.TempDir(t, name), name, append(flags, args...), nil, drv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s log (tail):\n%s", name, p.Tail(6000))
		}
		p.Stop(15 * time.Second)
	})
	return p
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
	if err := w.Env.Kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	framework.Eventually(t, 2*time.Minute, "namespace "+ns+" gone", func() (bool, error) {
		_, err := w.Env.Kube.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), err
	})
}

// webhookDenials is how many requests our webhook denied so far.
func (w *world) webhookDenials(t *testing.T) float64 {
	t.Helper()
	if w.wh == nil {
		return 0
	}
	s, err := w.wh.Scrape(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s.Sum("snapkeeper_webhook_requests_total", `verdict="denied"`)
}

func (w *world) webhookAllowed(t *testing.T) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	if w.wh == nil {
		return out
	}
	s, err := w.wh.Scrape(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"volumesnapshots", "volumesnapshotcontents", "persistentvolumeclaims"} {
		out[r] = s.Sum("snapkeeper_webhook_requests_total", `resource="`+r+`"`, `verdict="allowed"`)
	}
	return out
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
		start := time.Now()
		b1 := "b1-" + ns
		s := w.velero.backup(t, b1, ns, true)
		expectPhase(t, s, "Completed")
		if s.SnapshotsCompleted != int64(len(claims)) {
			t.Errorf("%v: want %d CSI snapshots", s, len(claims))
		}
		t.Logf("backup of %d claims: %v to Completed", len(claims), time.Since(start).Round(time.Millisecond))
		b1IDs := newIDs(before, w.backendIDs(t))
		if len(b1IDs) != len(claims) {
			t.Fatalf("the backup left %d backend snapshots (%v), want %d", len(b1IDs), b1IDs, len(claims))
		}
		w.noSnapshotObjects(t, ns)

		// Restore into the same namespace after it is gone.
		w.deleteNamespace(t, ns)
		denied := w.webhookDenials(t)
		allowedBefore := w.webhookAllowed(t)
		start = time.Now()
		s = w.velero.restore(t, "r1-"+ns, b1, true)
		expectPhase(t, s, "Completed")
		w.sameData(t, ns)
		t.Logf("restore of %d claims: %v to data read back", len(claims), time.Since(start).Round(time.Millisecond))

		// And into another namespace.
		mapped := ns + "-copy"
		t.Cleanup(func() { _ = w.Env.Kube.CoreV1().Namespaces().Delete(context.Background(), mapped, metav1.DeleteOptions{}) })
		s = w.velero.restore(t, "r2-"+ns, b1, true, "--namespace-mappings", ns+":"+mapped)
		expectPhase(t, s, "Completed")
		w.sameData(t, mapped)
		if d := w.webhookDenials(t) - denied; d != 0 {
			t.Errorf("our webhook denied %v requests during the restores", d)
		}
		if w.wh != nil {
			after := w.webhookAllowed(t)
			t.Logf("our webhook admitted during the restores: %v volumesnapshots, %v volumesnapshotcontents, %v persistentvolumeclaims",
				after["volumesnapshots"]-allowedBefore["volumesnapshots"], after["volumesnapshotcontents"]-allowedBefore["volumesnapshotcontents"],
				after["persistentvolumeclaims"]-allowedBefore["persistentvolumeclaims"])
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
	t.Logf("%d contents left by the restores deleted, none stuck", n)
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

