package cachelag

// The informer side of the Tracker (Observe, Deleted) and the questions the
// controllers ask it (Stale, DeleteSent, Created).

import (
	"reflect"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Observe is fed the object of every informer add and update event (and of
// a relist): the cache holds obj now.
func (t *Tracker) Observe(obj metav1.Object) {
	t.mu.Lock()
	defer t.mu.Unlock()
	uid := obj.GetUID()
	e := t.objects[uid]
	if e == nil {
		t.seenWhileCreating(obj)
		return
	}
	rv := obj.GetResourceVersion()
	if f := e.flight; f != nil {
		f.seen = append(f.seen, rv)
		f.deleting = f.deleting || obj.GetDeletionTimestamp() != nil
	}
	caught := e.created != nil
	t.forgetCreated(e)
	if obj.GetDeletionTimestamp() != nil {
		caught = caught || e.deleteSent
		e.deleteSent = false
	}
	if !e.gone && !slices.Contains(e.replaced, rv) {
		// The cache caught up with our writes.
		caught = caught || e.latest != ""
		e.replaced, e.latest = nil, ""
	}
	if caught {
		t.sawWrite(e)
	}
	t.dropIfEmpty(uid, e)
}

// Deleted is fed the object of every informer delete event: the cache no
// longer holds it, and nothing is remembered of it.
func (t *Tracker) Deleted(obj metav1.Object) {
	t.mu.Lock()
	defer t.mu.Unlock()
	uid := obj.GetUID()
	e := t.objects[uid]
	if e == nil {
		t.seenWhileCreating(obj)
		return
	}
	if e.gone || e.created != nil {
		t.sawWrite(e) // our last finalizer's removal (or our create)
	}
	t.forgetCreated(e)
	if f := e.flight; f != nil {
		f.deleted = true
		*e = entry{flight: f}
		return
	}
	delete(t.objects, uid)
}

func (t *Tracker) seenWhileCreating(obj metav1.Object) {
	if len(t.creating) == 0 || obj.GetUID() == "" {
		return
	}
	if cw := t.creating[keyOf(obj)]; cw != nil {
		cw.seen = append(cw.seen, obj.GetUID())
	}
}

// Stale reports whether obj, a cached copy, predates one of our writes of
// it, or the object was deleted by our write. A copy at any other version
// shows our writes (or someone's later one) and ends what is remembered of
// our writes' versions; a created object or a sent delete is remembered
// until the informer shows it (Observe, Deleted).
func (t *Tracker) Stale(obj metav1.Object) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	uid := obj.GetUID()
	e := t.objects[uid]
	if e == nil || t.expire(uid, e, t.now()) {
		return false
	}
	if e.gone || slices.Contains(e.replaced, obj.GetResourceVersion()) {
		return true
	}
	if e.latest != "" {
		t.sawWrite(e) // the cache shows our write before its event was handled
	}
	e.replaced, e.latest = nil, ""
	t.dropIfEmpty(uid, e)
	return false
}

// DeleteSent reports whether we sent a delete of the object with uid that
// the cache does not show yet.
func (t *Tracker) DeleteSent(uid types.UID) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.objects[uid]
	if e == nil || t.expire(uid, e, t.now()) {
		return false
	}
	return e.deleteSent
}

// Created returns the object of type T named namespace/name that we created
// and the cache does not have yet, for at most MarkTTL after the create.
func Created[T metav1.Object](t *Tracker, namespace, name string) (T, bool) {
	var zero T
	t.mu.Lock()
	defer t.mu.Unlock()
	uid, ok := t.created[key{reflect.TypeFor[T](), namespace, name}]
	if !ok {
		return zero, false
	}
	e := t.objects[uid]
	if e == nil || e.created == nil {
		return zero, false
	}
	if t.expire(uid, e, t.now()) {
		return zero, false
	}
	obj, ok := e.created.(T)
	return obj, ok
}
