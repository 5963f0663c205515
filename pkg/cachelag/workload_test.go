package cachelag

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// This file drives snapshots through two trackers the way the binder and the
// CSI side use theirs: every write goes Begin → API server → Done, every
// read of the informer cache asks Stale first, and every informer event is
// fed to Observe or Deleted, delivered late and at random moments (also
// while a write is in flight, before its answer).

// simAPI is an API server of bare metadata objects, keyed by name (the
// names of the kinds differ: snap-, pvc-, content-).
type simAPI struct {
	rv      int
	objects map[string]*metav1.ObjectMeta
	// watchers receive a copy of every change.
	watchers []*simComponent
}

type simEvent struct {
	deleted bool
	obj     *metav1.ObjectMeta
}

// simComponent is a controller: its tracker and its informer cache.
type simComponent struct {
	name    string
	tracker *Tracker
	watches func(name string) bool
	cache   map[string]*metav1.ObjectMeta
	queue   []simEvent
	// written is the resourceVersion of this component's last write of
	// each object, and gone the objects its writes deleted.
	written map[types.UID]int
	gone    map[types.UID]bool
}

func (a *simAPI) notify(ev simEvent) {
	for _, c := range a.watchers {
		if c.watches(ev.obj.Name) {
			c.queue = append(c.queue, simEvent{ev.deleted, ev.obj.DeepCopy()})
		}
	}
}

func (a *simAPI) create(obj *metav1.ObjectMeta) *metav1.ObjectMeta {
	a.rv++
	obj = obj.DeepCopy()
	obj.UID = types.UID("uid-" + obj.Name)
	obj.ResourceVersion = strconv.Itoa(a.rv)
	a.objects[obj.Name] = obj
	a.notify(simEvent{obj: obj})
	return obj.DeepCopy()
}

// update applies change to the stored object and answers with the result;
// an object being deleted that loses its last finalizer is deleted.
func (a *simAPI) update(name string, change func(*metav1.ObjectMeta)) *metav1.ObjectMeta {
	obj := a.objects[name]
	if obj == nil {
		panic("update of a missing object " + name)
	}
	a.rv++
	change(obj)
	obj.ResourceVersion = strconv.Itoa(a.rv)
	if obj.DeletionTimestamp != nil && len(obj.Finalizers) == 0 {
		delete(a.objects, name)
		a.notify(simEvent{deleted: true, obj: obj})
	} else {
		a.notify(simEvent{obj: obj})
	}
	return obj.DeepCopy()
}

// delete marks the object deleted (all objects here carry finalizers).
func (a *simAPI) delete(name string) {
	a.update(name, func(m *metav1.ObjectMeta) {
		now := metav1.Now()
		m.DeletionTimestamp = &now
	})
}

// deliver hands the component's oldest pending event to its cache and its
// tracker, as an informer's event handler does.
func (c *simComponent) deliver() bool {
	if len(c.queue) == 0 {
		return false
	}
	ev := c.queue[0]
	c.queue = c.queue[1:]
	if ev.deleted {
		delete(c.cache, ev.obj.Name)
		c.tracker.Deleted(ev.obj)
	} else {
		c.cache[ev.obj.Name] = ev.obj
		c.tracker.Observe(ev.obj)
	}
	return true
}

type simulation struct {
	t      *testing.T
	rng    *rand.Rand
	api    *simAPI
	binder *simComponent
	csi    *simComponent
	// outdated counts reads judged fresh although older than one of the
	// reader's writes (someone else's version came in between: the
	// tracker then lets the controller act, as the controllers tolerate).
	outdated int
}

// read returns the cached copy of name, or nil when it is not cached or
// Stale. It checks that Stale never holds back a copy that shows the
// component's writes.
func (s *simulation) read(c *simComponent, name string) *metav1.ObjectMeta {
	obj := c.cache[name]
	if obj == nil {
		return nil
	}
	rv, _ := strconv.Atoi(obj.ResourceVersion)
	outdated := c.gone[obj.UID] || rv < c.written[obj.UID]
	stale := c.tracker.Stale(obj)
	if stale && !outdated {
		s.t.Errorf("%s: copy of %s at %s held back as stale, but it shows our last write (%d)", c.name, name, obj.ResourceVersion, c.written[obj.UID])
	}
	if !stale && outdated {
		s.outdated++
	}
	if stale {
		return nil
	}
	return obj
}

