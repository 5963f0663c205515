package manifestcheck

import (
	"context"
	"fmt"
	"time"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapclientset "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/snapkeeper/snapkeeper/pkg/admission/clusterlookup"
	"github.com/snapkeeper/snapkeeper/pkg/validation"
)

// readTimeout bounds every read from the cluster.
const readTimeout = 10 * time.Second

// Cluster is a World that reads a live cluster directly (no informers: a
// CI run asks a few questions once). A missing object, or a group snapshot
// or schedule resource whose CRD is not installed, reads as absent.
type Cluster struct {
	ctx        context.Context
	snap       snapclientset.Interface
	kube       kubernetes.Interface
	dyn        dynamic.Interface // SnapshotSchedules: no typed client needed for one read
	populators *clusterlookup.PopulatorCache
}

var _ World = (*Cluster)(nil)

// NewCluster builds the clients of cfg. ctx bounds every later read.
func NewCluster(ctx context.Context, cfg *rest.Config) (*Cluster, error) {
	snap, err := snapclientset.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("snapshot client: %w", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	return &Cluster{ctx: ctx, snap: snap, kube: kube, dyn: dyn, populators: clusterlookup.NewPopulatorCache(dyn, time.Hour)}, nil
}

// read runs one call with a timeout and turns NotFound into absence.
func read[T any](c *Cluster, call func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(c.ctx, readTimeout)
	defer cancel()
	v, err := call(ctx)
	if apierrors.IsNotFound(err) {
		var zero T
		return zero, nil
	}
	return v, err
}

func ptrs[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}

var all = metav1.ListOptions{}

// ListClasses implements validation.Lookup.
func (c *Cluster) ListClasses() ([]*snapv1.VolumeSnapshotClass, error) {
	l, err := read(c, func(ctx context.Context) (*snapv1.VolumeSnapshotClassList, error) {
		return c.snap.SnapshotV1().VolumeSnapshotClasses().List(ctx, all)
	})
	if l == nil {
		return nil, err
	}
	return ptrs(l.Items), err
}

// ListClassesFresh implements validation.Lookup: every read is fresh here.
func (c *Cluster) ListClassesFresh() ([]*snapv1.VolumeSnapshotClass, error) { return c.ListClasses() }

// GetClass implements validation.Lookup.
func (c *Cluster) GetClass(name string) (*snapv1.VolumeSnapshotClass, error) {
	return read(c, func(ctx context.Context) (*snapv1.VolumeSnapshotClass, error) {
		return c.snap.SnapshotV1().VolumeSnapshotClasses().Get(ctx, name, metav1.GetOptions{})
	})
}

// GetSnapshot implements validation.Lookup.
func (c *Cluster) GetSnapshot(namespace, name string) (*snapv1.VolumeSnapshot, error) {
	return read(c, func(ctx context.Context) (*snapv1.VolumeSnapshot, error) {
		return c.snap.SnapshotV1().VolumeSnapshots(namespace).Get(ctx, name, metav1.GetOptions{})
	})
}

// GetContent implements validation.Lookup.
func (c *Cluster) GetContent(name string) (*snapv1.VolumeSnapshotContent, error) {
	return read(c, func(ctx context.Context) (*snapv1.VolumeSnapshotContent, error) {
		return c.snap.SnapshotV1().VolumeSnapshotContents().Get(ctx, name, metav1.GetOptions{})
	})
}

// ClassInUse implements validation.Lookup.
func (c *Cluster) ClassInUse(name string) (bool, error) {
	l, err := read(c, func(ctx context.Context) (*snapv1.VolumeSnapshotContentList, error) {
		return c.snap.SnapshotV1().VolumeSnapshotContents().List(ctx, all)
	})
	if l == nil || err != nil {
		return false, err
	}
	for _, content := range l.Items {
		if n := content.Spec.VolumeSnapshotClassName; n != nil && *n == name {
			return true, nil
		}
	}
	return false, nil
}

// GetPVC implements validation.Lookup.
func (c *Cluster) GetPVC(namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	return read(c, func(ctx context.Context) (*corev1.PersistentVolumeClaim, error) {
		return c.kube.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, name, metav1.GetOptions{})
	})
}

// ListPVCs implements validation.Lookup.
func (c *Cluster) ListPVCs(namespace string, selector labels.Selector) ([]*corev1.PersistentVolumeClaim, error) {
	l, err := read(c, func(ctx context.Context) (*corev1.PersistentVolumeClaimList, error) {
		return c.kube.CoreV1().PersistentVolumeClaims(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	})
	if l == nil {
		return nil, err
	}
	return ptrs(l.Items), err
}

// GetPV implements validation.Lookup.
func (c *Cluster) GetPV(name string) (*corev1.PersistentVolume, error) {
	return read(c, func(ctx context.Context) (*corev1.PersistentVolume, error) {
		return c.kube.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
	})
}

// ListGroupClasses implements validation.Lookup.
func (c *Cluster) ListGroupClasses() ([]*groupv1.VolumeGroupSnapshotClass, error) {
	l, err := read(c, func(ctx context.Context) (*groupv1.VolumeGroupSnapshotClassList, error) {
		return c.snap.GroupsnapshotV1().VolumeGroupSnapshotClasses().List(ctx, all)
	})
	if l == nil {
		return nil, err
	}
	return ptrs(l.Items), err
}

// ListGroupClassesFresh implements validation.Lookup.
func (c *Cluster) ListGroupClassesFresh() ([]*groupv1.VolumeGroupSnapshotClass, error) {
	return c.ListGroupClasses()
}

// GetGroupClass implements validation.Lookup.
func (c *Cluster) GetGroupClass(name string) (*groupv1.VolumeGroupSnapshotClass, error) {
	return read(c, func(ctx context.Context) (*groupv1.VolumeGroupSnapshotClass, error) {
		return c.snap.GroupsnapshotV1().VolumeGroupSnapshotClasses().Get(ctx, name, metav1.GetOptions{})
	})
}

// PopulatorRegistered implements validation.Lookup.
func (c *Cluster) PopulatorRegistered(group, kind string) (bool, error) {
	ok, err := c.populators.Registered(c.ctx, group, kind)
	if err != nil {
		return false, fmt.Errorf("reading VolumePopulators: %w", err)
	}
	return ok, nil
}

var _ validation.Lookup = (*Cluster)(nil)
