package testkit

import (
	"time"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
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
// Meta options fit every builder, ClassName, Driver, Policy (Retain) and
// Params those of the kinds that have the field, and the options of a rule
// the two kinds share (FromContent, BoundTo, RefTo, RefUID,
// PreProvisioned, Ready, DefaultClass) both builders of a pair, so that
// one table case can build either kind.
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
	GroupSnapshotOption interface {
		applyGroupSnapshot(*groupv1.VolumeGroupSnapshot)
	}
	GroupContentOption interface {
		applyGroupContent(*groupv1.VolumeGroupSnapshotContent)
	}
	GroupClassOption interface {
		applyGroupClass(*groupv1.VolumeGroupSnapshotClass)
	}
)

// SnapshotFunc, ContentFunc, ClassFunc and their group counterparts are
// options made of a function, such as a test's own combination of options.
type (
	SnapshotFunc      func(*snapv1.VolumeSnapshot)
	ContentFunc       func(*snapv1.VolumeSnapshotContent)
	ClassFunc         func(*snapv1.VolumeSnapshotClass)
	GroupSnapshotFunc func(*groupv1.VolumeGroupSnapshot)
	GroupContentFunc  func(*groupv1.VolumeGroupSnapshotContent)
	GroupClassFunc    func(*groupv1.VolumeGroupSnapshotClass)
)

// SubjectFunc, AnyContentFunc and AnyClassFunc are options of a rule both
// kinds have, one function for each kind.
type (
	SubjectFunc struct {
		Snapshot func(*snapv1.VolumeSnapshot)
		Group    func(*groupv1.VolumeGroupSnapshot)
	}
	AnyContentFunc struct {
		Content func(*snapv1.VolumeSnapshotContent)
		Group   func(*groupv1.VolumeGroupSnapshotContent)
	}
	AnyClassFunc struct {
		Class func(*snapv1.VolumeSnapshotClass)
		Group func(*groupv1.VolumeGroupSnapshotClass)
	}
)

func (f SnapshotFunc) applySnapshot(vs *snapv1.VolumeSnapshot)                     { f(vs) }
func (f ContentFunc) applyContent(c *snapv1.VolumeSnapshotContent)                 { f(c) }
func (f ClassFunc) applyClass(c *snapv1.VolumeSnapshotClass)                       { f(c) }
func (f GroupSnapshotFunc) applyGroupSnapshot(g *groupv1.VolumeGroupSnapshot)      { f(g) }
func (f GroupContentFunc) applyGroupContent(c *groupv1.VolumeGroupSnapshotContent) { f(c) }
func (f GroupClassFunc) applyGroupClass(c *groupv1.VolumeGroupSnapshotClass)       { f(c) }

func (f SubjectFunc) applySnapshot(vs *snapv1.VolumeSnapshot)                    { f.Snapshot(vs) }
func (f SubjectFunc) applyGroupSnapshot(g *groupv1.VolumeGroupSnapshot)          { f.Group(g) }
func (f AnyContentFunc) applyContent(c *snapv1.VolumeSnapshotContent)            { f.Content(c) }
func (f AnyContentFunc) applyGroupContent(c *groupv1.VolumeGroupSnapshotContent) { f.Group(c) }
func (f AnyClassFunc) applyClass(c *snapv1.VolumeSnapshotClass)                  { f.Class(c) }
func (f AnyClassFunc) applyGroupClass(c *groupv1.VolumeGroupSnapshotClass)       { f.Group(c) }

func (f Meta) applySnapshot(vs *snapv1.VolumeSnapshot)                 { f(vs) }
func (f Meta) applyContent(c *snapv1.VolumeSnapshotContent)            { f(c) }
func (f Meta) applyClass(c *snapv1.VolumeSnapshotClass)                { f(c) }
func (f Meta) applyGroupSnapshot(g *groupv1.VolumeGroupSnapshot)       { f(g) }
func (f Meta) applyGroupContent(c *groupv1.VolumeGroupSnapshotContent) { f(c) }
func (f Meta) applyGroupClass(c *groupv1.VolumeGroupSnapshotClass)     { f(c) }
func (n ClassName) applySnapshot(vs *snapv1.VolumeSnapshot) {
	vs.Spec.VolumeSnapshotClassName = n.ptr()
}
func (n ClassName) applyContent(c *snapv1.VolumeSnapshotContent) {
	c.Spec.VolumeSnapshotClassName = n.ptr()
}
func (n ClassName) applyGroupSnapshot(g *groupv1.VolumeGroupSnapshot) {
	g.Spec.VolumeGroupSnapshotClassName = n.ptr()
}
func (n ClassName) applyGroupContent(c *groupv1.VolumeGroupSnapshotContent) {
	c.Spec.VolumeGroupSnapshotClassName = n.ptr()
}
func (d Driver) applyContent(c *snapv1.VolumeSnapshotContent)            { c.Spec.Driver = string(d) }
func (d Driver) applyClass(c *snapv1.VolumeSnapshotClass)                { c.Driver = string(d) }
func (d Driver) applyGroupContent(c *groupv1.VolumeGroupSnapshotContent) { c.Spec.Driver = string(d) }
func (d Driver) applyGroupClass(c *groupv1.VolumeGroupSnapshotClass)     { c.Driver = string(d) }
func (p Policy) applyContent(c *snapv1.VolumeSnapshotContent) {
	c.Spec.DeletionPolicy = snapv1.DeletionPolicy(p)
}
func (p Policy) applyClass(c *snapv1.VolumeSnapshotClass) {
	c.DeletionPolicy = snapv1.DeletionPolicy(p)
}
func (p Policy) applyGroupContent(c *groupv1.VolumeGroupSnapshotContent) {
	c.Spec.DeletionPolicy = snapv1.DeletionPolicy(p)
}
func (p Policy) applyGroupClass(c *groupv1.VolumeGroupSnapshotClass) {
	c.DeletionPolicy = snapv1.DeletionPolicy(p)
}
func (p Params) applyClass(c *snapv1.VolumeSnapshotClass)            { c.Parameters = p }
func (p Params) applyGroupClass(c *groupv1.VolumeGroupSnapshotClass) { c.Parameters = p }
func (r Ref) applyContent(c *snapv1.VolumeSnapshotContent)           { r(&c.Spec.VolumeSnapshotRef) }
func (r Ref) applyGroupContent(c *groupv1.VolumeGroupSnapshotContent) {
	r(&c.Spec.VolumeGroupSnapshotRef)
}

// As is opts, options of a rule both kinds have, as the options of one
// builder: a table that builds either kind keeps its options in a slice of
// an interface of both (SnapshotOption and GroupSnapshotOption, say).
func As[T, O any](opts []O) []T {
	out := make([]T, 0, len(opts))
	for _, o := range opts {
		out = append(out, any(o).(T))
	}
	return out
}

// ClassName names the class of a snapshot, a group or a content of either
// kind; "" names none.
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

// Policy is the deletion policy of a content or a class.
type Policy snapv1.DeletionPolicy

// Params are the parameters of a class.
type Params map[string]string

// Ref changes the reference of a content to its VolumeSnapshot, or of a
// group content to its VolumeGroupSnapshot.
type Ref func(*corev1.ObjectReference)

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
