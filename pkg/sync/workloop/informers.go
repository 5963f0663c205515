package workloop

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/snapkeeper/snapkeeper/pkg/cachelag"
)

// Handler routes one informer's events to a component's key router: fn for
// every event, gone before it for a delete (nil: nothing more).
type Handler struct {
	Informer cache.SharedIndexInformer
	Fn, Gone func(obj any)
}

// Informers are the informers a component routes events from, and whether
// they have synced.
type Informers struct {
	synced []cache.InformerSynced
}

// Add registers each handler with its informer. The tracker hears of every
// event before the key is queued, so the sync it wakes sees what the cache
// shows (a delete's tombstone unwrapped).
func (in *Informers) Add(lag *cachelag.Tracker, handlers ...Handler) error {
	for _, h := range handlers {
		fn, gone := h.Fn, h.Gone
		observe := func(obj any) {
			if m, ok := obj.(metav1.Object); ok {
				lag.Observe(m)
			}
			fn(obj)
		}
		if _, err := h.Informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    observe,
			UpdateFunc: func(_, obj any) { observe(obj) },
			DeleteFunc: func(obj any) {
				if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					obj = d.Obj
				}
				if m, ok := obj.(metav1.Object); ok {
					lag.Deleted(m)
				}
				if gone != nil {
					gone(obj)
				}
				fn(obj)
			},
		}); err != nil {
			return err
		}
		in.synced = append(in.synced, h.Informer.HasSynced)
	}
	return nil
}

// AddSynced counts one more informer without a handler.
func (in *Informers) AddSynced(s cache.InformerSynced) { in.synced = append(in.synced, s) }

// Synced is every informer's HasSynced, for cache.WaitForCacheSync.
func (in *Informers) Synced() []cache.InformerSynced { return in.synced }

// HasSynced reports whether every informer has synced.
func (in *Informers) HasSynced() bool {
	for _, s := range in.synced {
		if !s() {
			return false
		}
	}
	return true
}
