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
