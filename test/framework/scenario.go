package framework

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/pkg/csi/csitest"
	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
)

// Scenario is one test's world on the shared control plane: a namespace, a
// mock CSI driver with a name of its own (so that no test sees another's
// contents and the leak check sees only the test's), a VolumeSnapshotClass
// of that driver and, unless told otherwise, a controller running the
// binder and the CSI side next to the driver.
type Scenario struct {
	Env *Env
	NS  string
	Drv *CSIDriver
	// Class is the VolumeSnapshotClass NewScenario created ("" with
	// NoClass).
	Class string
	// GroupClass is the default VolumeGroupSnapshotClass NewScenario
	// created with ScenarioOptions.GroupClass, else "".
	GroupClass string
	// Ctrl is the controller NewScenario started (nil with NoController).
	Ctrl *Component
	// Args are that controller's arguments (StartController adds -v=2).
	Args []string
	// Prov is the csi-provisioner next to the driver on the cluster-like
	// plane (nil when claims are bound by hand).
	Prov *Provisioner

	claimSizes map[string]int64
	handles    map[string]string
}

// names hands out the names of the drivers and namespaces tests make,
// never one twice in a test process: the tests of a package share one
// control plane, where two drivers of one name would share default classes
// and contents (16 random bits alone collided once in CI).
var names = &nameSet{used: map[string]bool{}}

// nameSet is the set of names handed out.
type nameSet struct {
	sync.Mutex
	used map[string]bool
}

// next returns "<prefix>-<4 hex digits><suffix>", a name not handed out
// before.
func (d *nameSet) next(prefix, suffix string) string {
	d.Lock()
	defer d.Unlock()
	for {
		name := fmt.Sprintf("%s-%04x%s", prefix, rand.IntN(0x10000), suffix)
		if !d.used[name] {
			d.used[name] = true
			return name
		}
	}
}

// DriverName returns "<prefix>-<4 hex digits>.csi.snapkeeper.io", a CSI
// driver name no other test of the process got.
func DriverName(prefix string) string { return names.next(prefix, ".csi.snapkeeper.io") }

// ScenarioOptions configure NewScenario.
type ScenarioOptions struct {
	// DriverPrefix names the driver "<prefix>-<4 hex digits>.csi.snapkeeper.io";
	// default "e2e".
	DriverPrefix string
	// Faults are the driver's initial faults.
	Faults []FaultRule
	// ClaimSizes are the driver's snapshot sizes in bytes by claim name
	// (the volume handle PVC gives the claim).
	ClaimSizes map[string]int64
	// Policy is the class's deletionPolicy; default Delete.
	Policy snapv1.DeletionPolicy
	// DefaultClass annotates the class as the driver's default.
	DefaultClass bool
	ClassParams  map[string]string
	// NoClass: no VolumeSnapshotClass.
	NoClass bool
	// GroupClass: a default VolumeGroupSnapshotClass of the driver, of
	// Policy, named group-class-<namespace> (the scenario_groups.go
	// helpers use it). The controller needs group snapshots on
	// (--feature-gates=CSIVolumeGroupSnapshot=true in ControllerArgs).
	GroupClass bool
	// NoController: the test starts its own controller processes.
	NoController bool
	// ControllerArgs follow "--components=binder,csi --csi-address=<socket>".
	ControllerArgs []string
	// HandBound keeps claims bound by hand (Env.CreateBoundPVC) on the
	// cluster-like plane too, for a test that controls binding. Elsewhere
	// a cluster-like plane provisions them through a csi-provisioner next
	// to the driver.
	HandBound bool
	// ProvisionerArgs are more flags of that csi-provisioner.
	ProvisionerArgs []string
	// DriverArgs are more flags of the mock driver, e.g. --data-dir.
	DriverArgs []string
	// Production places the scenario on the package's production-shaped
	// plane (SharedProduction) instead of its shared one.
	Production bool
}

// NewScenario sets up a Scenario on the package's shared control plane;
// t.Cleanup stops what it started.
func NewScenario(t T, o ScenarioOptions) *Scenario {
	t.Helper()
	env := Shared
	if o.Production {
		env = SharedProduction
	}
	return newScenarioOn(t, env(t), o)
}

