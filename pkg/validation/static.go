package validation

import (
	"fmt"
	"slices"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/snapkeeper/snapkeeper/pkg/apis/snapkeeper/v1alpha1"
)

// StaticLookup is a Lookup over a fixed set of objects: for tests and for
// validating a directory of manifests offline. Its fresh and cached views
// are the same. The zero value is empty and usable.
type StaticLookup struct {
	Classes      []*snapv1.VolumeSnapshotClass
	Snapshots    []*snapv1.VolumeSnapshot
	Contents     []*snapv1.VolumeSnapshotContent
	PVCs         []*corev1.PersistentVolumeClaim
	PVs          []*corev1.PersistentVolume
	Populators   []schema.GroupKind
	GroupClasses []*groupv1.VolumeGroupSnapshotClass
	// GroupSnapshots, GroupContents and Schedules are held so a set of
	// manifests loads whole; no rule looks them up yet.
	GroupSnapshots []*groupv1.VolumeGroupSnapshot
	GroupContents  []*groupv1.VolumeGroupSnapshotContent
	Schedules      []*v1alpha1.SnapshotSchedule
	// Err, when set, is returned by every method: to test how rules react
	// to a failing cache or API server.
	Err error
	// FreshErr, when set, is returned by ListClassesFresh and
	// ListGroupClassesFresh only.
	FreshErr error
	// FreshClasses, when not nil, is what ListClassesFresh returns instead
	// of Classes: the API server knows a class the cache has not seen yet.
	FreshClasses []*snapv1.VolumeSnapshotClass
	// FreshGroupClasses is FreshClasses for ListGroupClassesFresh.
	FreshGroupClasses []*groupv1.VolumeGroupSnapshotClass
}

var _ Lookup = (*StaticLookup)(nil)

// Add stores objects of the kinds a Lookup serves, replacing any object of
// the same kind, namespace and name. Other types are an error so a typo in a
// test fixture does not silently drop a prerequisite.
func (s *StaticLookup) Add(objs ...any) error {
	for _, o := range objs {
		switch o := o.(type) {
		case *snapv1.VolumeSnapshotClass:
			s.Classes = replace(s.Classes, o, func(c *snapv1.VolumeSnapshotClass) bool { return c.Name == o.Name })
		case *snapv1.VolumeSnapshot:
			s.Snapshots = replace(s.Snapshots, o, func(c *snapv1.VolumeSnapshot) bool {
				return c.Namespace == o.Namespace && c.Name == o.Name
			})
		case *snapv1.VolumeSnapshotContent:
			s.Contents = replace(s.Contents, o, func(c *snapv1.VolumeSnapshotContent) bool { return c.Name == o.Name })
		case *corev1.PersistentVolumeClaim:
			s.PVCs = replace(s.PVCs, o, func(c *corev1.PersistentVolumeClaim) bool {
				return c.Namespace == o.Namespace && c.Name == o.Name
			})
		case *corev1.PersistentVolume:
			s.PVs = replace(s.PVs, o, func(c *corev1.PersistentVolume) bool { return c.Name == o.Name })
		case schema.GroupKind:
			s.Populators = append(s.Populators, o)
		case *groupv1.VolumeGroupSnapshotClass:
			s.GroupClasses = replace(s.GroupClasses, o, func(c *groupv1.VolumeGroupSnapshotClass) bool { return c.Name == o.Name })
		case *groupv1.VolumeGroupSnapshot:
			s.GroupSnapshots = replace(s.GroupSnapshots, o, func(c *groupv1.VolumeGroupSnapshot) bool {
				return c.Namespace == o.Namespace && c.Name == o.Name
			})
		case *groupv1.VolumeGroupSnapshotContent:
			s.GroupContents = replace(s.GroupContents, o, func(c *groupv1.VolumeGroupSnapshotContent) bool { return c.Name == o.Name })
		case *v1alpha1.SnapshotSchedule:
			s.Schedules = replace(s.Schedules, o, func(c *v1alpha1.SnapshotSchedule) bool {
				return c.Namespace == o.Namespace && c.Name == o.Name
			})
		default:
			return fmt.Errorf("static lookup cannot hold %T", o)
		}
	}
	return nil
}

func replace[T any](list []T, obj T, same func(T) bool) []T {
	if i := slices.IndexFunc(list, same); i >= 0 {
		list[i] = obj
		return list
	}
	return append(list, obj)
}

