// Package writer is the single place where the controller writes to the API
// server. Each write is a patch of only the fields that changed (or a create
// or delete; claims are updated, conditional on the read copy's
// resourceVersion, because the community RBAC grants no patch on them), and
// every write is counted in snapkeeper_api_writes_total so the write budget
// per snapshot is visible in /metrics and in benchmarks. Every write is also
// recorded in the Writer's cache-lag tracker (pkg/cachelag), which tells a
// sync whether its cached copy already shows our writes.
package writer

import (
	"encoding/json"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MetaPatch is a JSON merge patch of object metadata.
//
// Finalizers are a list, which a merge patch replaces whole. To add or
// remove ours by value without clobbering another component's finalizer,
// the list is computed from the object the caller read and the patch carries
// that object's resourceVersion: the API server rejects it with a conflict if
// anyone changed the object in between, and the caller retries on a fresh
// copy. Annotations and labels are maps, merged key by key, so they need no
// such precondition.
type MetaPatch struct {
	resourceVersion string
	finalizers      []string
	setFinalizers   bool
	annotations     map[string]*string
	labels          map[string]*string
	owners          []metav1.OwnerReference
}

// Empty reports whether the patch changes nothing.
func (p *MetaPatch) Empty() bool {
	return !p.setFinalizers && len(p.annotations) == 0 && len(p.labels) == 0 && p.owners == nil
}

// AddOwnerReference adds ref to obj's owner references unless an owner with
// its UID is there. The list is replaced whole, so the patch carries obj's
// resourceVersion, as for finalizers.
func (p *MetaPatch) AddOwnerReference(obj metav1.Object, ref metav1.OwnerReference) *MetaPatch {
	cur := obj.GetOwnerReferences()
	for _, o := range cur {
		if o.UID == ref.UID {
			return p
		}
	}
	p.owners = append(slices.Clone(cur), ref)
	p.resourceVersion = obj.GetResourceVersion()
	return p
}

// AddFinalizers adds each finalizer obj lacks; no-op when it has them all.
func (p *MetaPatch) AddFinalizers(obj metav1.Object, fs ...string) *MetaPatch {
	cur := p.current(obj)
	next := cur
	for _, f := range fs {
		if !slices.Contains(next, f) {
			next = append(slices.Clone(next), f)
		}
	}
	return p.setIfChanged(obj, cur, next)
}

// RemoveFinalizers removes each of fs by value; other finalizers stay.
func (p *MetaPatch) RemoveFinalizers(obj metav1.Object, fs ...string) *MetaPatch {
	cur := p.current(obj)
	next := slices.DeleteFunc(slices.Clone(cur), func(f string) bool { return slices.Contains(fs, f) })
	return p.setIfChanged(obj, cur, next)
}

func (p *MetaPatch) current(obj metav1.Object) []string {
	if p.setFinalizers {
		return p.finalizers
	}
	return obj.GetFinalizers()
}

func (p *MetaPatch) setIfChanged(obj metav1.Object, cur, next []string) *MetaPatch {
	if slices.Equal(cur, next) {
		return p
	}
	if next == nil {
		next = []string{}
	}
	p.finalizers, p.setFinalizers = next, true
	p.resourceVersion = obj.GetResourceVersion()
	return p
}

// SetAnnotation sets key=value unless obj already has it.
func (p *MetaPatch) SetAnnotation(obj metav1.Object, key, value string) *MetaPatch {
	if v, ok := obj.GetAnnotations()[key]; ok && v == value {
		return p
	}
	if p.annotations == nil {
		p.annotations = map[string]*string{}
	}
	p.annotations[key] = &value
	return p
}

// RemoveAnnotation removes key if obj has it.
func (p *MetaPatch) RemoveAnnotation(obj metav1.Object, key string) *MetaPatch {
	if _, ok := obj.GetAnnotations()[key]; !ok {
		return p
	}
	if p.annotations == nil {
		p.annotations = map[string]*string{}
	}
	p.annotations[key] = nil
	return p
}

// SetLabel sets key=value unless obj already has it.
func (p *MetaPatch) SetLabel(obj metav1.Object, key, value string) *MetaPatch {
	if v, ok := obj.GetLabels()[key]; ok && v == value {
		return p
	}
	if p.labels == nil {
		p.labels = map[string]*string{}
	}
	p.labels[key] = &value
	return p
}

// metadata renders the metadata part of the patch.
func (p *MetaPatch) metadata() map[string]any {
	m := map[string]any{}
	if p.setFinalizers {
		m["finalizers"] = p.finalizers
		m["resourceVersion"] = p.resourceVersion
	}
	if len(p.annotations) > 0 {
		m["annotations"] = p.annotations
	}
	if len(p.labels) > 0 {
		m["labels"] = p.labels
	}
	if p.owners != nil {
		m["ownerReferences"] = p.owners
		m["resourceVersion"] = p.resourceVersion
	}
	return m
}

// apply makes the patch's changes to obj itself, for writes sent as an
// update of the read copy (whose resourceVersion is then the precondition).
func (p *MetaPatch) apply(obj metav1.Object) {
	if p.setFinalizers {
		obj.SetFinalizers(slices.Clone(p.finalizers))
	}
	obj.SetAnnotations(applyMap(obj.GetAnnotations(), p.annotations))
	obj.SetLabels(applyMap(obj.GetLabels(), p.labels))
}

func applyMap(cur map[string]string, changes map[string]*string) map[string]string {
	if len(changes) == 0 {
		return cur
	}
	out := make(map[string]string, len(cur)+len(changes))
	for k, v := range cur {
		out[k] = v
	}
	for k, v := range changes {
		if v == nil {
			delete(out, k)
		} else {
			out[k] = *v
		}
	}
	return out
}

// Patch is a merge patch of metadata plus optional other top-level fields
// (for example "spec"), sent as one write.
type Patch struct {
	Meta MetaPatch
	// Fields are other top-level fields to merge, e.g. {"spec": {...}}.
	Fields map[string]any
	// Precondition, when set, makes the write conditional on the object's
	// resourceVersion even without a finalizer change.
	Precondition string
}

// Empty reports whether the patch changes nothing.
func (p *Patch) Empty() bool { return p.Meta.Empty() && len(p.Fields) == 0 }

// JSON renders the merge patch.
func (p *Patch) JSON() ([]byte, error) {
	body := map[string]any{}
	for k, v := range p.Fields {
		body[k] = v
	}
	meta := p.Meta.metadata()
	if p.Precondition != "" {
		meta["resourceVersion"] = p.Precondition
	}
	if len(meta) > 0 {
		body["metadata"] = meta
	}
	return json.Marshal(body)
}