func newScenarioOn(t T, env *Env, o ScenarioOptions) *Scenario {
	t.Helper()
	s := &Scenario{Env: env, NS: env.Namespace(t), handles: map[string]string{}}
	if o.DriverPrefix == "" {
		o.DriverPrefix = "e2e"
	}
	drv := CSIDriverOptions{DriverName: DriverName(o.DriverPrefix), Args: o.DriverArgs}
	if len(o.Faults) > 0 {
		drv.Faults = &Faults{Rules: o.Faults}
	}
	provisioned := env.Cluster() && !o.HandBound
	if provisioned {
		s.claimSizes = o.ClaimSizes // known once PVC has the volume handle
	} else if len(o.ClaimSizes) > 0 {
		drv.VolumeSizes = csitest.VolumeSizes{}
		for claim, n := range o.ClaimSizes {
			drv.VolumeSizes[s.Handle(claim)] = n
		}
	}
	s.Drv = env.StartCSIDriver(t, drv)
	if provisioned {
		s.Prov = env.StartProvisioner(t, s.Drv, ProvisionerOptions{StorageClass: "sc-" + s.NS, Args: o.ProvisionerArgs})
	}
	if !o.NoClass {
		if o.Policy == "" {
			o.Policy = snapv1.VolumeSnapshotContentDelete
		}
		s.Class = "class-" + s.NS
		class := SnapshotClass(s.Class, s.Drv.Name, o.Policy, o.DefaultClass)
		class.Parameters = o.ClassParams
		env.CreateSnapshotClass(t, class)
	}
	if o.GroupClass {
		policy := o.Policy
		if policy == "" {
			policy = snapv1.VolumeSnapshotContentDelete
		}
		s.GroupClass = "group-class-" + s.NS
		MustCreate(t, env.Snap.GroupsnapshotV1().VolumeGroupSnapshotClasses().Create, GroupSnapshotClass(s.GroupClass, s.Drv.Name, policy, true))
	}
	s.Args = append([]string{"--components=binder,csi", "--csi-address=" + s.Drv.Socket}, o.ControllerArgs...)
	if !o.NoController {
		s.Ctrl = s.StartController(t, s.Args...)
	}
	return s
}

// StartController starts one more controller process with -v=2 (which logs
// every CSI decision) and args; when the test fails, the end of its log is
// shown.
func (s *Scenario) StartController(t T, args ...string) *Component {
	t.Helper()
	c := s.Env.StartController(t, append([]string{"-v=2"}, args...)...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("controller %v log (tail):\n%s", args, c.Proc.Tail(6000))
		}
	})
	return c
}

// Handle is the volume handle of claim: the one the driver gave a
// provisioned claim, else the one PVC gives a claim bound by hand.
func (s *Scenario) Handle(claim string) string {
	if h, ok := s.handles[claim]; ok {
		return h
	}
	return "vol-" + s.NS + "-" + claim
}

// PVC creates a bound claim of the driver: provisioned by the
// csi-provisioner and bound by the PersistentVolume controller on the
// cluster-like plane, bound by hand elsewhere.
func (s *Scenario) PVC(t T, name string) *corev1.PersistentVolumeClaim {
	t.Helper()
	if s.Prov == nil {
		return s.Env.CreateBoundPVC(t, s.NS, name, PVCOptions{Driver: s.Drv.Name, VolumeHandle: s.Handle(name)})
	}
	pvc, pv := s.Env.ProvisionPVC(t, s.Prov, s.NS, name, ClaimOptions{})
	s.handles[name] = pv.Spec.CSI.VolumeHandle
	if n, ok := s.claimSizes[name]; ok {
		s.Drv.SetVolumeSize(t, s.handles[name], n)
	}
	return pvc
}

// Snapshot creates a dynamic VolumeSnapshot of claim pvc; a nil class
// leaves the choice to the default class.
func (s *Scenario) Snapshot(t T, name, pvc string, class *string) *snapv1.VolumeSnapshot {
	t.Helper()
	return s.Env.CreateSnapshot(t, DynamicSnapshot(s.NS, name, pvc, class))
}

// PreProvisionedContent creates a content of the driver for an existing
// backend snapshot handle, bound in its ref to VolumeSnapshot vsName of the
// namespace (which may not exist).
func (s *Scenario) PreProvisionedContent(t T, name, handle, vsName string, policy snapv1.DeletionPolicy) *snapv1.VolumeSnapshotContent {
	t.Helper()
	c := &snapv1.VolumeSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: snapv1.VolumeSnapshotContentSpec{
			VolumeSnapshotRef: corev1.ObjectReference{Namespace: s.NS, Name: vsName},
			DeletionPolicy:    policy,
			Driver:            s.Drv.Name,
			Source:            snapv1.VolumeSnapshotContentSource{SnapshotHandle: &handle},
		},
	}
	out, err := s.Env.Snap.SnapshotV1().VolumeSnapshotContents().Create(context.Background(), c, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create content %s: %v", name, err)
	}
	return out
}