// write sends one write through c's tracker; events may be delivered while
// it is in flight, before its answer.
func (s *simulation) write(c *simComponent, op Op, before *metav1.ObjectMeta, send func() *metav1.ObjectMeta) *metav1.ObjectMeta {
	w := c.tracker.Begin(op, before)
	out := send()
	switch s.rng.IntN(4) {
	case 0: // the watch is faster than the answer
		for c.deliver() {
		}
	case 1:
		s.deliverSome()
	}
	if op == Delete {
		w.Done(nil, nil)
		return nil
	}
	w.Done(out, nil)
	if out != nil {
		rv, _ := strconv.Atoi(out.ResourceVersion)
		c.written[out.UID] = rv
		if op == Finalize {
			c.gone[out.UID] = true
		}
	}
	return out
}

func (s *simulation) deliverSome() {
	for range s.rng.IntN(4) {
		if s.rng.IntN(2) == 0 {
			s.binder.deliver()
		} else {
			s.csi.deliver()
		}
	}
}

func withFinalizer(f string) func(*metav1.ObjectMeta) {
	return func(m *metav1.ObjectMeta) { m.Finalizers = append(slices.Clone(m.Finalizers), f) }
}

func withoutFinalizer(f string) func(*metav1.ObjectMeta) {
	return func(m *metav1.ObjectMeta) {
		m.Finalizers = slices.DeleteFunc(slices.Clone(m.Finalizers), func(s string) bool { return s == f })
	}
}

func annotate(k string) func(*metav1.ObjectMeta) {
	return func(m *metav1.ObjectMeta) {
		a := map[string]string{}
		for key, v := range m.Annotations {
			a[key] = v
		}
		a[k] = "yes"
		m.Annotations = a
	}
}

func unannotate(k string) func(*metav1.ObjectMeta) {
	return func(m *metav1.ObjectMeta) {
		a := map[string]string{}
		for key, v := range m.Annotations {
			if key != k {
				a[key] = v
			}
		}
		m.Annotations = a
	}
}

// snapshotTrip is one snapshot's way from creation to deletion, one step
// at a time; a step returns false while it has to wait.
type snapshotTrip struct {
	i    int
	step int
}

func (p *snapshotTrip) names() (snap, pvc, content string) {
	n := strconv.Itoa(p.i)
	return "snap-" + n, "pvc-" + n, "content-" + n
}

func (s *simulation) advance(p *snapshotTrip) bool {
	snapName, pvcName, contentName := p.names()
	b, c, api := s.binder, s.csi, s.api
	switch p.step {
	case 0: // binder: the snapshot's finalizer
		vs := s.read(b, snapName)
		if vs == nil {
			return false
		}
		s.write(b, Update, vs, func() *metav1.ObjectMeta { return api.update(snapName, withFinalizer("bound")) })
	case 1: // binder: the claim's finalizer
		pvc := s.read(b, pvcName)
		if pvc == nil {
			return false
		}
		s.write(b, Update, pvc, func() *metav1.ObjectMeta { return api.update(pvcName, withFinalizer("as-source")) })
	case 2: // binder: the content, born with its finalizer
		sent := &metav1.ObjectMeta{Name: contentName, Finalizers: []string{"content-bound"}}
		s.write(b, Create, sent, func() *metav1.ObjectMeta { return api.create(sent) })
	case 3: // binder: early status, bound to the content (cached or just created)
		vs := s.read(b, snapName)
		if vs == nil {
			return false
		}
		if b.cache[contentName] == nil {
			if _, ok := Created[*metav1.ObjectMeta](b.tracker, "", contentName); !ok {
				s.t.Errorf("content %s neither cached nor remembered as created", contentName)
			}
		}
		s.write(b, Update, vs, func() *metav1.ObjectMeta { return api.update(snapName, annotate("bound-to")) })
	case 4: // CSI side: mark, cut, status, unmark: each write from the previous answer
		content := s.read(c, contentName)
		if content == nil {
			return false
		}
		out := s.write(c, Update, content, func() *metav1.ObjectMeta { return api.update(contentName, annotate("being-created")) })
		out = s.write(c, Update, out, func() *metav1.ObjectMeta { return api.update(contentName, annotate("ready")) })
		s.write(c, Update, out, func() *metav1.ObjectMeta { return api.update(contentName, unannotate("being-created")) })
	case 5: // binder: the snapshot's status mirrors the ready content
		content := s.read(b, contentName)
		vs := s.read(b, snapName)
		if content == nil || vs == nil || content.Annotations["ready"] == "" {
			return false
		}
		s.write(b, Update, vs, func() *metav1.ObjectMeta { return api.update(snapName, annotate("ready")) })
	case 6: // binder: the claim may go
		pvc := s.read(b, pvcName)
		if pvc == nil {
			return false
		}
		s.write(b, Update, pvc, func() *metav1.ObjectMeta { return api.update(pvcName, withoutFinalizer("as-source")) })
	case 7: // the user deletes the snapshot
		api.delete(snapName)
	case 8: // binder: mark the content and delete it
		vs := s.read(b, snapName)
		content := s.read(b, contentName)
		if vs == nil || vs.DeletionTimestamp == nil || content == nil {
			return false
		}
		s.write(b, Update, content, func() *metav1.ObjectMeta { return api.update(contentName, annotate("being-deleted")) })
		s.write(b, Delete, content, func() *metav1.ObjectMeta { api.delete(contentName); return nil })
	case 9: // binder re-syncs meanwhile: never a second delete
		if content := s.read(b, contentName); content != nil && content.DeletionTimestamp == nil && !b.tracker.DeleteSent(content.UID) {
			s.t.Errorf("binder would delete %s again (copy at %s)", contentName, content.ResourceVersion)
		}
		// CSI side: the deletion is authorised on its cached copy only.
		content := s.read(c, contentName)
		if content == nil || content.DeletionTimestamp == nil || content.Annotations["being-deleted"] == "" {
			return false
		}
		s.write(c, Finalize, content, func() *metav1.ObjectMeta { return api.update(contentName, withoutFinalizer("content-bound")) })
	case 10: // CSI side re-syncs meanwhile: a cached copy never deletes twice
		if content := c.cache[contentName]; content != nil && !c.tracker.Stale(content) {
			s.t.Errorf("CSI side would delete the backend snapshot of %s again", contentName)
		}
		// binder: the content is gone; the snapshot is released.
		vs := s.read(b, snapName)
		if vs == nil || b.cache[contentName] != nil {
			return false
		}
		s.write(b, Finalize, vs, func() *metav1.ObjectMeta { return api.update(snapName, withoutFinalizer("bound")) })
	default:
		return false
	}
	p.step++
	return true
}