func find[T any](err error, list []T, match func(T) bool) (T, error) {
	var zero T
	if err != nil {
		return zero, err
	}
	if i := slices.IndexFunc(list, match); i >= 0 {
		return list[i], nil
	}
	return zero, nil
}

// ListClasses implements Lookup.
func (s *StaticLookup) ListClasses() ([]*snapv1.VolumeSnapshotClass, error) {
	return slices.Clone(s.Classes), s.Err
}

// ListClassesFresh implements Lookup.
func (s *StaticLookup) ListClassesFresh() ([]*snapv1.VolumeSnapshotClass, error) {
	if s.FreshErr != nil {
		return nil, s.FreshErr
	}
	if s.FreshClasses != nil {
		return slices.Clone(s.FreshClasses), s.Err
	}
	return s.ListClasses()
}

// GetClass implements Lookup.
func (s *StaticLookup) GetClass(name string) (*snapv1.VolumeSnapshotClass, error) {
	return find(s.Err, s.Classes, func(c *snapv1.VolumeSnapshotClass) bool { return c.Name == name })
}

// GetSnapshot implements Lookup.
func (s *StaticLookup) GetSnapshot(namespace, name string) (*snapv1.VolumeSnapshot, error) {
	return find(s.Err, s.Snapshots, func(c *snapv1.VolumeSnapshot) bool {
		return c.Namespace == namespace && c.Name == name
	})
}

// GetContent implements Lookup.
func (s *StaticLookup) GetContent(name string) (*snapv1.VolumeSnapshotContent, error) {
	return find(s.Err, s.Contents, func(c *snapv1.VolumeSnapshotContent) bool { return c.Name == name })
}

// ClassInUse implements Lookup.
func (s *StaticLookup) ClassInUse(name string) (bool, error) {
	c, err := find(s.Err, s.Contents, func(c *snapv1.VolumeSnapshotContent) bool {
		return c.Spec.VolumeSnapshotClassName != nil && *c.Spec.VolumeSnapshotClassName == name
	})
	return c != nil, err
}

// GetPVC implements Lookup.
func (s *StaticLookup) GetPVC(namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	return find(s.Err, s.PVCs, func(c *corev1.PersistentVolumeClaim) bool {
		return c.Namespace == namespace && c.Name == name
	})
}

// ListPVCs implements Lookup.
func (s *StaticLookup) ListPVCs(namespace string, selector labels.Selector) ([]*corev1.PersistentVolumeClaim, error) {
	if s.Err != nil {
		return nil, s.Err
	}
	var out []*corev1.PersistentVolumeClaim
	for _, c := range s.PVCs {
		if c.Namespace == namespace && selector.Matches(labels.Set(c.Labels)) {
			out = append(out, c)
		}
	}
	return out, nil
}

// ListGroupClasses implements Lookup.
func (s *StaticLookup) ListGroupClasses() ([]*groupv1.VolumeGroupSnapshotClass, error) {
	return slices.Clone(s.GroupClasses), s.Err
}

// ListGroupClassesFresh implements Lookup.
func (s *StaticLookup) ListGroupClassesFresh() ([]*groupv1.VolumeGroupSnapshotClass, error) {
	if s.FreshErr != nil {
		return nil, s.FreshErr
	}
	if s.FreshGroupClasses != nil {
		return slices.Clone(s.FreshGroupClasses), s.Err
	}
	return s.ListGroupClasses()
}

// GetGroupClass implements Lookup.
func (s *StaticLookup) GetGroupClass(name string) (*groupv1.VolumeGroupSnapshotClass, error) {
	return find(s.Err, s.GroupClasses, func(c *groupv1.VolumeGroupSnapshotClass) bool { return c.Name == name })
}

// GetPV implements Lookup.
func (s *StaticLookup) GetPV(name string) (*corev1.PersistentVolume, error) {
	return find(s.Err, s.PVs, func(c *corev1.PersistentVolume) bool { return c.Name == name })
}

// PopulatorRegistered implements Lookup. Groups compare exactly and kinds
// case-sensitively, as the API server's REST mapping does.
func (s *StaticLookup) PopulatorRegistered(group, kind string) (bool, error) {
	if s.Err != nil {
		return false, s.Err
	}
	return slices.Contains(s.Populators, schema.GroupKind{Group: group, Kind: kind}), nil
}
