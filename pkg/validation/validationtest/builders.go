// Package validationtest builds snapshot objects for tests with functional
// options: NewSnapshot("ns", "s1", FromPVC("data"), Ready("1Gi", "c1")).
// Group snapshot objects too (groups.go): NewGroupClass, NewGroupSnapshot,
// NewGroupContent; and SnapshotSchedules (schedules.go): NewSchedule.
// An option applied to a kind it does not fit panics: that is a bug in the
// test, not a case to handle.
package validationtest

import (
	"fmt"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/snapkeeper/snapkeeper/pkg/apis/snapkeeper/v1alpha1"
	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
)

// Opt changes an object under construction.
type Opt func(metav1.Object)

// DefaultDriver is the driver of objects whose test does not care.
const DefaultDriver = "hostpath.csi.k8s.io"

func apply[T metav1.Object](obj T, opts []Opt) T {
	for _, o := range opts {
		o(obj)
	}
	return obj
}

func wrongKind(opt string, o metav1.Object) {
	panic(fmt.Sprintf("option %s does not apply to %T", opt, o))
}

// must is o as the kind T that option opt applies to.
func must[T metav1.Object](opt string, o metav1.Object) T {
	t, ok := o.(T)
	if !ok {
		wrongKind(opt, o)
	}
	return t
}

// withDefaults puts DefaultDriver and the Delete policy, which every class
// and content kind starts with, before opts.
func withDefaults(opts []Opt) []Opt {
	return append([]Opt{WithDriver(DefaultDriver), WithPolicy(snapv1.VolumeSnapshotContentDelete)}, opts...)
}

// classFields are the fields that the class and content kinds, single and
// group, have in common; params is nil for a content.
func classFields(opt string, o metav1.Object) (driver *string, policy *snapv1.DeletionPolicy, params *map[string]string) {
	switch o := o.(type) {
	case *snapv1.VolumeSnapshotClass:
		return &o.Driver, &o.DeletionPolicy, &o.Parameters
	case *snapv1.VolumeSnapshotContent:
		return &o.Spec.Driver, &o.Spec.DeletionPolicy, nil
	case *groupv1.VolumeGroupSnapshotClass:
		return &o.Driver, &o.DeletionPolicy, &o.Parameters
	case *groupv1.VolumeGroupSnapshotContent:
		return &o.Spec.Driver, &o.Spec.DeletionPolicy, nil
	}
	wrongKind(opt, o)
	return nil, nil, nil
}

// NewClass returns a Delete-policy class of DefaultDriver.
func NewClass(name string, opts ...Opt) *snapv1.VolumeSnapshotClass {
	return apply(&snapv1.VolumeSnapshotClass{ObjectMeta: metav1.ObjectMeta{Name: name}}, withDefaults(opts))
}

// Preset returns a builder of newObj(name, preset..., opts...): the
// objects of a table that vary one base object.
func Preset[T metav1.Object](newObj func(string, ...Opt) T, name string, preset ...Opt) func(...Opt) T {
	return func(opts ...Opt) T {
		return newObj(name, append(append([]Opt{}, preset...), opts...)...)
	}
}

// NewSnapshot returns a snapshot with no source: add FromPVC or FromContent.
func NewSnapshot(namespace, name string, opts ...Opt) *snapv1.VolumeSnapshot {
	return apply(&snapv1.VolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID(name + "-uid")},
	}, opts)
}

// NewContent returns a Delete-policy content of DefaultDriver with no source
// and no snapshot reference.
func NewContent(name string, opts ...Opt) *snapv1.VolumeSnapshotContent {
	return apply(&snapv1.VolumeSnapshotContent{ObjectMeta: metav1.ObjectMeta{Name: name}}, withDefaults(opts))
}

// NewPVC returns a 1Gi claim without data source.
func NewPVC(namespace, name string, opts ...Opt) *corev1.PersistentVolumeClaim {
	return apply(&corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			},
		},
	}, opts)
}

// NewPV returns a CSI volume of driver.
func NewPV(name, driver string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
			CSI: &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: name},
		}},
	}
}

// Deleting gives the object a deletion timestamp and a finalizer that holds it.
func Deleting() Opt {
	return func(o metav1.Object) {
		now := metav1.Now()
		o.SetDeletionTimestamp(&now)
		o.SetFinalizers(append(o.GetFinalizers(), "example.com/hold"))
	}
}

// WithAnnotation sets an annotation.
func WithAnnotation(key, value string) Opt {
	return func(o metav1.Object) {
		a := o.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a[key] = value
		o.SetAnnotations(a)
	}
}

// WithLabel sets a label.
func WithLabel(key, value string) Opt {
	return func(o metav1.Object) {
		l := o.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		l[key] = value
		o.SetLabels(l)
	}
}

// AsDefault marks a class as the default of its driver.
func AsDefault() Opt { return WithAnnotation(snapshot.AnnDefaultClass, "true") }

// WithDriver sets the driver of a class or content of either kind.
func WithDriver(d string) Opt {
	return func(o metav1.Object) {
		driver, _, _ := classFields("WithDriver", o)
		*driver = d
	}
}

// WithPolicy sets the deletion policy of a class or content.
func WithPolicy(p snapv1.DeletionPolicy) Opt {
	return func(o metav1.Object) {
		_, policy, _ := classFields("WithPolicy", o)
		*policy = p
	}
}

// WithParam sets a class parameter.
func WithParam(key, value string) Opt {
	return func(o metav1.Object) {
		_, _, params := classFields("WithParam", o)
		if params == nil {
			wrongKind("WithParam", o)
		}
		if *params == nil {
			*params = map[string]string{}
		}
		(*params)[key] = value
	}
}

