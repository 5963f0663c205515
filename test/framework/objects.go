package framework

import (
	"context"
	"fmt"
	"time"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
)

// PVCOptions describes a bound claim and its CSI volume.
type PVCOptions struct {
	Driver       string // CSI driver of the PV; required
	VolumeHandle string // default: "vol-<namespace>-<name>"
	Size         string // default "1Gi"
	VolumeMode   corev1.PersistentVolumeMode
	// Node, when set, gives the PV a required node affinity on
	// kubernetes.io/hostname (distributed snapshotting).
	Node string
	// TopologyKey replaces kubernetes.io/hostname as the key of that node
	// affinity, e.g. a driver's own topology label.
	TopologyKey string
	// HostPath, when set, makes the PV a hostPath volume at that path, a
	// volume no CSI driver serves, instead of a CSI one of Driver.
	HostPath string
}

// CreateBoundPVC creates a CSI PV and a claim and binds them the way the
// PV controller would. On the cluster-like plane the PV controller binds
// them too; each status write is retried on its conflicts.
func (e *Env) CreateBoundPVC(t T, ns, name string, o PVCOptions) *corev1.PersistentVolumeClaim {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pvc, err := e.BindPVC(ctx, ns, name, o)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return pvc
}

// BindPVC is CreateBoundPVC for callers without a testing.TB (benchmarks).
func (e *Env) BindPVC(ctx context.Context, ns, name string, o PVCOptions) (*corev1.PersistentVolumeClaim, error) {
	o = o.defaulted(ns, name)
	mode := o.VolumeMode
	storageClass := ""
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(o.Size)}},
			VolumeName:       pvNameOf(ns, name),
			VolumeMode:       &mode,
			StorageClassName: &storageClass,
		},
	}
	created, err := e.Kube.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create PVC %s/%s: %w", ns, name, err)
	}
	return e.bindClaim(ctx, created, o)
}

// defaulted fills in o's defaults for claim ns/name.
func (o PVCOptions) defaulted(ns, name string) PVCOptions {
	if o.Size == "" {
		o.Size = "1Gi"
	}
	if o.VolumeHandle == "" {
		o.VolumeHandle = "vol-" + ns + "-" + name
	}
	if o.VolumeMode == "" {
		o.VolumeMode = corev1.PersistentVolumeFilesystem
	}
	return o
}

// pvNameOf names the PV bound by hand to claim ns/name.
func pvNameOf(ns, name string) string { return "pv-" + ns + "-" + name }

// BindClaim binds the existing (Pending) claim ns/name to a new CSI PV of
// o, as the PV controller binds a claim to the volume a provisioner made.
func (e *Env) BindClaim(t T, ns, name string, o PVCOptions) *corev1.PersistentVolumeClaim {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pvc, err := e.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		pvc, err = e.bindClaim(ctx, pvc, o)
	}
	if err != nil {
		t.Fatalf("bind claim %s/%s: %v", ns, name, err)
	}
	return pvc
}

