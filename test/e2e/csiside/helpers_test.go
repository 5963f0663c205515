// Package csiside proves the CSI side of the controller (docs/csi-side.md) end to end:
// the real controller binary, on a real kube-apiserver with the snapshot
// CRDs, next to the mock CSI driver on a unix socket, with faults injected
// into the driver. Every test ends by checking that the driver holds exactly
// the snapshots that contents of its driver name point at: nothing leaked,
// nothing cut twice.
package csiside

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// setup is one test's world: a driver with a unique name (so that no test
// sees another's contents), a class for it, and by default one controller
// process running the binder and the CSI side.
type setup struct {
	env   *framework.Env
	ns    string
	drv   *framework.CSIDriver
	class string
	// ctrl is the controller newSetup started (nil with noController).
	ctrl *framework.Component
	// restartable is set when the driver was started with
	// setupOpts.restartable.
	restartable *restartableDriver
}

type setupOpts struct {
	faults []framework.FaultRule
	policy snapv1.DeletionPolicy
	// noController: the test starts its own controller processes.
	noController bool
	// restartable: the driver can be killed and started again on the same
	// socket.
	restartable bool
	extraArgs   []string
}

func newSetup(t *testing.T, o setupOpts) *setup {
	t.Helper()
	env := framework.Shared(t)
	s := &setup{env: env, ns: env.Namespace(t)}
	name := fmt.Sprintf("csiside-%04x.csi.snapkeeper.io", rand.IntN(0xffff))
	if o.restartable {
		s.restartable = startRestartableDriver(t, env, name, o.faults)
		s.drv = s.restartable.CSIDriver
	} else {
		s.drv = env.StartCSIDriver(t, framework.CSIDriverOptions{Name: name, Faults: o.faults})
	}
	if o.policy == "" {
		o.policy = snapv1.VolumeSnapshotContentDelete
	}
	s.class = "class-" + s.ns
	class := &snapv1.VolumeSnapshotClass{ObjectMeta: metav1.ObjectMeta{Name: s.class}, Driver: name, DeletionPolicy: o.policy}
	if _, err := env.Snap.SnapshotV1().VolumeSnapshotClasses().Create(context.Background(), class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if !o.noController {
		s.ctrl = s.startController(t, append([]string{"--components=binder,csi", "--csi-address=" + s.drv.Socket}, o.extraArgs...)...)
	}
	return s
}

// startController starts one controller process; -v=2 logs every CSI
// decision, which is what a failed run needs.
func (s *setup) startController(t *testing.T, args ...string) *framework.Component {
	t.Helper()
	c := s.env.StartController(t, append([]string{"-v=2"}, args...)...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("controller %v log (tail):\n%s", args, c.Proc.Tail(6000))
		}
	})
	return c
}

func (s *setup) pvc(t *testing.T, name string) {
	t.Helper()
	s.env.CreateBoundPVC(t, s.ns, name, framework.PVCOptions{Driver: s.drv.Name})
}

