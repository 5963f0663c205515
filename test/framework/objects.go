package framework

import (
	"context"
	"fmt"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
}

// CreateBoundPVC creates a CSI PV and a claim and binds them the way the
// PV controller would (no kube-controller-manager runs here).
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
	if o.Size == "" {
		o.Size = "1Gi"
	}
	if o.VolumeHandle == "" {
		o.VolumeHandle = "vol-" + ns + "-" + name
	}
	mode := o.VolumeMode
	if mode == "" {
		mode = corev1.PersistentVolumeFilesystem
	}
	qty := resource.MustParse(o.Size)
	pvName := "pv-" + ns + "-" + name
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
			ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: ns, Name: name},
		},
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
	storageClass := ""
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: qty}},
			VolumeName:       pvName,
			VolumeMode:       &mode,
			StorageClassName: &storageClass,
		},
	}
	created, err := e.Kube.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create PVC %s/%s: %w", ns, name, err)
	}
	pv.Spec.ClaimRef.UID = created.UID
	pvCreated, err := e.Kube.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create PV %s: %w", pvName, err)
	}
	pvCreated.Status.Phase = corev1.VolumeBound
	if _, err := e.Kube.CoreV1().PersistentVolumes().UpdateStatus(ctx, pvCreated, metav1.UpdateOptions{}); err != nil {
		return nil, fmt.Errorf("bind PV %s: %w", pvName, err)
	}
	created.Status.Phase = corev1.ClaimBound
	created.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: qty}
	created.Status.AccessModes = pvc.Spec.AccessModes
	bound, err := e.Kube.CoreV1().PersistentVolumeClaims(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{})
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

// CreateSnapshotClass creates class.
func (e *Env) CreateSnapshotClass(t T, class *snapv1.VolumeSnapshotClass) *snapv1.VolumeSnapshotClass {
	t.Helper()
	out, err := e.Snap.SnapshotV1().VolumeSnapshotClasses().Create(context.Background(), class, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create class %s: %v", class.Name, err)
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