// bindClaim creates the PV "pv-<ns>-<name>" pre-bound to claim, then sets
// the claim's volumeName and both phases to Bound.
func (e *Env) bindClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim, o PVCOptions) (*corev1.PersistentVolumeClaim, error) {
	ns, name := claim.Namespace, claim.Name
	o = o.defaulted(ns, name)
	mode := o.VolumeMode
	qty := resource.MustParse(o.Size)
	pvName := pvNameOf(ns, name)
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: qty},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			VolumeMode:                    &mode,
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				CSI: &corev1.CSIPersistentVolumeSource{Driver: o.Driver, VolumeHandle: o.VolumeHandle},
			},
			ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: ns, Name: name, UID: claim.UID},
		},
	}
	if o.HostPath != "" {
		pv.Spec.PersistentVolumeSource = corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: o.HostPath}}
	}
	if o.Node != "" {
		key := o.TopologyKey
		if key == "" {
			key = "kubernetes.io/hostname"
		}
		pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
				Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{o.Node},
			}}}},
		}}
	}
	if _, err := e.Kube.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create PV %s: %w", pvName, err)
	}
	pvs := e.Kube.CoreV1().PersistentVolumes()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := pvs.Get(ctx, pvName, metav1.GetOptions{})
		if err != nil || cur.Status.Phase == corev1.VolumeBound {
			return err
		}
		cur.Status.Phase = corev1.VolumeBound
		_, err = pvs.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("bind PV %s: %w", pvName, err)
	}
	claims := e.Kube.CoreV1().PersistentVolumeClaims(ns)
	var bound *corev1.PersistentVolumeClaim
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := claims.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.Spec.VolumeName == "" {
			cur.Spec.VolumeName = pvName
			if cur, err = claims.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
		if bound = cur; cur.Status.Phase == corev1.ClaimBound {
			return nil
		}
		cur.Status.Phase = corev1.ClaimBound
		cur.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: qty}
		cur.Status.AccessModes = cur.Spec.AccessModes
		bound, err = claims.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("bind PVC %s/%s: %w", ns, name, err)
	}
	return bound, nil
}

// SnapshotClass is a VolumeSnapshotClass of driver; isDefault annotates it
// as the driver's default class.
func SnapshotClass(name, driver string, policy snapv1.DeletionPolicy, isDefault bool) *snapv1.VolumeSnapshotClass {
	c := &snapv1.VolumeSnapshotClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Driver: driver, DeletionPolicy: policy}
	if isDefault {
		c.Annotations = map[string]string{snapshot.AnnDefaultClass: "true"}
	}
	return c
}

// GroupSnapshotClass is a VolumeGroupSnapshotClass of driver, default for
// it when isDefault.
func GroupSnapshotClass(name, driver string, policy snapv1.DeletionPolicy, isDefault bool) *groupv1.VolumeGroupSnapshotClass {
	c := &groupv1.VolumeGroupSnapshotClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Driver: driver, DeletionPolicy: policy}
	if isDefault {
		c.Annotations = map[string]string{snapshot.AnnGroupDefaultClass: "true"}
	}
	return c
}

// CreateSnapshotClass creates class.
func (e *Env) CreateSnapshotClass(t T, class *snapv1.VolumeSnapshotClass) *snapv1.VolumeSnapshotClass {
	t.Helper()
	return MustCreate(t, e.Snap.SnapshotV1().VolumeSnapshotClasses().Create, class)
}

// MustCreate creates obj with create (a typed client's Create) within
// 30 s and returns what the API server stored; an error fails the test.
func MustCreate[P metav1.Object](t T, create func(context.Context, P, metav1.CreateOptions) (P, error), obj P) P {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
	return out
}

// DynamicSnapshot is a VolumeSnapshot ns/name of claim pvc; a nil class
// leaves the choice to the driver's default class.
func DynamicSnapshot(ns, name, pvc string, class *string) *snapv1.VolumeSnapshot {
	return &snapv1.VolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{PersistentVolumeClaimName: &pvc},
			VolumeSnapshotClassName: class},
	}
}

// CreateSnapshot creates vs.
func (e *Env) CreateSnapshot(t T, vs *snapv1.VolumeSnapshot) *snapv1.VolumeSnapshot {
	t.Helper()
	out, err := e.Snap.SnapshotV1().VolumeSnapshots(vs.Namespace).Create(context.Background(), vs, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create snapshot %s/%s: %v", vs.Namespace, vs.Name, err)
	}
	return out
}

// LabelClaim sets the labels of claim ns/name (a group snapshot's selector
// picks claims by them), retrying on a conflict: the PV controller, where
// it runs, writes the claim too.
func (e *Env) LabelClaim(t T, ns, name string, labels map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	claims := e.Kube.CoreV1().PersistentVolumeClaims(ns)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		c, err := claims.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		c.Labels = labels
		_, err = claims.Update(ctx, c, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("label claim %s/%s: %v", ns, name, err)
	}
}
