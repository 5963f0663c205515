package csiside

import (
	"sync"
	"time"
)

// delays is a per-content backoff that also holds back syncs woken early.
//
// The loop's own error backoff is bypassed whenever an informer event queues
// the key again, and every write we make is such an event. A content whose
// CreateSnapshot fails finally would otherwise loop hot: mark, call, fail,
// unmark, event, mark... So the states that call the driver outside deletion
// (create, readiness poll, pre-provisioned check) consult a delays value
// first and wait out the remaining time.
type delays struct {
	start, max time.Duration
	now        func() time.Time

	mu sync.Mutex
	m  map[string]delayState
}

type delayState struct {
	last  time.Duration
	until time.Time
}

func newDelays(start, max time.Duration, now func() time.Time) *delays {
	if max < start {
		max = start
	}
	return &delays{start: start, max: max, now: now, m: map[string]delayState{}}
}

// next doubles the delay of name (starting at start, capped at max), holds
// name back for that long and returns it.
func (d *delays) next(name string) time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.m[name]
	switch {
	case s.last == 0:
		s.last = d.start
	default:
		s.last = min(2*s.last, d.max)
	}
	s.until = d.now().Add(s.last)
	d.m[name] = s
	return s.last
}

// wait returns how long name is still held back, if at all.
func (d *delays) wait(name string) (time.Duration, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, ok := d.m[name]
	if !ok {
		return 0, false
	}
	left := s.until.Sub(d.now())
	return left, left > 0
}

// forget resets name: its next delay starts over.
func (d *delays) forget(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.m, name)
}

func (d *delays) len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.m)
}

// staleCopies remembers, per content, the resourceVersions that our own
// writes replaced. The informer delivers our write a moment after the API
// server answered it; a sync woken in between (by the event of our previous
// write, say) would see the old copy and write the same change again. Such a
// copy is recognised and skipped: the event of our last write follows.
//
// It never decides whether a backend snapshot may be deleted: that reads the
// informer's copy only (https://github.com/kubernetes-csi/external-snapshotter/issues/1446).
type staleCopies struct {
	mu sync.Mutex
	m  map[string]*written
}

// goneVersion stands for "deleted by our write" in wrote.
const goneVersion = "\x00gone"

type written struct {
	latest   string
	replaced map[string]bool
}

func newStaleCopies() *staleCopies { return &staleCopies{m: map[string]*written{}} }

// wrote records a write of name that turned resourceVersion from into to.
func (s *staleCopies) wrote(name, from, to string) {
	if to == "" || from == to {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.m[name]
	if w == nil {
		w = &written{replaced: map[string]bool{}}
		s.m[name] = w
	}
	if from != "" {
		w.replaced[from] = true
	}
	if w.latest != "" {
		// Our previous result is older than the answer to a later write.
		w.replaced[w.latest] = true
	}
	w.latest = to
	delete(w.replaced, to)
}

// stale reports whether rv is a copy of name that one of our writes already
// replaced. Any other version (our last write, or someone's later one) ends
// the record.
func (s *staleCopies) stale(name, rv string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.m[name]
	if w == nil {
		return false
	}
	if w.replaced[rv] {
		return true
	}
	delete(s.m, name)
	return false
}

func (s *staleCopies) forget(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, name)
}

func (s *staleCopies) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}
