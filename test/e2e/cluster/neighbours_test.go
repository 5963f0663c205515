package cluster

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/pkg/doctor"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

// TestNeighboursGoneFirst removes what a snapshot depends on before the
// snapshot: its class, the CSI side, the driver. A snapshot that cannot
// finish says why (status error, Warning events, and a `snapctl doctor`
// line naming the cause and the fix), and finishes by itself once the
// neighbour is back; one that can finish without the neighbour does.
func TestNeighboursGoneFirst(t *testing.T) {
	t.Run("class deleted before its ready snapshot", func(t *testing.T) {
		w := newWorld(t, oursPair, worldOptions{})
		w.readySnapshot(t, "snap")
		content, _ := w.handleOf(t, "snap")
		if err := w.Env.Snap.SnapshotV1().VolumeSnapshotClasses().Delete(context.Background(), w.Class, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// The delete needs nothing of the class: the content carries what
		// DeleteSnapshot needs (external-snapshotter #412, #275).
		w.DeleteSnapshot(t, "snap")
		w.WaitSnapshotGone(t, "snap")
		w.WaitContentGone(t, content)
		w.invariants(t)
		if b := w.Drv.Created(t); len(b) != 0 {
			t.Fatalf("driver still holds %+v", b)
		}
	})

	t.Run("class created after its snapshot", func(t *testing.T) {
		w := newWorld(t, oursPair, worldOptions{})
		w.source(t, "data")
		late := "late-" + w.NS
		w.Snapshot(t, "snap", "data", &late)
		w.WaitSnapshotError(t, "snap", late, 30*time.Second)
		w.explains(t, "snap", doctor.ClassNotFound, "kubectl")
		w.oneWarning(t, "snap")
		w.Env.CreateSnapshotClass(t, framework.SnapshotClass(late, w.Drv.Name, snapv1.VolumeSnapshotContentDelete, false))
		t.Cleanup(func() {
			_ = w.Env.Snap.SnapshotV1().VolumeSnapshotClasses().Delete(context.Background(), late, metav1.DeleteOptions{})
		})
		vs := w.WaitReady(t, "snap", 90*time.Second)
		if vs.Status.Error != nil {
			t.Fatalf("ready snapshot keeps its error %s", framework.JSON(vs.Status.Error))
		}
		w.deleteAll(t, "snap")
	})

	t.Run("CSI side uninstalled first", func(t *testing.T) {
		w := newWorld(t, oursPair, worldOptions{})
		w.readySnapshot(t, "ready")
		w.stopCSISide()
		w.restartBinder(t, "--no-csi-side-after=5s")

		// A new snapshot waits for a CSI side and says so.
		w.Snapshot(t, "waiting", "data", nil)
		w.WaitSnapshotError(t, "waiting", "no CSI side", 90*time.Second)
		w.explains(t, "waiting", doctor.NoCSISide, "deploy one next to the driver")
		w.oneWarning(t, "waiting")
		// A ready one is deleted: its content waits for a CSI side to call
		// DeleteSnapshot.
		w.DeleteSnapshot(t, "ready")
		framework.Eventually(t, 30*time.Second, "doctor explains the held delete", func() (bool, error) {
			return w.doctorSays(t, "ready", doctor.NoCSISide), nil
		})
		w.startCSISide(t)
		w.WaitReady(t, "waiting", 60*time.Second)
		w.WaitSnapshotGone(t, "ready")
		w.deleteAll(t, "waiting")
	})

	t.Run("driver uninstalled first", func(t *testing.T) {
		w := newWorld(t, oursPair, worldOptions{})
		w.readySnapshot(t, "ready")
		_, handle := w.handleOf(t, "ready")
		// A call waits for the driver within the CSI timeout (1 min by
		// default), so that a driver restart costs no error: 5 s here.
		w.stopCSISide()
		w.startCSISide(t, "--timeout=5s")
		w.repeatsAllowed = true
		w.Drv.Stop()
		w.Snapshot(t, "waiting", "data", nil)
		w.WaitSnapshotError(t, "waiting", "", 60*time.Second)
		w.explains(t, "waiting", "", "")
		w.DeleteSnapshot(t, "ready")
		framework.Eventually(t, 60*time.Second, "doctor explains the held delete", func() (bool, error) {
			return w.doctorSays(t, "ready", doctor.DriverError), nil
		})
		// The driver comes back (the mock has forgotten what it held, so
		// the DeleteSnapshot finds nothing and succeeds): the delete and
		// the create finish.
		w.Drv.Start(t)
		w.WaitSnapshotGone(t, "ready")
		w.WaitReady(t, "waiting", 90*time.Second)
		for _, b := range w.Drv.Created(t) {
			if b.ID == handle && b.Name != "" {
				t.Logf("backend id %s reused by %s after the restart", handle, b.Name)
			}
		}
		w.deleteAll(t, "waiting")
	})
}

// restartBinder restarts our binder with more flags.
func (w *world) restartBinder(t *testing.T, args ...string) {
	t.Helper()
	w.binder.Stop(15 * time.Second)
	w.binder = w.StartController(t, append([]string{"--components=binder", groupGate}, args...)...).Proc
}

// deleteAll deletes snapshots and waits until they, their contents and
// their backend snapshots are gone.
func (w *world) deleteAll(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		w.DeleteSnapshot(t, n)
	}
	for _, n := range names {
		w.WaitSnapshotGone(t, n)
	}
	w.invariants(t)
}

