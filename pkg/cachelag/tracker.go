// Package cachelag remembers what the controller's own writes did that its
// informer cache may not show yet: "my write is not in the cache yet".
//
// The API server answers a write a moment before the informer delivers the
// write's watch event. A sync woken in between (by the event of an earlier
// write, say) reads the old copy from the cache, and acting on it would
// repeat the write, lose a conflict, or, on the CSI side, call the driver
// again. One Tracker per Writer (pkg/writer) answers, per object UID:
//
//   - Stale: is this cached copy older than one of our writes (or was the
//     object deleted by our write, so that every cached copy is outdated)?
//   - Created: the object we created that the cache does not have yet.
//   - DeleteSent: did we already send a delete the cache does not show yet?
//
// Every write of the Writer records itself (Begin, then Write.Done); the
// controllers feed the informer events of every kind they write (Observe
// for adds and updates, Deleted for deletes). An entry goes as soon as the
// cache shows what it stands for, or the object is deleted, so the tracker
// is empty once a workload is done: Len is exported as a gauge.
//
// A Tracker never decides whether a backend snapshot may be deleted: that
// reads the informer's copy only, never an object returned by our own write
// (external-snapshotter issue 1446).
package cachelag

import (
	"reflect"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Op is the kind of a write.
type Op uint8

const (
	// Update is a patch, status patch or update of an existing object.
	Update Op = iota
	// Finalize is an Update that removes the last finalizer of an object
	// being deleted: the API server deletes the object with it.
	Finalize
	// Create creates an object.
	Create
	// Delete deletes an object.
	Delete
)

// Tracker is safe for concurrent use. The zero value is not usable: call New.
type Tracker struct {
	mu      sync.Mutex
	objects map[types.UID]*entry
	// created finds the objects we created, by type, namespace and name,
	// until the cache has them.
	created map[key]types.UID
	// creating holds the creates in flight, whose UID is not known yet.
	creating map[key]*createWindow
	// now is the clock of the created objects' expiry (tests replace it).
	now func() time.Time
	// caughtUp, when set, is told how long the cache took to show one of
	// our writes (SetCaughtUp).
	caughtUp func(time.Duration)
}

// SetCaughtUp sets f to be told, each time the informer shows one of our
// writes that was answered before its event came, how long after the answer
// that was: the watch round trip a sync waiting for its own write pays.
// Call it before the Tracker is used; f runs under the Tracker's lock and
// must be quick (a histogram's Observe).
func (t *Tracker) SetCaughtUp(f func(time.Duration)) { t.caughtUp = f }

// sawWrite reports the delay from e's last answered write to now, when the
// cache just showed it.
func (t *Tracker) sawWrite(e *entry) {
	if t.caughtUp != nil && !e.written.IsZero() {
		t.caughtUp(t.now().Sub(e.written))
	}
}

// MarkTTL is how long what our writes did to an object (a create, a delete,
// new versions) stands in for the cache. The informer shows a write within
// moments; one it never shows was done while its watch was broken (an API
// server restart, a dropped connection) to an object the relist that
// follows no longer holds: remembering it longer would show a deleted
// object as live, or keep its entry, forever.
const MarkTTL = time.Minute

// entry is what the tracker knows about one object. It exists while one of
// its fields says something, or a write of the object is in flight.
type entry struct {
	// replaced holds the resourceVersions our writes replaced: a cached
	// copy at one of them predates our write.
	replaced []string
	// latest is the resourceVersion of our last write's answer.
	latest string
	// gone: our write deleted the object (it removed the last finalizer of
	// an object being deleted). Every cached copy is outdated until the
	// delete event.
	gone bool
	// deleteSent: we sent a delete and the cache has not shown the object
	// deleted (deletionTimestamp set, or gone) since.
	deleteSent bool
	// created is the API server's answer to our create, until the cache
	// has the object.
	created metav1.Object
	// written is when our last write of the object was answered: the
	// entry expires MarkTTL later.
	written time.Time
	// flight is set while writes of the object are in flight.
	flight *flight
}

// flight is what the cache showed while writes of an object were in
// flight: it tells whether a write's answer is in the cache already when it
// returns, since the watch event may be faster than the answer.
type flight struct {
	writes   int
	seen     []string // resourceVersions
	deleting bool     // a copy with deletionTimestamp
	deleted  bool     // the delete event
}

func (e *entry) empty() bool {
	return e.flight == nil && !e.gone && !e.deleteSent && e.created == nil &&
		len(e.replaced) == 0 && e.latest == ""
}

type key struct {
	typ             reflect.Type
	namespace, name string
}

func keyOf(obj metav1.Object) key {
	return key{reflect.TypeOf(obj), obj.GetNamespace(), obj.GetName()}
}

type createWindow struct {
	inflight int
	// seen are the UIDs of objects of this key the cache showed while the
	// create was in flight.
	seen []types.UID
}

// New returns an empty Tracker.
func New() *Tracker {
	return &Tracker{
		objects:  map[types.UID]*entry{},
		created:  map[key]types.UID{},
		creating: map[key]*createWindow{},
		now:      time.Now,
	}
}

// Len is the number of objects the tracker holds an entry for, writes in
// flight included. It first forgets the entries older than MarkTTL.
func (t *Tracker) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	for uid, e := range t.objects {
		t.expire(uid, e, now)
	}
	return len(t.objects)
}

