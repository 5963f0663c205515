package framework

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
)

// ProvisionerFinalizer is the finalizer the real csi-provisioner (v6.1.1
// and later) puts on a VolumeSnapshot while it restores a claim from it.
const ProvisionerFinalizer = snapshot.FinalizerProvisionerSource

// Provisioner is the real csi-provisioner (external-provisioner v6.4.0,
// bin/csi-provisioner) serving one CSI driver, with the StorageClass that
// names the driver as its provisioner.
type Provisioner struct {
	Driver       string
	StorageClass string
	MetricsAddr  string
	Proc         *Process
}

// ProvisionerOptions configure StartProvisioner.
type ProvisionerOptions struct {
	// StorageClass is the name of the class created for the driver;
	// default "sc-<driver>".
	StorageClass string
	// ReclaimPolicy of the class; default Delete.
	ReclaimPolicy corev1.PersistentVolumeReclaimPolicy
	// Args are more csi-provisioner flags (they win over the defaults).
	Args []string
}

// StartProvisioner starts csi-provisioner next to drv and creates its
// StorageClass (Immediate binding: no scheduler or kubelet runs);
// t.Cleanup stops it and deletes the class.
func (e *Env) StartProvisioner(t T, drv *CSIDriver, o ProvisionerOptions) *Provisioner {
	t.Helper()
	p, err := e.LaunchProvisioner(context.Background(), e.TempDir(t, "provisioner"), drv.Socket, drv.Name, o)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("csi-provisioner log (tail):\n%s", p.Proc.Tail(6000))
		}
		p.Proc.Stop(10 * time.Second)
		_ = e.Kube.StorageV1().StorageClasses().Delete(context.Background(), p.StorageClass, metav1.DeleteOptions{})
	})
	return p
}

// LaunchProvisioner is StartProvisioner for callers without a test (`make
// run`): csi-provisioner on socket for driver, logs in dir, with the admin
// kubeconfig. The caller stops p.Proc.
func (e *Env) LaunchProvisioner(ctx context.Context, dir, socket, driver string, o ProvisionerOptions) (*Provisioner, error) {
	if o.StorageClass == "" {
		o.StorageClass = "sc-" + driver
	}
	if o.ReclaimPolicy == "" {
		o.ReclaimPolicy = corev1.PersistentVolumeReclaimDelete
	}
	bin, err := Tool("csi-provisioner")
	if err != nil {
		return nil, err
	}
	if err := e.ensureStorageClass(ctx, o.StorageClass, driver, o.ReclaimPolicy); err != nil {
		return nil, err
	}
	addr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	args := append([]string{
		"--csi-address=" + socket,
		"--kubeconfig=" + e.Kubeconfig,
		"--http-endpoint=" + addr,
		"--leader-election=false",
		// The mock driver serves no topology and no kubelet publishes
		// CSINode objects.
		"--feature-gates=Topology=false",
		"--v=3",
	}, o.Args...)
	proc, err := StartProcess(dir, "csi-provisioner", bin, args)
	if err != nil {
		return nil, err
	}
	if err := proc.WaitServing("http://"+addr+"/metrics", time.Now().Add(60*time.Second)); err != nil {
		proc.Stop(5 * time.Second)
		return nil, err
	}
	return &Provisioner{Driver: driver, StorageClass: o.StorageClass, MetricsAddr: addr, Proc: proc}, nil
}

func (e *Env) ensureStorageClass(ctx context.Context, name, driver string, policy corev1.PersistentVolumeReclaimPolicy) error {
	immediate := storagev1.VolumeBindingImmediate
	expand := true
	sc := &storagev1.StorageClass{
		ObjectMeta:           metav1.ObjectMeta{Name: name},
		Provisioner:          driver,
		ReclaimPolicy:        &policy,
		VolumeBindingMode:    &immediate,
		AllowVolumeExpansion: &expand,
	}
	_, err := e.Kube.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create StorageClass %s: %w", name, err)
	}
	return nil
}

// ClaimOptions describe a claim for the provisioner.
type ClaimOptions struct {
	StorageClass string // required
	Size         string // default "1Gi"
	VolumeMode   corev1.PersistentVolumeMode
	// RestoreFrom, when set, names a VolumeSnapshot of the claim's
	// namespace to restore from, through spec.dataSource, or with
	// ViaDataSourceRef through spec.dataSourceRef only (the API server
	// copies it into dataSource).
	RestoreFrom      string
	ViaDataSourceRef bool
}

// Claim is the PersistentVolumeClaim ns/name of o.
func Claim(ns, name string, o ClaimOptions) *corev1.PersistentVolumeClaim {
	if o.Size == "" {
		o.Size = "1Gi"
	}
	sc := o.StorageClass
	c := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(o.Size)}},
			StorageClassName: &sc,
		},
	}
	if o.VolumeMode != "" {
		m := o.VolumeMode
		c.Spec.VolumeMode = &m
	}
	if o.RestoreFrom != "" {
		group := snapshot.GroupName
		if o.ViaDataSourceRef {
			c.Spec.DataSourceRef = &corev1.TypedObjectReference{APIGroup: &group, Kind: snapshot.KindSnapshot, Name: o.RestoreFrom}
		} else {
			c.Spec.DataSource = &corev1.TypedLocalObjectReference{APIGroup: &group, Kind: snapshot.KindSnapshot, Name: o.RestoreFrom}
		}
	}
	return c
}

// CreateClaim creates the claim of o.
func (e *Env) CreateClaim(t T, ns, name string, o ClaimOptions) *corev1.PersistentVolumeClaim {
	t.Helper()
	c, err := e.Kube.CoreV1().PersistentVolumeClaims(ns).Create(context.Background(), Claim(ns, name, o), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create claim %s/%s: %v", ns, name, err)
	}
	return c
}

// ProvisionPVC creates a claim of the provisioner's class and waits until
// the PersistentVolume controller has bound it to the volume the
// provisioner created; it returns the claim and its volume.
func (e *Env) ProvisionPVC(t T, p *Provisioner, ns, name string, o ClaimOptions) (*corev1.PersistentVolumeClaim, *corev1.PersistentVolume) {
	t.Helper()
	o.StorageClass = p.StorageClass
	e.CreateClaim(t, ns, name, o)
	return e.WaitClaimBound(t, ns, name, 60*time.Second)
}

// WaitClaimBound waits until claim ns/name is Bound and returns it with
// its PersistentVolume.
func (e *Env) WaitClaimBound(t T, ns, name string, timeout time.Duration) (*corev1.PersistentVolumeClaim, *corev1.PersistentVolume) {
	t.Helper()
	var pvc *corev1.PersistentVolumeClaim
	var pv *corev1.PersistentVolume
	Eventually(t, timeout, fmt.Sprintf("claim %s/%s bound", ns, name), func() (bool, error) {
		var err error
		pvc, pv, err = e.BoundClaim(context.Background(), ns, name)
		return err == nil, err
	})
	return pvc, pv
}

// BoundClaim returns claim ns/name and its volume once both say Bound.
func (e *Env) BoundClaim(ctx context.Context, ns, name string) (*corev1.PersistentVolumeClaim, *corev1.PersistentVolume, error) {
	pvc, err := e.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName == "" {
		return nil, nil, fmt.Errorf("claim phase %q, volume %q", pvc.Status.Phase, pvc.Spec.VolumeName)
	}
	pv, err := e.Kube.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	if pv.Status.Phase != corev1.VolumeBound {
		return nil, nil, fmt.Errorf("volume %s phase %q", pv.Name, pv.Status.Phase)
	}
	return pvc, pv, nil
}