// doctor runs `snapctl doctor -n <ns>` and returns its output.
func (w *world) doctor(t *testing.T) string {
	t.Helper()
	bin, err := framework.OwnBinary("./cmd/snapctl")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "doctor", "--kubeconfig="+w.Env.Kubeconfig, "-n", w.NS)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	var exit *exec.ExitError
	if err := cmd.Run(); err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1) {
		t.Fatalf("snapctl doctor: %v\n%s", err, errOut.String())
	}
	return out.String()
}

// doctorLine is the doctor's line about VolumeSnapshot name.
func (w *world) doctorLine(t *testing.T, name string) string {
	t.Helper()
	for _, l := range strings.Split(w.doctor(t), "\n") {
		if strings.HasPrefix(l, "VolumeSnapshot "+w.NS+"/"+name+" [") {
			return l
		}
	}
	return ""
}

func (w *world) doctorSays(t *testing.T, name, code string) bool {
	t.Helper()
	return strings.Contains(w.doctorLine(t, name), "["+code+"]")
}

// explains fails unless the doctor's line about snapshot name has code (any
// code when empty) and a fix containing fix.
func (w *world) explains(t *testing.T, name, code, fix string) {
	t.Helper()
	l := w.doctorLine(t, name)
	_, f, ok := strings.Cut(l, "; fix: ")
	if l == "" || !ok || (code != "" && !strings.Contains(l, "["+code+"]")) || !strings.Contains(f, fix) {
		t.Fatalf("snapctl doctor about %s: %q, want [%s] with a fix naming %q\n%s", name, l, code, fix, w.doctor(t))
	}
	t.Logf("snapctl doctor: %s", l)
}

// oneWarning fails unless snapshot name has Warning events of one reason,
// emitted once (a retry bumps the count of the same event, it does not add
// events).
func (w *world) oneWarning(t *testing.T, name string) {
	t.Helper()
	var warnings []corev1.Event
	framework.Eventually(t, 30*time.Second, "a Warning event on "+name, func() (bool, error) {
		list, err := w.Env.Kube.CoreV1().Events(w.NS).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
		if err != nil {
			return false, err
		}
		warnings = warnings[:0]
		for _, e := range list.Items {
			if e.Type == corev1.EventTypeWarning {
				warnings = append(warnings, e)
			}
		}
		return len(warnings) > 0, nil
	})
	reasons := map[string]bool{}
	for _, e := range warnings {
		reasons[e.Reason] = true
	}
	if len(reasons) != 1 {
		t.Fatalf("Warning events on %s: %s, want one reason", name, framework.JSON(warnings))
	}
	t.Logf("event on %s: %s %s", name, warnings[0].Reason, warnings[0].Message)
}
