package doctor

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

// createSituations creates every situation in s's namespace, and a driver
// error in a scenario of its own, which it returns.
func createSituations(t *testing.T, s *framework.Scenario) *framework.Scenario {
	t.Helper()
	env, ns := s.Env, s.NS
	// A driver nobody serves, and one with two default classes.
	orphan := framework.DriverName("orphan")
	twice := framework.DriverName("twice")
	env.CreateSnapshotClass(t, framework.SnapshotClass("orphan-"+ns, orphan, snapv1.VolumeSnapshotContentDelete, false))
	env.CreateSnapshotClass(t, framework.SnapshotClass("twice-a-"+ns, twice, snapv1.VolumeSnapshotContentDelete, true))
	env.CreateSnapshotClass(t, framework.SnapshotClass("twice-b-"+ns, twice, snapv1.VolumeSnapshotContentDelete, true))
	secretClass := framework.SnapshotClass("secret-"+ns, s.Drv.Name, snapv1.VolumeSnapshotContentDelete, false)
	secretClass.Parameters = map[string]string{snapshot.ParamSecretName: "no-such-secret", snapshot.ParamSecretNamespace: ns}
	env.CreateSnapshotClass(t, secretClass)

	s.PVC(t, "data")
	env.CreateBoundPVC(t, ns, "orphan-data", framework.PVCOptions{Driver: orphan})
	env.CreateBoundPVC(t, ns, "twice-data", framework.PVCOptions{Driver: twice})
	createPendingPVC(t, env, ns, "pending")
	createHostPathPVC(t, env, ns, "hostpath")

	s.Snapshot(t, "nocsi", "orphan-data", ptr.To("orphan-"+ns))
	s.Snapshot(t, "nodefault", "data", nil)
	s.Snapshot(t, "twodefaults", "twice-data", nil)
	s.Snapshot(t, "noclass", "data", ptr.To("does-not-exist"))
	s.Snapshot(t, "nopvc", "missing", &s.Class)
	s.Snapshot(t, "unbound", "pending", &s.Class)
	s.Snapshot(t, "notcsi", "hostpath", &s.Class)
	s.Snapshot(t, "nosecret", "data", ptr.To("secret-"+ns))
	s.PreProvisionedContent(t, "misbound-"+ns, "handle-1", "someone-else", snapv1.VolumeSnapshotContentRetain)
	env.CreateSnapshot(t, preProvisioned(ns, "misbound", "misbound-"+ns))
	env.CreateSnapshot(t, preProvisioned(ns, "preprov", "no-such-content-"+ns))
	// Deletion held by a claim restoring from the snapshot.
	s.Snapshot(t, "held", "data", &s.Class)
	s.WaitReady(t, "held", 30*time.Second)
	if _, err := s.RestoreClaim(t, "restore", "held"); err != nil {
		t.Fatal(err)
	}
	s.DeleteSnapshot(t, "held")

	// A driver error, from a CSI side whose driver refuses every cut.
	bad := framework.NewScenario(t, framework.ScenarioOptions{DriverPrefix: "docbad", ControllerArgs: []string{"--components=csi"},
		Faults: []framework.FaultRule{{Method: "CreateSnapshot", Code: "InvalidArgument", Message: "quota exceeded"}}})
	bad.PVC(t, "data")
	bad.Snapshot(t, "bad", "data", &bad.Class)

	return bad
}

// TestDoctorExplainsEachSituation creates every situation snapctl doctor
// knows on a real API server, with our controller running, and checks the
// line of each and the exit code.
func TestDoctorExplainsEachSituation(t *testing.T) {
	s := framework.NewScenario(t, framework.ScenarioOptions{DriverPrefix: "doc", ControllerArgs: []string{"--no-csi-side-after=2s"}})
	env, ns := s.Env, s.NS
	bad := createSituations(t, s)
	want := map[string]string{
		"VolumeSnapshot " + ns + "/nocsi":       "[no-csi-side] no CSI side",
		"VolumeSnapshot " + ns + "/nodefault":   "[no-default-class]",
		"VolumeSnapshot " + ns + "/twodefaults": "[two-default-classes]",
		"VolumeSnapshot " + ns + "/noclass":     "[class-not-found]",
		"VolumeSnapshot " + ns + "/nopvc":       "[pvc-missing]",
		"VolumeSnapshot " + ns + "/unbound":     "[pvc-unbound]",
		"VolumeSnapshot " + ns + "/notcsi":      "[volume-not-csi]",
		"VolumeSnapshot " + ns + "/nosecret":    "[secret-missing]",
		"VolumeSnapshot " + ns + "/misbound":    "[content-misbound]",
		"VolumeSnapshot " + ns + "/preprov":     "[content-missing]",
		"VolumeSnapshot " + ns + "/held":        "[deletion-held] deletion held by finalizer " + snapshot.FinalizerSnapshotAsSource,
		"VolumeSnapshot " + bad.NS + "/bad":     "[driver-error]",
	}
	var out string
	var code int
	err := framework.Poll(60*time.Second, "a doctor line for every situation", func() (bool, error) {
		out, code = runDoctor(t, env)
		for obj, frag := range want {
			if l := lineOf(out, obj); !strings.Contains(l, frag) {
				return false, fmt.Errorf("line of %s = %q, want %q", obj, l, frag)
			}
		}
		return code == 1, fmt.Errorf("exit code %d", code)
	})
	if err != nil {
		t.Fatalf("%v\noutput:\n%s", err, out)
	}
	t.Logf("snapctl doctor:\n%s", out)
	if l := lineOf(out, "VolumeSnapshot "+bad.NS+"/bad"); !strings.Contains(l, "quota exceeded") {
		t.Errorf("the driver's message is not shown: %q", l)
	}
	// One namespace, one name, and JSON.
	one, code := runDoctor(t, env, "-n", ns, "nopvc")
	if code != 1 || strings.Count(one, "\n") != 2 || lineOf(one, "VolumeSnapshot "+ns+"/nopvc") == "" {
		t.Errorf("doctor -n %s nopvc: exit %d\n%s", ns, code, one)
	}
	js, code := runDoctor(t, env, "-n", bad.NS, "-o", "json")
	if code != 1 || !strings.Contains(js, `"code": "driver-error"`) {
		t.Errorf("doctor -o json: exit %d\n%s", code, js)
	}
	if _, code := runDoctor(t, env, "-o", "yaml"); code != 2 {
		t.Errorf("bad -o: exit %d, want 2", code)
	}
}

