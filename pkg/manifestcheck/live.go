package manifestcheck

import (
	"context"
	"fmt"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/snapkeeper/snapkeeper/pkg/apis/snapkeeper/v1alpha1"
)

// Live implements World: the stored object of obj's kind, namespace and
// name, or nil.
func (c *Cluster) Live(obj metav1.Object) (metav1.Object, error) {
	ns, name, get := obj.GetNamespace(), obj.GetName(), metav1.GetOptions{}
	var live metav1.Object
	var err error
	switch obj.(type) {
	case *snapv1.VolumeSnapshotClass:
		live, err = nilIfAbsent(c.GetClass(name))
	case *snapv1.VolumeSnapshot:
		live, err = nilIfAbsent(c.GetSnapshot(ns, name))
	case *snapv1.VolumeSnapshotContent:
		live, err = nilIfAbsent(c.GetContent(name))
	case *corev1.PersistentVolumeClaim:
		live, err = nilIfAbsent(c.GetPVC(ns, name))
	case *groupv1.VolumeGroupSnapshotClass:
		live, err = nilIfAbsent(c.GetGroupClass(name))
	case *groupv1.VolumeGroupSnapshot:
		live, err = nilIfAbsent(read(c, func(ctx context.Context) (*groupv1.VolumeGroupSnapshot, error) {
			return c.snap.GroupsnapshotV1().VolumeGroupSnapshots(ns).Get(ctx, name, get)
		}))
	case *groupv1.VolumeGroupSnapshotContent:
		live, err = nilIfAbsent(read(c, func(ctx context.Context) (*groupv1.VolumeGroupSnapshotContent, error) {
			return c.snap.GroupsnapshotV1().VolumeGroupSnapshotContents().Get(ctx, name, get)
		}))
	case *v1alpha1.SnapshotSchedule:
		live, err = nilIfAbsent(read(c, func(ctx context.Context) (*v1alpha1.SnapshotSchedule, error) {
			u, err := c.dyn.Resource(v1alpha1.Resource).Namespace(ns).Get(ctx, name, get)
			if err != nil {
				return nil, err
			}
			s := &v1alpha1.SnapshotSchedule{}
			return s, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, s)
		}))
	default:
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the live %s %q: %w", kindOf(obj), name, err)
	}
	return live, nil
}

// nilIfAbsent turns a typed nil pointer into a nil interface.
func nilIfAbsent[T any, P interface {
	*T
	metav1.Object
}](obj P, err error) (metav1.Object, error) {
	if obj == nil || err != nil {
		return nil, err
	}
	return obj, nil
}

// asUpdate makes obj what the API server hands the webhook when obj is
// applied over live: the server-owned metadata and the status (written
// only through the status subresource) stay the live object's.
func asUpdate(obj, live metav1.Object) {
	obj.SetUID(live.GetUID())
	obj.SetResourceVersion(live.GetResourceVersion())
	obj.SetCreationTimestamp(live.GetCreationTimestamp())
	obj.SetGeneration(live.GetGeneration())
	obj.SetDeletionTimestamp(live.GetDeletionTimestamp())
	if len(obj.GetFinalizers()) == 0 {
		obj.SetFinalizers(live.GetFinalizers())
	}
	switch o := obj.(type) {
	case *snapv1.VolumeSnapshot:
		if l, ok := live.(*snapv1.VolumeSnapshot); ok {
			o.Status = l.Status
		}
	case *snapv1.VolumeSnapshotContent:
		if l, ok := live.(*snapv1.VolumeSnapshotContent); ok {
			o.Status = l.Status
		}
	case *groupv1.VolumeGroupSnapshot:
		if l, ok := live.(*groupv1.VolumeGroupSnapshot); ok {
			o.Status = l.Status
		}
	case *groupv1.VolumeGroupSnapshotContent:
		if l, ok := live.(*groupv1.VolumeGroupSnapshotContent); ok {
			o.Status = l.Status
		}
	case *v1alpha1.SnapshotSchedule:
		if l, ok := live.(*v1alpha1.SnapshotSchedule); ok {
			o.Status = l.Status
		}
	case *corev1.PersistentVolumeClaim:
		if l, ok := live.(*corev1.PersistentVolumeClaim); ok {
			o.Status = l.Status
			if o.Spec.VolumeName == "" {
				o.Spec.VolumeName = l.Spec.VolumeName
			}
		}
	}
}