func TestThousandSnapshotsLeaveNothingBehind(t *testing.T) {
	const n = 1000
	api := &simAPI{objects: map[string]*metav1.ObjectMeta{}}
	newComponent := func(name string, watches func(string) bool) *simComponent {
		c := &simComponent{name: name, tracker: New(), watches: watches, cache: map[string]*metav1.ObjectMeta{},
			written: map[types.UID]int{}, gone: map[types.UID]bool{}}
		api.watchers = append(api.watchers, c)
		return c
	}
	s := &simulation{
		t:      t,
		rng:    rand.New(rand.NewPCG(1, 2)),
		api:    api,
		binder: newComponent("binder", func(string) bool { return true }),
		csi:    newComponent("csi", func(name string) bool { return strings.HasPrefix(name, "content-") }),
	}
	active := make([]*snapshotTrip, n)
	for i := range n {
		active[i] = &snapshotTrip{i: i}
		api.create(&metav1.ObjectMeta{Namespace: "ns", Name: "pvc-" + strconv.Itoa(i), Finalizers: []string{"pvc-protection"}})
		api.create(&metav1.ObjectMeta{Namespace: "ns", Name: "snap-" + strconv.Itoa(i)})
	}
	const finalStep = 11
	for round := 0; len(active) > 0; round++ {
		if round > 200*n {
			t.Fatalf("stuck: %d snapshots unfinished, e.g. %d at step %d", len(active), active[0].i, active[0].step)
		}
		switch s.rng.IntN(3) {
		case 0:
			s.deliverSome()
		default:
			k := s.rng.IntN(len(active))
			p := active[k]
			progressed := s.advance(p)
			if p.step == finalStep {
				active[k] = active[len(active)-1]
				active = active[:len(active)-1]
			}
			if !progressed && len(s.binder.queue)+len(s.csi.queue) == 0 {
				// Nothing left to deliver, yet the step must wait:
				// only a tracker that wrongly holds a copy back does that.
				t.Fatalf("snapshot %d waits at step %d with every event delivered", p.i, p.step)
			}
		}
	}
	for s.binder.deliver() || s.csi.deliver() {
	}
	for _, c := range []*simComponent{s.binder, s.csi} {
		if l := c.tracker.Len(); l != 0 {
			for uid, e := range c.tracker.objects {
				t.Errorf("%s keeps %s: %+v (in flight: %v)", c.name, uid, *e, e.flight)
				break
			}
			t.Errorf("%s tracker holds %d entries after the workload, want 0", c.name, l)
		}
		if len(c.tracker.created) != 0 || len(c.tracker.creating) != 0 {
			t.Errorf("%s tracker: %d created, %d creates in flight remembered", c.name, len(c.tracker.created), len(c.tracker.creating))
		}
	}
	if left := len(api.objects); left != n {
		t.Errorf("%d objects left on the API server, want the %d claims", left, n)
	}
	t.Logf("%d writes; %d reads judged fresh although another component's version came between our read and our answer", api.rv, s.outdated)
}