// WithClass names the class of a snapshot or content, or the
// volumeSnapshotClassName of a schedule's snapshot template.
func WithClass(name string) Opt {
	return func(o metav1.Object) {
		switch o := o.(type) {
		case *snapv1.VolumeSnapshot:
			o.Spec.VolumeSnapshotClassName = &name
		case *snapv1.VolumeSnapshotContent:
			o.Spec.VolumeSnapshotClassName = &name
		case *groupv1.VolumeGroupSnapshot:
			o.Spec.VolumeGroupSnapshotClassName = &name
		case *groupv1.VolumeGroupSnapshotContent:
			o.Spec.VolumeGroupSnapshotClassName = &name
		case *v1alpha1.SnapshotSchedule:
			o.Spec.SnapshotTemplate.VolumeSnapshotClassName = &name
		default:
			wrongKind("WithClass", o)
		}
	}
}

// FromPVC makes a snapshot cut from a claim.
func FromPVC(name string) Opt {
	return func(o metav1.Object) {
		must[*snapv1.VolumeSnapshot]("FromPVC", o).Spec.Source.PersistentVolumeClaimName = &name
	}
}

// FromContent makes a snapshot bind a pre-provisioned content.
func FromContent(name string) Opt {
	return func(o metav1.Object) {
		must[*snapv1.VolumeSnapshot]("FromContent", o).Spec.Source.VolumeSnapshotContentName = &name
	}
}

// Ready gives a snapshot a ready status bound to content with restoreSize.
func Ready(restoreSize, content string) Opt {
	return func(o metav1.Object) {
		s := must[*snapv1.VolumeSnapshot]("Ready", o)
		size, ready := resource.MustParse(restoreSize), true
		s.Status = &snapv1.VolumeSnapshotStatus{
			BoundVolumeSnapshotContentName: &content, ReadyToUse: &ready, RestoreSize: &size,
		}
	}
}

// WithVolumeHandle makes a dynamic content of a volume.
func WithVolumeHandle(h string) Opt {
	return func(o metav1.Object) {
		must[*snapv1.VolumeSnapshotContent]("WithVolumeHandle", o).Spec.Source.VolumeHandle = &h
	}
}

// WithSnapshotHandle makes a pre-provisioned content of a backend snapshot.
func WithSnapshotHandle(h string) Opt {
	return func(o metav1.Object) {
		must[*snapv1.VolumeSnapshotContent]("WithSnapshotHandle", o).Spec.Source.SnapshotHandle = &h
	}
}

// BoundTo points a content at a snapshot; uid may be empty.
func BoundTo(namespace, name string, uid types.UID) Opt {
	return func(o metav1.Object) {
		must[*snapv1.VolumeSnapshotContent]("BoundTo", o).Spec.VolumeSnapshotRef = corev1.ObjectReference{
			Kind: snapshot.KindSnapshot, APIVersion: snapshot.GroupName + "/v1",
			Namespace: namespace, Name: name, UID: uid,
		}
	}
}

// WithSourceMode sets the sourceVolumeMode of a content.
func WithSourceMode(m corev1.PersistentVolumeMode) Opt {
	return func(o metav1.Object) {
		must[*snapv1.VolumeSnapshotContent]("WithSourceMode", o).Spec.SourceVolumeMode = &m
	}
}

// WithSize sets the storage request of a claim.
func WithSize(q string) Opt {
	return func(o metav1.Object) {
		must[*corev1.PersistentVolumeClaim]("WithSize", o).Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse(q)
	}
}

// WithMode sets the volumeMode of a claim.
func WithMode(m corev1.PersistentVolumeMode) Opt {
	return func(o metav1.Object) { must[*corev1.PersistentVolumeClaim]("WithMode", o).Spec.VolumeMode = &m }
}

// BoundToPV binds a claim to a volume.
func BoundToPV(pv string) Opt {
	return func(o metav1.Object) { must[*corev1.PersistentVolumeClaim]("BoundToPV", o).Spec.VolumeName = pv }
}

// WithDataSource sets spec.dataSource, and mirrors it into dataSourceRef as
// the API server does.
func WithDataSource(group, kind, name string) Opt {
	return func(o metav1.Object) {
		c := must[*corev1.PersistentVolumeClaim]("WithDataSource", o)
		c.Spec.DataSource = &corev1.TypedLocalObjectReference{APIGroup: groupPtr(group), Kind: kind, Name: name}
		c.Spec.DataSourceRef = &corev1.TypedObjectReference{APIGroup: groupPtr(group), Kind: kind, Name: name}
	}
}

// WithDataSourceRef sets spec.dataSourceRef; namespace may be empty. Like
// the API server, it mirrors a reference without namespace into dataSource.
func WithDataSourceRef(group, kind, name, namespace string) Opt {
	return func(o metav1.Object) {
		c := must[*corev1.PersistentVolumeClaim]("WithDataSourceRef", o)
		c.Spec.DataSourceRef = &corev1.TypedObjectReference{APIGroup: groupPtr(group), Kind: kind, Name: name}
		if namespace != "" {
			c.Spec.DataSourceRef.Namespace = &namespace
			return
		}
		c.Spec.DataSource = &corev1.TypedLocalObjectReference{APIGroup: groupPtr(group), Kind: kind, Name: name}
	}
}

// RestoresFrom restores a claim from a VolumeSnapshot, written correctly.
func RestoresFrom(snap string) Opt {
	return WithDataSource(snapshot.GroupName, snapshot.KindSnapshot, snap)
}

func groupPtr(g string) *string {
	if g == "" {
		return nil
	}
	return &g
}
