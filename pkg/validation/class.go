package validation

import (
	"fmt"
	"slices"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
)

var (
	classDriverPath = field.NewPath("driver")
	classParamsPath = field.NewPath("parameters")
	classPolicyPath = field.NewPath("deletionPolicy")
)

// classFamily is what tells VolumeSnapshotClass and VolumeGroupSnapshotClass
// apart. Every class rule is written once, against a classView, so the two
// kinds are judged by the same code.
type classFamily struct {
	kind        string // VolumeSnapshotClass or VolumeGroupSnapshotClass
	contentKind string // the kind of the contents made from such a class
	annotation  string // the kind's is-default-class annotation
	defaultPath *field.Path
	list        func(Lookup) ([]classView, error)
	listFresh   func(Lookup) ([]classView, error)
	// inUse reports whether contents were made from a class. It is nil for
	// group classes: their CRD makes driver and deletionPolicy immutable,
	// so the warnings it feeds cannot arise.
	inUse func(l Lookup, name string) (bool, error)
}

// classView is a class of either kind, as the rules see it.
type classView struct {
	metav1.Object
	driver string
	policy snapv1.DeletionPolicy
	params map[string]string
}

var singleClasses = &classFamily{
	kind: "VolumeSnapshotClass", contentKind: "VolumeSnapshotContent",
	annotation:  snapshot.AnnDefaultClass,
	defaultPath: field.NewPath("metadata", "annotations").Key(snapshot.AnnDefaultClass),
	list:        func(l Lookup) ([]classView, error) { return viewList(singleClassView)(l.ListClasses()) },
	listFresh:   func(l Lookup) ([]classView, error) { return viewList(singleClassView)(l.ListClassesFresh()) },
	inUse:       func(l Lookup, name string) (bool, error) { return l.ClassInUse(name) },
}

var groupClasses = &classFamily{
	kind: "VolumeGroupSnapshotClass", contentKind: "VolumeGroupSnapshotContent",
	annotation:  snapshot.AnnGroupDefaultClass,
	defaultPath: field.NewPath("metadata", "annotations").Key(snapshot.AnnGroupDefaultClass),
	list:        func(l Lookup) ([]classView, error) { return viewList(groupClassView)(l.ListGroupClasses()) },
	listFresh:   func(l Lookup) ([]classView, error) { return viewList(groupClassView)(l.ListGroupClassesFresh()) },
}

func singleClassView(c *snapv1.VolumeSnapshotClass) *classView {
	if c == nil {
		return nil
	}
	return &classView{Object: c, driver: c.Driver, policy: c.DeletionPolicy, params: c.Parameters}
}

func groupClassView(c *groupv1.VolumeGroupSnapshotClass) *classView {
	if c == nil {
		return nil
	}
	return &classView{Object: c, driver: c.Driver, policy: c.DeletionPolicy, params: c.Parameters}
}

// viewList adapts a lookup's list of one class kind to views.
func viewList[T any](view func(T) *classView) func([]T, error) ([]classView, error) {
	return func(list []T, err error) ([]classView, error) {
		if err != nil {
			return nil, err
		}
		out := make([]classView, 0, len(list))
		for _, c := range list {
			if cv := view(c); cv != nil {
				out = append(out, *cv)
			}
		}
		return out, nil
	}
}

func (f *classFamily) isDefault(annotations map[string]string) bool {
	return annotations[f.annotation] == "true"
}

// Class validates a VolumeSnapshotClass. old is the stored object on UPDATE.
func (v Validator) Class(op Operation, c, old *snapv1.VolumeSnapshotClass) (field.ErrorList, []string) {
	return v.classRules(singleClasses, op, singleClassView(c), singleClassView(old))
}

// GroupClass validates a VolumeGroupSnapshotClass with the rules of
// VolumeSnapshotClass: one default per driver (its own annotation), a valid
// driver, deletionPolicy and reserved parameters.
func (v Validator) GroupClass(op Operation, c, old *groupv1.VolumeGroupSnapshotClass) (field.ErrorList, []string) {
	return v.classRules(groupClasses, op, groupClassView(c), groupClassView(old))
}

func (v Validator) classRules(f *classFamily, op Operation, c, old *classView) (field.ErrorList, []string) {
	if op == Update && old != nil {
		return v.classUpdate(f, c, old)
	}
	errs := classSpecErrors(f, c)
	warnings := defaultValueWarnings(f, c, nil)
	if f.isDefault(c.GetAnnotations()) {
		e, w := v.defaultConflict(f, c)
		errs = append(errs, e...)
		warnings = append(warnings, w...)
	}
	return errs, warnings
}

func (v Validator) classUpdate(f *classFamily, c, old *classView) (field.ErrorList, []string) {
	if beingDeleted(c, old) {
		return nil, nil
	}
	warnings := defaultValueWarnings(f, c, old)
	var errs field.ErrorList
	if c.driver != old.driver || c.policy != old.policy || !equality.Semantic.DeepEqual(c.params, old.params) {
		errs = ratchet(classSpecErrors(f, c), classSpecErrors(f, old))
		warnings = append(warnings, v.classInUseWarnings(f, c, old)...)
	}
	// Only a change that newly makes the class the default of a driver is
	// judged against the other classes: a GitOps re-sync of an unchanged
	// default class must never fail, even where two defaults already exist.
	newlyDefault := f.isDefault(c.GetAnnotations()) &&
		(!f.isDefault(old.GetAnnotations()) || c.driver != old.driver)
	if newlyDefault {
		e, w := v.defaultConflict(f, c)
		errs = append(errs, e...)
		warnings = append(warnings, w...)
	}
	return errs, warnings
}

