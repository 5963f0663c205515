package validation

import (
	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Overlay is a Lookup of a set of manifests laid over another Lookup (a
// live cluster, say): an object the set defines hides the base's object of
// the same kind and name, as applying the set would replace it. Hide, when
// set, is left out of the set's answers: the object being judged is not
// its own neighbour. Base may be nil (an empty world).
type Overlay struct {
	Set  *StaticLookup
	Base Lookup
	Hide any
}

var _ Lookup = Overlay{}

func (o Overlay) visible(obj any) bool { return obj != o.Hide }

// overlayGet answers from the set, then from the base.
func overlayGet[T comparable](o Overlay, fromSet func() (T, error), fromBase func(Lookup) (T, error)) (T, error) {
	var zero T
	if v, err := fromSet(); err != nil || (v != zero && o.visible(v)) {
		return v, err
	}
	if o.Base == nil {
		return zero, nil
	}
	return fromBase(o.Base)
}

// overlayList merges the set's objects over the base's, by key.
func overlayList[T any](o Overlay, set []T, fromBase func(Lookup) ([]T, error), key func(T) string) ([]T, error) {
	var out []T
	mine := map[string]bool{}
	for _, v := range set {
		if o.visible(v) {
			out = append(out, v)
			mine[key(v)] = true
		}
	}
	if o.Base == nil {
		return out, nil
	}
	base, err := fromBase(o.Base)
	if err != nil {
		return nil, err
	}
	for _, v := range base {
		if !mine[key(v)] {
			out = append(out, v)
		}
	}
	return out, nil
}

func className(c *snapv1.VolumeSnapshotClass) string            { return c.Name }
func groupClassName(c *groupv1.VolumeGroupSnapshotClass) string { return c.Name }

// ListClasses implements Lookup.
func (o Overlay) ListClasses() ([]*snapv1.VolumeSnapshotClass, error) {
	return overlayList(o, o.Set.Classes, Lookup.ListClasses, className)
}

// ListClassesFresh implements Lookup.
func (o Overlay) ListClassesFresh() ([]*snapv1.VolumeSnapshotClass, error) {
	return overlayList(o, o.Set.Classes, Lookup.ListClassesFresh, className)
}

// GetClass implements Lookup.
func (o Overlay) GetClass(name string) (*snapv1.VolumeSnapshotClass, error) {
	return overlayGet(o, func() (*snapv1.VolumeSnapshotClass, error) { return o.Set.GetClass(name) },
		func(b Lookup) (*snapv1.VolumeSnapshotClass, error) { return b.GetClass(name) })
}

// GetSnapshot implements Lookup.
func (o Overlay) GetSnapshot(namespace, name string) (*snapv1.VolumeSnapshot, error) {
	return overlayGet(o, func() (*snapv1.VolumeSnapshot, error) { return o.Set.GetSnapshot(namespace, name) },
		func(b Lookup) (*snapv1.VolumeSnapshot, error) { return b.GetSnapshot(namespace, name) })
}

// GetContent implements Lookup.
func (o Overlay) GetContent(name string) (*snapv1.VolumeSnapshotContent, error) {
	return overlayGet(o, func() (*snapv1.VolumeSnapshotContent, error) { return o.Set.GetContent(name) },
		func(b Lookup) (*snapv1.VolumeSnapshotContent, error) { return b.GetContent(name) })
}

// ClassInUse implements Lookup: a content of the set or of the base.
func (o Overlay) ClassInUse(name string) (bool, error) {
	for _, c := range o.Set.Contents {
		if o.visible(c) && deref(c.Spec.VolumeSnapshotClassName) == name {
			return true, nil
		}
	}
	if o.Base == nil {
		return false, nil
	}
	return o.Base.ClassInUse(name)
}

// GetPVC implements Lookup.
func (o Overlay) GetPVC(namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	return overlayGet(o, func() (*corev1.PersistentVolumeClaim, error) { return o.Set.GetPVC(namespace, name) },
		func(b Lookup) (*corev1.PersistentVolumeClaim, error) { return b.GetPVC(namespace, name) })
}

// ListPVCs implements Lookup.
func (o Overlay) ListPVCs(namespace string, selector labels.Selector) ([]*corev1.PersistentVolumeClaim, error) {
	set, err := o.Set.ListPVCs(namespace, selector)
	if err != nil {
		return nil, err
	}
	// A claim of the set whose labels no longer match still hides the
	// base's claim of that name: applying the set relabels it.
	hidden := map[string]bool{}
	for _, c := range o.Set.PVCs {
		if o.visible(c) && c.Namespace == namespace {
			hidden[c.Name] = true
		}
	}
	out, err := overlayList(o, set, func(b Lookup) ([]*corev1.PersistentVolumeClaim, error) {
		return b.ListPVCs(namespace, selector)
	}, func(c *corev1.PersistentVolumeClaim) string { return c.Name })
	if err != nil {
		return nil, err
	}
	kept := out[:0]
	for _, c := range out {
		if hidden[c.Name] && !containsPtr(set, c) {
			continue
		}
		kept = append(kept, c)
	}
	return kept, nil
}

func containsPtr[T comparable](list []T, v T) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// GetPV implements Lookup.
func (o Overlay) GetPV(name string) (*corev1.PersistentVolume, error) {
	return overlayGet(o, func() (*corev1.PersistentVolume, error) { return o.Set.GetPV(name) },
		func(b Lookup) (*corev1.PersistentVolume, error) { return b.GetPV(name) })
}

// ListGroupClasses implements Lookup.
func (o Overlay) ListGroupClasses() ([]*groupv1.VolumeGroupSnapshotClass, error) {
	return overlayList(o, o.Set.GroupClasses, Lookup.ListGroupClasses, groupClassName)
}

// ListGroupClassesFresh implements Lookup.
func (o Overlay) ListGroupClassesFresh() ([]*groupv1.VolumeGroupSnapshotClass, error) {
	return overlayList(o, o.Set.GroupClasses, Lookup.ListGroupClassesFresh, groupClassName)
}

// GetGroupClass implements Lookup.
func (o Overlay) GetGroupClass(name string) (*groupv1.VolumeGroupSnapshotClass, error) {
	return overlayGet(o, func() (*groupv1.VolumeGroupSnapshotClass, error) { return o.Set.GetGroupClass(name) },
		func(b Lookup) (*groupv1.VolumeGroupSnapshotClass, error) { return b.GetGroupClass(name) })
}

// PopulatorRegistered implements Lookup: registered in the set or the base.
func (o Overlay) PopulatorRegistered(group, kind string) (bool, error) {
	if ok, err := o.Set.PopulatorRegistered(group, kind); ok || err != nil {
		return ok, err
	}
	if o.Base == nil {
		return false, nil
	}
	return o.Base.PopulatorRegistered(group, kind)
}
