package cachelag

import (
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func meta(uid, rv string, opts ...func(*metav1.ObjectMeta)) *metav1.ObjectMeta {
	m := &metav1.ObjectMeta{Name: "obj-" + uid, Namespace: "ns", UID: types.UID(uid), ResourceVersion: rv}
	for _, o := range opts {
		o(m)
	}
	return m
}

func deleting(m *metav1.ObjectMeta) {
	now := metav1.Now()
	m.DeletionTimestamp = &now
}

func finalized(fs ...string) func(*metav1.ObjectMeta) {
	return func(m *metav1.ObjectMeta) { m.Finalizers = fs }
}

func write(t *Tracker, op Op, before, out metav1.Object) {
	t.Begin(op, before).Done(out, nil)
}

// The versions our writes replaced are stale, the answer and later ones
// are not and end the record.
func TestStaleUntilTheCacheCatchesUp(t *testing.T) {
	tr := New()
	write(tr, Update, meta("u", "1"), meta("u", "2"))
	write(tr, Update, meta("u", "2"), meta("u", "3"))
	for _, rv := range []string{"1", "2"} {
		if !tr.Stale(meta("u", rv)) {
			t.Errorf("copy at %s is not stale", rv)
		}
	}
	if tr.Stale(meta("other", "1")) {
		t.Error("an object we never wrote is stale")
	}
	if tr.Stale(meta("u", "3")) || tr.Len() != 0 {
		t.Errorf("our answer is stale or kept (%d entries)", tr.Len())
	}
	if tr.Stale(meta("u", "1")) {
		t.Error("the record survived a fresh copy")
	}
}

// Two writes computed from the same read copy (a patch and a status patch):
// the first answer is older than the second.
func TestTwoWritesFromOneCopy(t *testing.T) {
	tr := New()
	write(tr, Update, meta("u", "1"), meta("u", "2"))
	write(tr, Update, meta("u", "1"), meta("u", "3"))
	if !tr.Stale(meta("u", "1")) || !tr.Stale(meta("u", "2")) || tr.Stale(meta("u", "3")) {
		t.Error("want 1 and 2 stale, 3 fresh")
	}
}

// An answer at the version the write was computed from (the fake
// clientsets never move resourceVersions) still leaves that copy stale.
func TestAnswerAtTheSameVersion(t *testing.T) {
	tr := New()
	write(tr, Update, meta("u", "7"), meta("u", "7"))
	if !tr.Stale(meta("u", "7")) {
		t.Error("the read copy is not stale")
	}
}

func TestFailedWritesAreNotRemembered(t *testing.T) {
	tr := New()
	var typedNil *metav1.ObjectMeta
	tr.Begin(Update, meta("u", "1")).Done(typedNil, errors.New("conflict"))
	tr.Begin(Create, meta("", "")).Done(typedNil, errors.New("exists"))
	tr.Begin(Delete, meta("u", "1")).Done(nil, errors.New("not found"))
	if tr.Len() != 0 || tr.Stale(meta("u", "1")) || tr.DeleteSent("u") {
		t.Errorf("failed writes left %d entries", tr.Len())
	}
}

// Events end entries: an update shows our write, a delete ends everything.
func TestEventsEndEntries(t *testing.T) {
	tr := New()
	write(tr, Update, meta("u", "1"), meta("u", "2"))
	tr.Observe(meta("u", "1")) // a lagging event: the cache is still behind
	if tr.Len() != 1 {
		t.Fatal("a copy our write replaced ended the record")
	}
	tr.Observe(meta("u", "2"))
	if tr.Len() != 0 {
		t.Error("the event of our write did not end the record")
	}
	write(tr, Update, meta("u", "2"), meta("u", "3"))
	tr.Deleted(meta("u", "2"))
	if tr.Len() != 0 {
		t.Error("the delete event did not end the record")
	}
}

// Our write removed the last finalizer of an object being deleted: the API
// server deleted it, and every cached copy is outdated until the delete
// event, whatever its version.
func TestGoneByOurWrite(t *testing.T) {
	for name, tc := range map[string]struct {
		op  Op
		out *metav1.ObjectMeta
	}{
		"the writer says so":  {Finalize, meta("u", "9", deleting, finalized("x"))},
		"the answer shows it": {Update, meta("u", "9", deleting)},
	} {
		t.Run(name, func(t *testing.T) {
			tr := New()
			write(tr, tc.op, meta("u", "5", deleting, finalized("ours")), tc.out)
			for _, rv := range []string{"4", "5", "9"} {
				if !tr.Stale(meta("u", rv)) {
					t.Errorf("copy at %s not stale after our write deleted the object", rv)
				}
				tr.Observe(meta("u", rv, deleting, finalized("ours")))
			}
			tr.Deleted(meta("u", "5"))
			if tr.Len() != 0 || tr.Stale(meta("u", "5")) {
				t.Error("kept after the delete event")
			}
		})
	}
}

func TestCreatedUntilCached(t *testing.T) {
	tr := New()
	sent := &metav1.ObjectMeta{Namespace: "ns", Name: "c"}
	write(tr, Create, sent, meta("u", "1", func(m *metav1.ObjectMeta) { m.Name = "c" }))
	got, ok := Created[*metav1.ObjectMeta](tr, "ns", "c")
	if !ok || got.UID != "u" {
		t.Fatalf("Created = %v, %v", got, ok)
	}
	if _, ok := Created[*metav1.ObjectMeta](tr, "ns", "other"); ok {
		t.Error("found an object we never created")
	}
	if tr.Stale(got) {
		t.Error("the created object is stale")
	}
	if _, ok := Created[*metav1.ObjectMeta](tr, "ns", "c"); !ok {
		t.Error("a read (Stale) ended the created record; only the cache's events may")
	}
	tr.Observe(got)
	if _, ok := Created[*metav1.ObjectMeta](tr, "ns", "c"); ok || tr.Len() != 0 {
		t.Error("kept after the cache has it")
	}
}

// An object the informer never shows (created and deleted while its watch
// was broken, so the relist does not hold it) stands in for the cache only
// for MarkTTL: after that it is forgotten and leaves no entry.
func TestCreatedForgottenAfterTTL(t *testing.T) {
	tr := New()
	now := time.Unix(1000, 0)
	tr.now = func() time.Time { return now }
	sent := &metav1.ObjectMeta{Namespace: "ns", Name: "c"}
	write(tr, Create, sent, meta("u", "1", func(m *metav1.ObjectMeta) { m.Name = "c" }))
	now = now.Add(MarkTTL)
	if _, ok := Created[*metav1.ObjectMeta](tr, "ns", "c"); !ok {
		t.Fatal("forgotten before MarkTTL passed")
	}
	now = now.Add(time.Second)
	if _, ok := Created[*metav1.ObjectMeta](tr, "ns", "c"); ok {
		t.Fatal("a create the informer never showed is still found after MarkTTL")
	}
	if tr.Len() != 0 {
		t.Errorf("%d entries left after the created object expired", tr.Len())
	}
	// A delete sent to an object the informer then never shows deleted.
	obj := meta("d", "5")
	write(tr, Delete, obj, nil)
	if !tr.DeleteSent("d") || tr.Len() != 1 {
		t.Fatal("the sent delete is not remembered")
	}
	now = now.Add(MarkTTL + time.Second)
	if tr.Len() != 0 || tr.DeleteSent("d") {
		t.Errorf("a sent delete the informer never showed is remembered after MarkTTL (%d entries)", tr.Len())
	}
}

func TestDeleteSentUntilCachedDeleted(t *testing.T) {
	for name, event := range map[string]func(*Tracker){
		"deletionTimestamp": func(tr *Tracker) { tr.Observe(meta("u", "3", deleting)) },
		"delete event":      func(tr *Tracker) { tr.Deleted(meta("u", "2")) },
	} {
		t.Run(name, func(t *testing.T) {
			tr := New()
			write(tr, Delete, meta("u", "2"), nil)
			if !tr.DeleteSent("u") {
				t.Fatal("delete not remembered")
			}
			tr.Observe(meta("u", "2")) // a copy from before the delete
			if !tr.DeleteSent("u") {
				t.Fatal("an undeleted copy ended the record")
			}
			event(tr)
			if tr.DeleteSent("u") || tr.Len() != 0 {
				t.Error("kept after the cache shows the deletion")
			}
		})
	}
}

// The watch event of a write can arrive before the write's answer. What the
// cache showed meanwhile ends the record at once, or nothing would.
func TestEventsFasterThanTheAnswer(t *testing.T) {
	t.Run("update", func(t *testing.T) {
		tr := New()
		w := tr.Begin(Update, meta("u", "1"))
		tr.Observe(meta("u", "2"))
		w.Done(meta("u", "2"), nil)
		if tr.Len() != 0 || tr.Stale(meta("u", "1")) {
			t.Error("the answer already in the cache was remembered")
		}
	})
	t.Run("delete", func(t *testing.T) {
		tr := New()
		w := tr.Begin(Delete, meta("u", "1"))
		tr.Observe(meta("u", "2", deleting))
		w.Done(nil, nil)
		if tr.Len() != 0 || tr.DeleteSent("u") {
			t.Error("a delete the cache shows was remembered")
		}
	})
	t.Run("gone", func(t *testing.T) {
		tr := New()
		w := tr.Begin(Finalize, meta("u", "1", deleting))
		tr.Deleted(meta("u", "1"))
		w.Done(meta("u", "1", deleting), nil)
		if tr.Len() != 0 || tr.Stale(meta("u", "1")) {
			t.Error("an object whose delete event passed is remembered")
		}
	})
	t.Run("create", func(t *testing.T) {
		tr := New()
		sent := &metav1.ObjectMeta{Namespace: "ns", Name: "c"}
		out := meta("u", "1", func(m *metav1.ObjectMeta) { m.Name = "c" })
		w := tr.Begin(Create, sent)
		tr.Observe(out)
		w.Done(out, nil)
		if _, ok := Created[*metav1.ObjectMeta](tr, "ns", "c"); ok || tr.Len() != 0 {
			t.Error("a created object the cache has was remembered")
		}
	})
}

func TestUntrackedWithoutUID(t *testing.T) {
	tr := New()
	write(tr, Update, meta("", "1"), meta("", "2"))
	if tr.Len() != 0 || tr.Stale(meta("", "1")) {
		t.Error("an object without UID was tracked")
	}
}

func TestCaughtUpDelay(t *testing.T) {
	tr := New()
	now := time.Unix(1000, 0)
	tr.now = func() time.Time { return now }
	var got []time.Duration
	tr.SetCaughtUp(func(d time.Duration) { got = append(got, d) })
	obj := &metav1.ObjectMeta{Name: "c", UID: "u1", ResourceVersion: "1"}
	tr.Begin(Update, obj).Done(&metav1.ObjectMeta{Name: "c", UID: "u1", ResourceVersion: "2"}, nil)
	now = now.Add(40 * time.Millisecond)
	tr.Observe(&metav1.ObjectMeta{Name: "c", UID: "u1", ResourceVersion: "1"}) // older copy: not yet
	if len(got) != 0 {
		t.Fatalf("reported %v for a copy older than the write", got)
	}
	now = now.Add(10 * time.Millisecond)
	tr.Observe(&metav1.ObjectMeta{Name: "c", UID: "u1", ResourceVersion: "2"})
	if len(got) != 1 || got[0] != 50*time.Millisecond {
		t.Fatalf("got %v, want one delay of 50ms", got)
	}
	// An event faster than the answer is no wait.
	w := tr.Begin(Update, &metav1.ObjectMeta{Name: "c", UID: "u1", ResourceVersion: "2"})
	tr.Observe(&metav1.ObjectMeta{Name: "c", UID: "u1", ResourceVersion: "3"})
	w.Done(&metav1.ObjectMeta{Name: "c", UID: "u1", ResourceVersion: "3"}, nil)
	if len(got) != 1 {
		t.Fatalf("got %v after an event that beat the answer, want no new delay", got)
	}
	// A create is seen when the cache first has the object.
	tr.Begin(Create, &metav1.ObjectMeta{Name: "d"}).Done(&metav1.ObjectMeta{Name: "d", UID: "u2", ResourceVersion: "5"}, nil)
	now = now.Add(7 * time.Millisecond)
	tr.Observe(&metav1.ObjectMeta{Name: "d", UID: "u2", ResourceVersion: "5"})
	if len(got) != 2 || got[1] != 7*time.Millisecond {
		t.Fatalf("got %v, want the create seen after 7ms", got)
	}
}