func preProvisioned(ns, name, content string) *snapv1.VolumeSnapshot {
	return &snapv1.VolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{VolumeSnapshotContentName: &content}}}
}

// TestDoctorNothingStuck: a namespace whose snapshots are ready exits 0.
func TestDoctorNothingStuck(t *testing.T) {
	s := framework.NewScenario(t, framework.ScenarioOptions{DriverPrefix: "docok"})
	s.PVC(t, "data")
	s.Snapshot(t, "ok", "data", &s.Class)
	s.WaitReady(t, "ok", 30*time.Second)
	out, code := runDoctor(t, s.Env, "-n", s.NS)
	if code != 0 || !strings.Contains(out, "nothing stuck") {
		t.Fatalf("exit %d, want 0:\n%s", code, out)
	}
}

// TestNoCSISideStatusErrorAppearsAndClears: with only the binder running,
// the snapshot says that no CSI side runs for its driver (one status
// error, one Warning event); once a CSI side starts, it is cut and the
// error is gone.
func TestNoCSISideStatusErrorAppearsAndClears(t *testing.T) {
	s := framework.NewScenario(t, framework.ScenarioOptions{DriverPrefix: "docnocsi", ControllerArgs: []string{"--components=binder", "--no-csi-side-after=2s"}})
	s.PVC(t, "data")
	s.Snapshot(t, "snap", "data", &s.Class)
	vs := s.WaitSnapshotError(t, "snap", "no CSI side (csi-snapshotter or snapkeeper --components=csi) is running for driver "+s.Drv.Name, 30*time.Second)
	if vs.Status.ReadyToUse == nil || *vs.Status.ReadyToUse {
		t.Errorf("readyToUse = %v, want false", vs.Status.ReadyToUse)
	}
	framework.Eventually(t, 10*time.Second, "a NoCSISide event", func() (bool, error) {
		evs, err := s.Env.Kube.CoreV1().Events(s.NS).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=" + snapshot.ReasonNoCSISide})
		if err != nil {
			return false, err
		}
		return len(evs.Items) == 1 && evs.Items[0].InvolvedObject.Name == "snap", fmt.Errorf("%d events", len(evs.Items))
	})
	time.Sleep(3 * time.Second) // re-checks must not write again
	if again := s.GetSnapshot(t, "snap"); again.ResourceVersion != vs.ResourceVersion {
		t.Errorf("the snapshot was written again while waiting (resourceVersion %s -> %s)", vs.ResourceVersion, again.ResourceVersion)
	}
	s.StartController(t, "--components=csi", "--csi-address="+s.Drv.Socket)
	ready := s.WaitReady(t, "snap", 30*time.Second)
	if ready.Status.Error != nil {
		t.Errorf("error not cleared: %v", *ready.Status.Error.Message)
	}
	// The CSI side runs without leader election: its heartbeat Lease is
	// what the binder saw.
	leases, err := s.Env.Kube.CoordinationV1().Leases("").List(context.Background(),
		metav1.ListOptions{LabelSelector: snapshot.LabelCSIHeartbeatDriver + "=" + s.Drv.Name})
	if err != nil || len(leases.Items) != 1 || !strings.HasPrefix(leases.Items[0].Name, snapshot.HeartbeatLeasePrefix) {
		t.Errorf("heartbeat Leases of %s: %v %v", s.Drv.Name, leases, err)
	}
}