// snapshot creates a dynamic VolumeSnapshot of pvc with the test's class.
func (s *setup) snapshot(t *testing.T, name, pvc string) *snapv1.VolumeSnapshot {
	t.Helper()
	vs := &snapv1.VolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.ns},
		Spec: snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{PersistentVolumeClaimName: &pvc},
			VolumeSnapshotClassName: &s.class},
	}
	out, err := s.env.Snap.SnapshotV1().VolumeSnapshots(s.ns).Create(context.Background(), vs, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (s *setup) content(t *testing.T, name string) *snapv1.VolumeSnapshotContent {
	t.Helper()
	c, err := s.env.Snap.SnapshotV1().VolumeSnapshotContents().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (s *setup) waitReady(t *testing.T, name string, timeout time.Duration) *snapv1.VolumeSnapshot {
	t.Helper()
	return s.env.WaitSnapshotReady(t, s.ns, name, timeout)
}

// waitSnapshotError waits until the VolumeSnapshot's status.error contains
// substr.
func (s *setup) waitSnapshotError(t *testing.T, name, substr string, timeout time.Duration) *snapv1.VolumeSnapshot {
	t.Helper()
	var vs *snapv1.VolumeSnapshot
	framework.Eventually(t, timeout, "snapshot "+name+" error containing "+substr, func() (bool, error) {
		var err error
		vs, err = s.env.Snap.SnapshotV1().VolumeSnapshots(s.ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if vs.Status == nil || vs.Status.Error == nil || vs.Status.Error.Message == nil {
			return false, fmt.Errorf("status %s", statusString(vs.Status))
		}
		msg := *vs.Status.Error.Message
		return strings.Contains(msg, substr), fmt.Errorf("error %q", msg)
	})
	return vs
}

// waitContent polls a content until cond holds.
func (s *setup) waitContent(t *testing.T, name, what string, timeout time.Duration, cond func(*snapv1.VolumeSnapshotContent) bool) *snapv1.VolumeSnapshotContent {
	t.Helper()
	var c *snapv1.VolumeSnapshotContent
	framework.Eventually(t, timeout, "content "+name+" "+what, func() (bool, error) {
		var err error
		c, err = s.env.Snap.SnapshotV1().VolumeSnapshotContents().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return cond(c), fmt.Errorf("annotations %v finalizers %v status %s", c.Annotations, c.Finalizers, contentStatusString(c.Status))
	})
	return c
}

func (s *setup) deleteSnapshot(t *testing.T, name string) {
	t.Helper()
	if err := s.env.Snap.SnapshotV1().VolumeSnapshots(s.ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (s *setup) deleteContent(t *testing.T, name string) {
	t.Helper()
	if err := s.env.Snap.SnapshotV1().VolumeSnapshotContents().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (s *setup) waitSnapshotGone(t *testing.T, name string) {
	t.Helper()
	s.env.WaitSnapshotGone(t, s.ns, name, 30*time.Second)
}

func (s *setup) waitContentGone(t *testing.T, name string) {
	t.Helper()
	s.env.WaitContentGone(t, name, 30*time.Second)
}

// backend returns the snapshots the driver holds (without the mock's
// built-in ones).
func (s *setup) backend(t *testing.T) []framework.BackendSnapshot {
	t.Helper()
	b, err := s.drv.Snapshots(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// waitBackend waits until the driver holds n snapshots and returns them.
func (s *setup) waitBackend(t *testing.T, n int, timeout time.Duration) []framework.BackendSnapshot {
	t.Helper()
	var b []framework.BackendSnapshot
	framework.Eventually(t, timeout, fmt.Sprintf("driver holding %d snapshots", n), func() (bool, error) {
		var err error
		b, err = s.drv.Snapshots(context.Background())
		return err == nil && len(b) == n, fmt.Errorf("%+v (err %v)", b, err)
	})
	return b
}

// calls returns how often the driver answered method with code.
func (s *setup) calls(t *testing.T, method, code string) int64 {
	t.Helper()
	c, err := s.drv.Calls(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return c[method][code]
}

func (s *setup) allCalls(t *testing.T) map[string]map[string]int64 {
	t.Helper()
	c, err := s.drv.Calls(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// backendMatchesContents asserts no leak and no duplicate on the driver.
func (s *setup) backendMatchesContents(t *testing.T) {
	t.Helper()
	s.env.WaitBackendMatchesContents(t, s.drv)
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
func (s *setup) cutBackendSnapshot(t *testing.T, name, volume string) *csipb.Snapshot {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+s.drv.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := csipb.NewControllerClient(conn).CreateSnapshot(ctx, &csipb.CreateSnapshotRequest{Name: name, SourceVolumeId: volume})
	if err != nil {
		t.Fatalf("CreateSnapshot %s on the driver: %v", name, err)
	}
	return resp.Snapshot
}

// preProvisionedContent creates a content for an existing backend
// snapshot, bound in its ref to namespace/vsName (which may not exist).
func (s *setup) preProvisionedContent(t *testing.T, name, handle, vsName string, policy snapv1.DeletionPolicy) *snapv1.VolumeSnapshotContent {
	t.Helper()
	c := &snapv1.VolumeSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: snapv1.VolumeSnapshotContentSpec{
			VolumeSnapshotRef: corev1.ObjectReference{Namespace: s.ns, Name: vsName},
			DeletionPolicy:    policy,
			Driver:            s.drv.Name,
			Source:            snapv1.VolumeSnapshotContentSource{SnapshotHandle: &handle},
		},
	}
	out, err := s.env.Snap.SnapshotV1().VolumeSnapshotContents().Create(context.Background(), c, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func statusString(st *snapv1.VolumeSnapshotStatus) string { return framework.JSON(st) }

func contentStatusString(st *snapv1.VolumeSnapshotContentStatus) string { return framework.JSON(st) }

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

// restartableDriver is the mock CSI driver on a fixed socket, which a test
// can kill and start again (the framework's driver cannot restart). A
// restarted mock has forgotten every snapshot and every fault.
type restartableDriver struct {
	*framework.CSIDriver
	bin, dir string
	args     []string
	proc     *framework.Process
	sockDir  string
}

func startRestartableDriver(t *testing.T, env *framework.Env, name string, faults []framework.FaultRule) *restartableDriver {
	t.Helper()
	bin, err := framework.Tool("mock-csi-driver")
	if err != nil {
		t.Fatal(err)
	}
	sockDir, err := os.MkdirTemp("", "csi-")
	if err != nil {
		t.Fatal(err)
	}
	d := &restartableDriver{
		CSIDriver: &framework.CSIDriver{Name: name, Socket: filepath.Join(sockDir, "csi.sock")},
		bin:       bin, dir: env.TempDir(t, "csi-restartable"), sockDir: sockDir,
	}
	d.args = []string{"--csi-address=" + d.Socket, "--name=" + name, "--http-address=127.0.0.1:0",
		"--ready-file=" + filepath.Join(d.dir, "ready.json")}
	if len(faults) > 0 {
		b, _ := json.Marshal(map[string]any{"rules": faults})
		d.args = append(d.args, "--faults="+string(b))
	}
	t.Cleanup(func() {
		if d.proc != nil {
			d.proc.Stop(5 * time.Second)
		}
		os.RemoveAll(sockDir)
	})
	d.start(t)
	return d
}

func (d *restartableDriver) start(t *testing.T) {
	t.Helper()
	ready := filepath.Join(d.dir, "ready.json")
	_ = os.Remove(ready)
	proc, err := framework.StartProcess(d.dir, "mock-csi-driver", d.bin, d.args)
	if err != nil {
		t.Fatal(err)
	}
	d.proc = proc
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, err := os.ReadFile(ready); err == nil {
			var r struct {
				HTTPAddress string `json:"httpAddress"`
			}
			if json.Unmarshal(b, &r) == nil && r.HTTPAddress != "" {
				d.HTTPAddr = r.HTTPAddress
				return
			}
		}
		if proc.Exited() || time.Now().After(deadline) {
			t.Fatalf("mock CSI driver did not start:\n%s", proc.Tail(3000))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// crash kills the driver with SIGKILL: calls in flight break, the socket
// file stays behind, the in-memory backend is lost.
func (d *restartableDriver) crash(t *testing.T) {
	t.Helper()
	d.proc.Signal(syscall.SIGKILL)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = d.proc.Wait(ctx)
	if !d.proc.Exited() {
		t.Fatal("mock CSI driver survived SIGKILL")
	}
}

// deleteAndExpectNothingLeft deletes a VolumeSnapshot and waits until it and
// its content are gone and the driver holds no snapshot at all.
func (s *setup) deleteAndExpectNothingLeft(t *testing.T, name, contentName string) {
	t.Helper()
	s.deleteSnapshot(t, name)
	s.waitSnapshotGone(t, name)
	s.waitContentGone(t, contentName)
	if b := s.backend(t); len(b) != 0 {
		t.Fatalf("driver still holds %+v", b)
	}
	s.backendMatchesContents(t)
}
