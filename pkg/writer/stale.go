package writer

import (
	gosync "sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// staleness remembers, per object, the resourceVersion each of our writes
// was computed from. An informer copy still at that version does not show
// our write yet: acting on it would repeat the write (or lose a conflict).
// The write's own watch event brings the fresh copy a moment later.
type staleness struct {
	mu   gosync.Mutex
	from map[types.UID]string
}

func (s *staleness) wrote(obj metav1.Object) {
	if obj.GetUID() == "" || obj.GetResourceVersion() == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.from == nil {
		s.from = map[types.UID]string{}
	}
	s.from[obj.GetUID()] = obj.GetResourceVersion()
}

// Stale reports whether obj is a cached copy that predates one of our
// writes to it. A newer copy clears the record.
func (w *Writer) Stale(obj metav1.Object) bool {
	s := &w.stale
	s.mu.Lock()
	defer s.mu.Unlock()
	rv, ok := s.from[obj.GetUID()]
	if !ok {
		return false
	}
	if rv == obj.GetResourceVersion() {
		return true
	}
	delete(s.from, obj.GetUID())
	return false
}

// Forget drops what is remembered of an object (it was deleted).
func (w *Writer) Forget(uid types.UID) {
	w.stale.mu.Lock()
	defer w.stale.mu.Unlock()
	delete(w.stale.from, uid)
}
