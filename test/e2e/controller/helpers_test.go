package controller

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

// setup is one test's world: a driver with a unique name, a class for it,
// and a controller running both components.
type setup struct {
	env   *framework.Env
	ns    string
	drv   *framework.CSIDriver
	ctrl  *framework.Component
	class string
	args  []string
}

type setupOpts struct {
	faults       []framework.FaultRule
	policy       snapv1.DeletionPolicy
	defaultClass bool
	noController bool
	extraArgs    []string
	classParams  map[string]string
}

func newSetup(t *testing.T, o setupOpts) *setup {
	t.Helper()
	env := framework.Shared(t)
	s := &setup{env: env, ns: env.Namespace(t)}
	name := fmt.Sprintf("e2e-%04x.csi.snapkeeper.io", rand.IntN(0xffff))
	s.drv = env.StartCSIDriver(t, framework.CSIDriverOptions{Name: name, Faults: o.faults})
	if o.policy == "" {
		o.policy = snapv1.VolumeSnapshotContentDelete
	}
	s.class = "class-" + s.ns
	class := &snapv1.VolumeSnapshotClass{ObjectMeta: metav1.ObjectMeta{Name: s.class}, Driver: name,
		DeletionPolicy: o.policy, Parameters: o.classParams}
	if o.defaultClass {
		class.Annotations = map[string]string{snapshot.AnnDefaultClass: "true"}
	}
	if _, err := env.Snap.SnapshotV1().VolumeSnapshotClasses().Create(context.Background(), class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.args = append([]string{"--components=binder,csi", "--csi-address=" + s.drv.Socket, "-v=2"}, o.extraArgs...)
	if !o.noController {
		s.ctrl = env.StartController(t, s.args...)
	}
	return s
}

func (s *setup) pvc(t *testing.T, name string) {
	t.Helper()
	s.env.CreateBoundPVC(t, s.ns, name, framework.PVCOptions{Driver: s.drv.Name})
}

func (s *setup) snapshot(t *testing.T, name, pvc string, class *string) *snapv1.VolumeSnapshot {
	t.Helper()
	vs := &snapv1.VolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.ns},
		Spec: snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{PersistentVolumeClaimName: &pvc},
			VolumeSnapshotClassName: class},
	}
	out, err := s.env.Snap.SnapshotV1().VolumeSnapshots(s.ns).Create(context.Background(), vs, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (s *setup) get(t *testing.T, name string) *snapv1.VolumeSnapshot {
	t.Helper()
	vs, err := s.env.Snap.SnapshotV1().VolumeSnapshots(s.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

func (s *setup) waitReady(t *testing.T, name string, timeout time.Duration) *snapv1.VolumeSnapshot {
	t.Helper()
	return s.env.WaitSnapshotReady(t, s.ns, name, timeout)
}

func (s *setup) waitError(t *testing.T, name, substr string) *snapv1.VolumeSnapshot {
	t.Helper()
	var vs *snapv1.VolumeSnapshot
	framework.Eventually(t, 30*time.Second, "snapshot "+name+" error "+substr, func() (bool, error) {
		var err error
		vs, err = s.env.Snap.SnapshotV1().VolumeSnapshots(s.ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if vs.Status == nil || vs.Status.Error == nil || vs.Status.Error.Message == nil {
			return false, fmt.Errorf("status %+v", vs.Status)
		}
		msg := *vs.Status.Error.Message
		return containsFold(msg, substr), fmt.Errorf("error %q", msg)
	})
	return vs
}

func (s *setup) deleteSnapshot(t *testing.T, name string) {
	t.Helper()
	if err := s.env.Snap.SnapshotV1().VolumeSnapshots(s.ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
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

// backendMatchesContents asserts no leak and no duplicate on the driver.
func (s *setup) backendMatchesContents(t *testing.T) {
	t.Helper()
	s.env.WaitBackendMatchesContents(t, s.drv)
}

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}
