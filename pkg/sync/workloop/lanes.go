package workloop

import "sync"

// lanes is the order in which a loop's queue hands out keys: FIFO, except
// that a key marked urgent (Loop.AddUrgent) goes before every other. An
// object one write away from done (a snapshot whose content just turned
// ready) then does not wait behind a burst of new work, whose writes make
// each pass slow while the API server is busy; without urgent keys it is
// client-go's FIFO.
//
// It implements workqueue.Queue: the work queue calls Push, Pop, Len and
// Touch under its own lock, and never holds a key twice. mark is called
// from event handlers, outside that lock, so the urgent set has a lock of
// its own.
type lanes struct {
	fast, slow []string
	// where tells which lane holds a key now; an entry of the other lane
	// (a key moved to the fast lane by Touch) is stale and skipped.
	where map[string]bool // true: fast

	mu     sync.Mutex
	urgent map[string]struct{}
}

func newLanes() *lanes {
	return &lanes{where: map[string]bool{}, urgent: map[string]struct{}{}}
}

// mark makes key urgent until it is handed out.
func (l *lanes) mark(key string) {
	l.mu.Lock()
	l.urgent[key] = struct{}{}
	l.mu.Unlock()
}

func (l *lanes) isUrgent(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.urgent[key]
	return ok
}

// Push queues a key that is not queued.
func (l *lanes) Push(key string) {
	fast := l.isUrgent(key)
	l.where[key] = fast
	if fast {
		l.fast = append(l.fast, key)
	} else {
		l.slow = append(l.slow, key)
	}
}

// Touch is told of a key added again while it waits: an urgent one moves
// to the fast lane.
func (l *lanes) Touch(key string) {
	if fast, queued := l.where[key]; queued && !fast && l.isUrgent(key) {
		l.where[key] = true
		l.fast = append(l.fast, key)
	}
}

func (l *lanes) Len() int { return len(l.where) }

// Pop hands out the first key of the fast lane, else of the slow one. The
// work queue calls it only when Len() > 0.
func (l *lanes) Pop() string {
	for {
		var key string
		var fromFast bool
		if len(l.fast) > 0 {
			key, l.fast, fromFast = l.fast[0], l.fast[1:], true
		} else {
			key, l.slow = l.slow[0], l.slow[1:]
		}
		if fast, queued := l.where[key]; !queued || fast != fromFast {
			continue // stale: the key moved lanes, or was handed out
		}
		delete(l.where, key)
		l.mu.Lock()
		delete(l.urgent, key)
		l.mu.Unlock()
		return key
	}
}