// expire forgets e when no write of it is in flight and our last write of
// it was answered more than MarkTTL ago, and reports whether it did.
func (t *Tracker) expire(uid types.UID, e *entry, now time.Time) bool {
	if e.flight != nil || e.written.IsZero() || now.Sub(e.written) <= MarkTTL {
		return false
	}
	t.forgetCreated(e)
	delete(t.objects, uid)
	return true
}

// Write is one write in flight; Done ends it. It is a value: Begin and
// Done allocate nothing for it.
type Write struct {
	t   *Tracker
	op  Op
	uid types.UID
	rv  string
	key key
}

// Begin announces a write of obj: for Create the object sent, otherwise the
// copy the write was computed from (its resourceVersion is what the write
// replaces). Call Done with the answer once the API server replied.
func (t *Tracker) Begin(op Op, obj metav1.Object) Write {
	w := Write{t: t, op: op, uid: obj.GetUID(), rv: obj.GetResourceVersion()}
	t.mu.Lock()
	defer t.mu.Unlock()
	if op == Create {
		w.key = keyOf(obj)
		cw := t.creating[w.key]
		if cw == nil {
			cw = &createWindow{}
			t.creating[w.key] = cw
		}
		cw.inflight++
		return w
	}
	if w.uid == "" {
		return w // not tracked: nothing can be said about it
	}
	e := t.objects[w.uid]
	if e == nil {
		e = &entry{}
		t.objects[w.uid] = e
	}
	if e.flight == nil {
		e.flight = &flight{}
	}
	e.flight.writes++
	return w
}

// Done records the write's outcome: out is the API server's answer (nil
// for a delete), err its error. A failed write records nothing.
func (w Write) Done(out metav1.Object, err error) {
	t := w.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if w.op == Create {
		t.doneCreate(w, out, err)
		return
	}
	if w.uid == "" {
		return
	}
	e := t.objects[w.uid]
	if e == nil || e.flight == nil {
		return // cannot happen: Begin made both
	}
	f := e.flight
	switch {
	case err != nil || f.deleted:
		// Failed, or the cache already shows the object gone.
	case w.op == Delete:
		if !f.deleting {
			e.deleteSent = true
		}
	case w.op == Finalize || isGone(out):
		e.gone, e.replaced, e.latest = true, nil, ""
	case out != nil:
		e.wrote(w.rv, out.GetResourceVersion(), f.seen)
	}
	if err == nil {
		e.written = t.now()
	}
	if f.writes--; f.writes == 0 {
		e.flight = nil
	}
	t.dropIfEmpty(w.uid, e)
}

// wrote records a write that turned resourceVersion from into to; seen are
// the versions the cache showed while it was in flight.
func (e *entry) wrote(from, to string, seen []string) {
	if to == "" || e.gone {
		return
	}
	if to != from && slices.Contains(seen, to) {
		// The watch event was faster than the answer: the cache holds
		// our write already, and every copy older than it is gone.
		e.replaced, e.latest = nil, ""
		return
	}
	if e.latest != "" && e.latest != to {
		// Our previous answer is older than this one.
		e.replaced = appendNew(e.replaced, e.latest)
	}
	if from != "" {
		// A copy still at the version the write was computed from does
		// not show it, even when the API server answered with that same
		// version.
		e.replaced = appendNew(e.replaced, from)
	}
	if to != from {
		e.replaced = slices.DeleteFunc(e.replaced, func(rv string) bool { return rv == to })
	}
	e.latest = to
}

func appendNew(s []string, v string) []string {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}

func (t *Tracker) doneCreate(w Write, out metav1.Object, err error) {
	cw := t.creating[w.key]
	var seen []types.UID
	if cw != nil {
		seen = cw.seen
		if cw.inflight--; cw.inflight == 0 {
			delete(t.creating, w.key)
		}
	}
	// out is not read after an error: it may be a typed nil.
	if err != nil || out == nil {
		return
	}
	uid := out.GetUID()
	if uid == "" || slices.Contains(seen, uid) {
		return // untracked, or the cache has it already
	}
	e := t.objects[uid]
	if e == nil {
		e = &entry{}
		t.objects[uid] = e
	}
	e.created, e.written = out, t.now()
	t.created[keyOf(out)] = uid
}

// isGone reports whether a write's answer is an object being deleted with
// no finalizer left: the API server deleted it.
func isGone(out metav1.Object) bool {
	return out != nil && out.GetDeletionTimestamp() != nil && len(out.GetFinalizers()) == 0
}

func (t *Tracker) dropIfEmpty(uid types.UID, e *entry) {
	if e.empty() {
		delete(t.objects, uid)
	}
}

func (t *Tracker) forgetCreated(e *entry) {
	if e.created != nil {
		k := keyOf(e.created)
		if t.created[k] == e.created.GetUID() {
			delete(t.created, k)
		}
		e.created = nil
	}
}
