package manifestcheck

import (
	"fmt"
	"strings"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/snapkeeper/snapkeeper/pkg/apis/snapkeeper/v1alpha1"
	"github.com/snapkeeper/snapkeeper/pkg/validation"
)

// World is what exists outside the set: a Lookup, plus the stored version
// of an object the set may redefine (then judged as an UPDATE of it).
type World interface {
	validation.Lookup
	Live(obj metav1.Object) (metav1.Object, error)
}

// Config is how a set is judged.
type Config struct {
	Options validation.Options
	// Namespace is given to namespaced objects that name none, as kubectl
	// does with its context's namespace; empty means "default".
	Namespace string
	// World, when set, is consulted for what the set does not define.
	World World
}

// FieldError is one reason for a denial. The JSON names are a stable
// interface (docs/snapctl.md).
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Result is the verdict on one object.
type Result struct {
	File      string       `json:"file"`
	Document  int          `json:"document"`
	Item      int          `json:"item,omitempty"`
	Kind      string       `json:"kind"`
	Namespace string       `json:"namespace,omitempty"`
	Name      string       `json:"name"`
	Allowed   bool         `json:"allowed"`
	Errors    []FieldError `json:"errors"`
	Warnings  []string     `json:"warnings"`
	// Operation is CREATE, or UPDATE when World holds the object already.
	Operation string `json:"operation"`
}

// Judge validates every object of a kind with admission rules, in order.
// Objects of other kinds (PersistentVolumes, Namespaces) only inform the
// others. Judge never fails: a failed read of World denies the object,
// as the webhook denies when its lookup fails.
func Judge(objs []Object, cfg Config) []Result {
	ns := cfg.Namespace
	if ns == "" {
		ns = "default"
	}
	set := &validation.StaticLookup{}
	first := map[string]Object{}
	var results []Result
	for _, o := range objs {
		if namespaced(o.Obj) && o.Obj.GetNamespace() == "" {
			o.Obj.SetNamespace(ns)
		}
		_ = set.Add(o.Obj) // a Namespace: nothing looks it up
	}
	for _, o := range objs {
		if !judgeable(o.Obj) {
			continue
		}
		r := newResult(o)
		key := r.Kind + "/" + r.Namespace + "/" + r.Name
		if prev, dup := first[key]; dup {
			r.Errors = []FieldError{{Field: "metadata.name", Message: fmt.Sprintf(
				"%s %s is defined twice in this set (first at %s); applying both keeps only the last: remove one",
				r.Kind, displayName(r), prev.Where())}}
		} else {
			first[key] = o
			judgeOne(o.Obj, set, cfg, &r)
		}
		r.Allowed = len(r.Errors) == 0
		results = append(results, r)
	}
	warnDeniedSources(objs, results)
	return results
}

func judgeOne(obj metav1.Object, set *validation.StaticLookup, cfg Config, r *Result) {
	var old any
	lookup := validation.Overlay{Set: set, Hide: obj}
	if cfg.World != nil {
		lookup.Base = cfg.World
		live, err := cfg.World.Live(obj)
		if err != nil {
			r.Errors = []FieldError{{Field: "metadata.name", Message: fmt.Sprintf("could not check this object: %v", err)}}
			return
		}
		if live != nil {
			asUpdate(obj, live)
			old, r.Operation = live, string(validation.Update)
		}
	}
	op := validation.Create
	if old != nil {
		op = validation.Update
	}
	v := validation.Validator{Lookup: lookup, Options: cfg.Options}
	errs, warnings, err := v.Validate(op, obj, old)
	if err != nil {
		r.Errors = []FieldError{{Message: err.Error()}}
		return
	}
	r.Errors = fieldErrors(errs)
	r.Warnings = append(r.Warnings, warnings...)
}

func fieldErrors(errs field.ErrorList) []FieldError {
	out := []FieldError{}
	for _, e := range errs {
		msg := e.Detail
		if e.Type == field.ErrorTypeInternal || msg == "" {
			msg = e.ErrorBody()
		}
		out = append(out, FieldError{Field: e.Field, Message: msg})
	}
	return out
}

func newResult(o Object) Result {
	return Result{
		File: o.File, Document: o.Document, Item: o.Item,
		Kind: kindOf(o.Obj), Namespace: o.Obj.GetNamespace(), Name: o.Obj.GetName(),
		Errors: []FieldError{}, Warnings: []string{}, Operation: string(validation.Create),
	}
}

func displayName(r Result) string {
	if r.Namespace != "" {
		return fmt.Sprintf("%q", r.Namespace+"/"+r.Name)
	}
	return fmt.Sprintf("%q", r.Name)
}

// kindOf is the Kind of one of the decoded types ("*v1.VolumeSnapshot").
func kindOf(obj metav1.Object) string {
	t := fmt.Sprintf("%T", obj)
	return t[strings.LastIndex(t, ".")+1:]
}

func namespaced(obj metav1.Object) bool {
	switch obj.(type) {
	case *snapv1.VolumeSnapshot, *groupv1.VolumeGroupSnapshot, *corev1.PersistentVolumeClaim, *v1alpha1.SnapshotSchedule:
		return true
	}
	return false
}

func judgeable(obj metav1.Object) bool {
	switch obj.(type) {
	case *corev1.Namespace, *corev1.PersistentVolume:
		return false
	}
	return true
}
