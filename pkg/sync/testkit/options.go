package testkit

import (
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
)

// Defaults of the builders.
const (
	// Namespace of the namespaced objects.
	Namespace = "ns"
	// DriverName is the CSI driver of contents and classes.
	DriverName = "drv.example.com"
	// VolumeHandle is the CSI volume of BoundClaim and of dynamic contents.
	VolumeHandle = "vol-1"
)

// Time is the time of the objects: creation time of a Cut snapshot,
// deletionTimestamp of Deleted objects and of deletes the API holds for
// finalizers.
var Time = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// The options of the builders. Each builder takes the options of its kind;
// Meta options fit every builder, ClassName and Driver those of the kinds
// that have the field.
type (
	SnapshotOption interface {
		applySnapshot(*snapv1.VolumeSnapshot)
	}
	ContentOption interface {
		applyContent(*snapv1.VolumeSnapshotContent)
	}
	ClassOption interface {
		applyClass(*snapv1.VolumeSnapshotClass)
	}
)

// SnapshotFunc, ContentFunc and ClassFunc are options made of a function,
// such as a test's own combination of options.
type (
	SnapshotFunc func(*snapv1.VolumeSnapshot)
	ContentFunc  func(*snapv1.VolumeSnapshotContent)
	ClassFunc    func(*snapv1.VolumeSnapshotClass)
)

func (f SnapshotFunc) applySnapshot(vs *snapv1.VolumeSnapshot)     { f(vs) }
func (f ContentFunc) applyContent(c *snapv1.VolumeSnapshotContent) { f(c) }
func (f ClassFunc) applyClass(c *snapv1.VolumeSnapshotClass)       { f(c) }
func (f Meta) applySnapshot(vs *snapv1.VolumeSnapshot)             { f(vs) }
func (f Meta) applyContent(c *snapv1.VolumeSnapshotContent)        { f(c) }
func (f Meta) applyClass(c *snapv1.VolumeSnapshotClass)            { f(c) }
func (n ClassName) applySnapshot(vs *snapv1.VolumeSnapshot) {
	vs.Spec.VolumeSnapshotClassName = n.ptr()
}
func (n ClassName) applyContent(c *snapv1.VolumeSnapshotContent) {
	c.Spec.VolumeSnapshotClassName = n.ptr()
}
func (d Driver) applyContent(c *snapv1.VolumeSnapshotContent) { c.Spec.Driver = string(d) }
func (d Driver) applyClass(c *snapv1.VolumeSnapshotClass)     { c.Driver = string(d) }

// ClassName names the VolumeSnapshotClass of a snapshot or a content; ""
// names none.
type ClassName string

func (n ClassName) ptr() *string {
	if n == "" {
		return nil
	}
	s := string(n)
	return &s
}

// Driver is the CSI driver of a content or a class.
type Driver string

// Meta is an option that changes an object's metadata; it fits every
// builder, and is a function that a test's own option may call.
type Meta func(metav1.Object)

// Named renames the object.
func Named(name string) Meta { return func(o metav1.Object) { o.SetName(name) } }

// InNamespace moves the object into namespace.
func InNamespace(namespace string) Meta {
	return func(o metav1.Object) { o.SetNamespace(namespace) }
}

// UID sets the object's UID.
func UID(uid types.UID) Meta { return func(o metav1.Object) { o.SetUID(uid) } }

// Finalizers replaces the object's finalizers (none without arguments).
func Finalizers(fs ...string) Meta { return func(o metav1.Object) { o.SetFinalizers(fs) } }

// Annotated sets an annotation.
func Annotated(key, value string) Meta {
	return func(o metav1.Object) { o.SetAnnotations(with(o.GetAnnotations(), key, value)) }
}

// Marked sets annotation ann to snapshot.ValueYes, as the controllers mark
// objects (being created, being deleted).
func Marked(ann string) Meta { return Annotated(ann, snapshot.ValueYes) }

// Unannotated removes an annotation.
func Unannotated(key string) Meta {
	return func(o metav1.Object) {
		a := o.GetAnnotations()
		delete(a, key)
		o.SetAnnotations(a)
	}
}

// Labelled sets a label.
func Labelled(key, value string) Meta {
	return func(o metav1.Object) { o.SetLabels(with(o.GetLabels(), key, value)) }
}

// Deleted gives the object the deletionTimestamp Time.
func Deleted() Meta {
	return func(o metav1.Object) {
		t := metav1.NewTime(Time)
		o.SetDeletionTimestamp(&t)
	}
}

func with(m map[string]string, key, value string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	m[key] = value
	return m
}