// RestoreClaim creates a Pending claim restoring from VolumeSnapshot snap.
func (s *Scenario) RestoreClaim(t T, name, snap string) (*corev1.PersistentVolumeClaim, error) {
	t.Helper()
	group := snapshot.GroupName
	storageClass := ""
	c := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.NS},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &storageClass,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			DataSource:       &corev1.TypedLocalObjectReference{APIGroup: &group, Kind: snapshot.KindSnapshot, Name: snap},
		},
	}
	return s.Env.Kube.CoreV1().PersistentVolumeClaims(s.NS).Create(context.Background(), c, metav1.CreateOptions{})
}

// GetSnapshot reads VolumeSnapshot name.
func (s *Scenario) GetSnapshot(t T, name string) *snapv1.VolumeSnapshot {
	t.Helper()
	vs, err := s.Env.Snap.SnapshotV1().VolumeSnapshots(s.NS).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get snapshot %s: %v", name, err)
	}
	return vs
}

// Content reads VolumeSnapshotContent name.
func (s *Scenario) Content(t T, name string) *snapv1.VolumeSnapshotContent {
	t.Helper()
	c, err := s.Env.Snap.SnapshotV1().VolumeSnapshotContents().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get content %s: %v", name, err)
	}
	return c
}

// WaitReady waits until VolumeSnapshot name is ready and returns it.
func (s *Scenario) WaitReady(t T, name string, timeout time.Duration) *snapv1.VolumeSnapshot {
	t.Helper()
	return s.Env.WaitSnapshotReady(t, s.NS, name, timeout)
}

// WaitSnapshotError waits until the status.error of VolumeSnapshot name
// contains substr.
func (s *Scenario) WaitSnapshotError(t T, name, substr string, timeout time.Duration) *snapv1.VolumeSnapshot {
	t.Helper()
	return s.Env.WaitSnapshotError(t, s.NS, name, substr, timeout)
}

// DeleteSnapshot deletes VolumeSnapshot name.
func (s *Scenario) DeleteSnapshot(t T, name string) {
	t.Helper()
	if err := s.Env.Snap.SnapshotV1().VolumeSnapshots(s.NS).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete snapshot %s: %v", name, err)
	}
}

// DeleteContent deletes VolumeSnapshotContent name.
func (s *Scenario) DeleteContent(t T, name string) {
	t.Helper()
	if err := s.Env.Snap.SnapshotV1().VolumeSnapshotContents().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete content %s: %v", name, err)
	}
}

// WaitSnapshotGone waits up to 30 seconds until VolumeSnapshot name is gone.
func (s *Scenario) WaitSnapshotGone(t T, name string) {
	t.Helper()
	s.Env.WaitSnapshotGone(t, s.NS, name, 30*time.Second)
}

// WaitContentGone waits up to 30 seconds until VolumeSnapshotContent name
// is gone.
func (s *Scenario) WaitContentGone(t T, name string) {
	t.Helper()
	s.Env.WaitContentGone(t, name, 30*time.Second)
}

// WaitBackend waits until the driver holds n snapshots (without the mock's
// built-ins) and returns them.
func (s *Scenario) WaitBackend(t T, n int, timeout time.Duration) []BackendSnapshot {
	t.Helper()
	var b []BackendSnapshot
	Eventually(t, timeout, fmt.Sprintf("driver holding %d snapshots", n), func() (bool, error) {
		var err error
		b, err = s.Drv.GetCreated(context.Background())
		return err == nil && len(b) == n, fmt.Errorf("%+v (err %v)", b, err)
	})
	return b
}

// BackendMatchesContents asserts no leak and no duplicate on the driver
// (Env.WaitBackendMatchesContents).
func (s *Scenario) BackendMatchesContents(t T) {
	t.Helper()
	s.Env.WaitBackendMatchesContents(t, s.Drv)
}

// DeleteAndExpectNothingLeft deletes VolumeSnapshot name and waits until it
// and its content are gone, the driver holds no snapshot at all, and
// BackendMatchesContents.
func (s *Scenario) DeleteAndExpectNothingLeft(t T, name, contentName string) {
	t.Helper()
	s.DeleteSnapshot(t, name)
	s.WaitSnapshotGone(t, name)
	s.WaitContentGone(t, contentName)
	if b := s.Drv.Created(t); len(b) != 0 {
		t.Fatalf("driver still holds %+v", b)
	}
	s.BackendMatchesContents(t)
}
