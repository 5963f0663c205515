package binder

import (
	"sort"
	"strings"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
)

// classRules is how a snapshot or a group finds its class, written once for
// VolumeSnapshotClass and VolumeGroupSnapshotClass: the kinds' names,
// annotation, field and reasons are the only difference.
type classRules struct {
	kind, kinds string // "VolumeSnapshotClass", "VolumeSnapshotClasses"
	field       string // the snapshot's field naming its class
	annotation  string // the default-class annotation
	oneOf       string // "one class", "one group class"
	getFailed   string // event reasons
	noDefault   string
}

var (
	snapshotClasses = classRules{
		kind: "VolumeSnapshotClass", kinds: "VolumeSnapshotClasses", field: "spec.volumeSnapshotClassName",
		annotation: snapshot.AnnDefaultClass, oneOf: "one class",
		getFailed: snapshot.ReasonGetSnapshotClassFailed, noDefault: snapshot.ReasonSetDefaultSnapshotClassFailed,
	}
	groupClasses = classRules{
		kind: "VolumeGroupSnapshotClass", kinds: "VolumeGroupSnapshotClasses", field: "spec.volumeGroupSnapshotClassName",
		annotation: snapshot.AnnGroupDefaultClass, oneOf: "one group class",
		getFailed: snapshot.ReasonGetGroupSnapshotClassFailed, noDefault: snapshot.ReasonSetDefaultGroupSnapshotClassFailed,
	}
)

// class is a VolumeSnapshotClass or a VolumeGroupSnapshotClass.
type class interface {
	*snapv1.VolumeSnapshotClass | *groupv1.VolumeGroupSnapshotClass
	GetName() string
	GetAnnotations() map[string]string
}

// resolve returns the named class, or the single default class of the
// driver among all; driverOf reads a class's driver.
func resolve[T class](r classRules, named *string, get func(string) (T, error), list func(labels.Selector) ([]T, error),
	driverOf func(T) string, driver string) (T, *problem) {
	var none T
	if named != nil {
		cl, err := get(*named)
		if err != nil {
			return none, problemf(r.getFailed, "%s %q does not exist yet; create it or fix %s", r.kind, *named, r.field)
		}
		return cl, nil
	}
	all, err := list(labels.Everything())
	if err != nil {
		return none, problemf(r.getFailed, "cannot list %s: %v", r.kinds, err)
	}
	var names []string
	found := none
	for _, cl := range all {
		if driverOf(cl) == driver && cl.GetAnnotations()[r.annotation] == "true" {
			names, found = append(names, cl.GetName()), cl
		}
	}
	switch len(names) {
	case 1:
		return found, nil
	case 0:
		return none, problemf(r.noDefault, "no default %s for driver %q; set %s, or annotate %s of that driver with %s: \"true\"",
			r.kind, driver, r.field, r.oneOf, r.annotation)
	default:
		sort.Strings(names)
		return none, problemf(r.noDefault, "%d %s are the default for driver %q (%s); keep annotation %s on only one of them, or set %s",
			len(names), r.kinds, driver, strings.Join(names, ", "), r.annotation, r.field)
	}
}

// resolveClass returns the snapshot's named class, or the single default
// class of the driver.
func (c *Controller) resolveClass(vs *snapv1.VolumeSnapshot, driver string) (*snapv1.VolumeSnapshotClass, *problem) {
	return resolve(snapshotClasses, vs.Spec.VolumeSnapshotClassName, c.classes.Get, c.classes.List,
		func(cl *snapv1.VolumeSnapshotClass) string { return cl.Driver }, driver)
}

// resolveGroupClass returns the group's named class, or the single default
// group class of the driver.
func (c *Controller) resolveGroupClass(g *groupv1.VolumeGroupSnapshot, driver string) (*groupv1.VolumeGroupSnapshotClass, *problem) {
	return resolve(groupClasses, g.Spec.VolumeGroupSnapshotClassName, c.groupClasses.Get, c.groupClasses.List,
		func(cl *groupv1.VolumeGroupSnapshotClass) string { return cl.Driver }, driver)
}