// classSpecErrors are the rules that depend on the class alone.
func classSpecErrors(f *classFamily, c *classView) field.ErrorList {
	var errs field.ErrorList
	self := clusterObj(f.kind, c.GetName())
	if why := validCSIDriverName(c.driver); why != "" {
		errs = append(errs, invalid(classDriverPath, c.driver,
			"%s has an invalid driver %q: %s; use the name the CSI driver reports (the name of its CSIDriver object)",
			self, c.driver, why))
	}
	if p := c.policy; p != snapv1.VolumeSnapshotContentDelete && p != snapv1.VolumeSnapshotContentRetain {
		errs = append(errs, invalid(classPolicyPath, p,
			"%s has deletionPolicy %q: it must be %q or %q; set one of them",
			self, p, snapv1.VolumeSnapshotContentDelete, snapv1.VolumeSnapshotContentRetain))
	}
	return append(errs, paramErrors(self, c.params)...)
}

// defaultConflict denies a class that would become a second default for its
// driver. It reads the classes fresh from the API server, so a default class
// created a moment ago (and not yet in the cache) is seen.
func (v Validator) defaultConflict(f *classFamily, c *classView) (field.ErrorList, []string) {
	var warnings []string
	plural := f.kind + "es"
	classes, err := f.listFresh(v.Lookup)
	if err != nil {
		warnings = append(warnings, fmt.Sprintf(
			"could not read %s from the API server (%v); checked the default class against the cache", plural, err))
		classes, err = f.list(v.Lookup)
		if err != nil {
			return field.ErrorList{lookupFailed(f.defaultPath, plural, err)}, warnings
		}
	}
	var others []string
	for _, o := range classes {
		if o.GetName() != c.GetName() && o.driver == c.driver && f.isDefault(o.GetAnnotations()) && !snapshot.IsBeingDeleted(o) {
			others = append(others, o.GetName())
		}
	}
	if len(others) == 0 {
		return nil, warnings
	}
	slices.Sort(others)
	verb := "already is"
	if len(others) > 1 {
		verb = "already are"
	}
	return field.ErrorList{invalid(f.defaultPath, c.GetAnnotations()[f.annotation],
		"%s cannot be the default for driver %q: %s %s; remove the annotation from %s first",
		clusterObj(f.kind, c.GetName()), c.driver, quoteAll(others), verb, quoteAll(others))}, warnings
}

// defaultValueWarnings warns about an is-default-class value that is neither
// "true" nor "false": it is silently not a default. On UPDATE it warns only
// when the value changed, so re-syncs stay quiet.
func defaultValueWarnings(f *classFamily, c, old *classView) []string {
	val, ok := c.GetAnnotations()[f.annotation]
	if !ok || val == "true" || val == "false" {
		return nil
	}
	if old != nil && old.GetAnnotations()[f.annotation] == val {
		return nil
	}
	return []string{fmt.Sprintf(
		"%s %q has %s: %q, which is not \"true\", so it is not a default class; write \"true\" or \"false\"",
		f.kind, c.GetName(), f.annotation, val)}
}

// classInUseWarnings warns when a class already used by contents changes its
// driver or deletion policy: existing contents keep what they were made with.
func (v Validator) classInUseWarnings(f *classFamily, c, old *classView) []string {
	if f.inUse == nil || (c.driver == old.driver && c.policy == old.policy) {
		return nil
	}
	inUse, err := f.inUse(v.Lookup, c.GetName())
	if err != nil {
		return []string{fmt.Sprintf("could not check whether %s %q is in use: %v", f.kind, c.GetName(), err)}
	}
	if !inUse {
		return nil
	}
	var w []string
	if c.driver != old.driver {
		w = append(w, fmt.Sprintf(
			"%s %q is in use and changes driver from %q to %q: existing snapshots stay with %q, new ones go to %q",
			f.kind, c.GetName(), old.driver, c.driver, old.driver, c.driver))
	}
	if c.policy != old.policy {
		w = append(w, fmt.Sprintf(
			"%s %q is in use and changes deletionPolicy from %s to %s: existing %ss keep %s; patch them to change it",
			f.kind, c.GetName(), old.policy, c.policy, f.contentKind, old.policy))
	}
	return w
}

// defaultClassWarnings warns, for an object that names no class, when the
// driver of its volumes has no default class of the family, or several.
// classField is the field that names a class, for the fix.
func (v Validator) defaultClassWarnings(f *classFamily, self, driver, classField string) []string {
	defaults, err := v.defaultsOf(f, driver)
	if err != nil {
		return []string{fmt.Sprintf("%s: could not list %ses: %v", self, f.kind, err)}
	}
	switch len(defaults) {
	case 0:
		return []string{fmt.Sprintf(
			"%s names no class and driver %q has no default %s; set %s, or mark a class of that driver default",
			self, driver, f.kind, classField)}
	case 1:
		return nil
	}
	return []string{fmt.Sprintf(
		"%s names no class and driver %q has several default %ses (%s); the snapshot will fail: set %s",
		self, driver, f.kind, quoteAll(defaults), classField)}
}

// defaultsOf returns the sorted names of the default classes of driver in
// the family: the class an object naming none gets, when there is one.
func (v Validator) defaultsOf(f *classFamily, driver string) ([]string, error) {
	classes, err := f.list(v.Lookup)
	if err != nil {
		return nil, err
	}
	var defaults []string
	for _, c := range classes {
		if c.driver == driver && f.isDefault(c.GetAnnotations()) {
			defaults = append(defaults, c.GetName())
		}
	}
	slices.Sort(defaults)
	return defaults, nil
}
