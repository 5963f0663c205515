// Package workloop holds what the binder and the CSI side share: a work loop over
// a rate-limited queue of object keys. The loops themselves live in
// pkg/sync/binder and pkg/sync/csiside.
package workloop

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// Result tells the loop what to do after a successful sync.
type Result struct {
	// RequeueAfter > 0 re-checks the key later: "not ready yet" is not an
	// error and does not grow the error backoff.
	RequeueAfter time.Duration
}

// SyncFunc handles one key. An error re-queues the key with per-item
// exponential backoff.
type SyncFunc func(ctx context.Context, key string) (Result, error)

// Backoff is the per-item retry backoff of a loop.
type Backoff struct {
	Start, Max time.Duration
	// Waited, when set, is told each backoff a failed sync's key is put
	// off by, with the loop's name (a metric of time lost to retries).
	Waited func(loop string, d time.Duration)
}

// Loop is a named queue with workers.
type Loop struct {
	Name   string
	lanes  *lanes
	queue  workqueue.TypedRateLimitingInterface[string]
	rl     workqueue.TypedRateLimiter[string]
	sync   SyncFunc
	waited func(loop string, d time.Duration)
}

// NewLoop makes a loop; the queue's metrics carry its name.
func NewLoop(name string, b Backoff, sync SyncFunc) *Loop {
	if b.Start <= 0 {
		b.Start = 50 * time.Millisecond
	}
	if b.Max < b.Start {
		b.Max = b.Start
	}
	rl := workqueue.NewTypedItemExponentialFailureRateLimiter[string](b.Start, b.Max)
	// client-go's default queue stack with its names (its metrics), over
	// the lanes instead of the FIFO slice.
	ln := newLanes()
	base := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{Name: name, Queue: ln})
	delaying := workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[string]{Name: name, Queue: base})
	return &Loop{
		Name:  name,
		lanes: ln,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(rl,
			workqueue.TypedRateLimitingQueueConfig[string]{Name: name, DelayingQueue: delaying}),
		rl:     rl,
		sync:   sync,
		waited: b.Waited,
	}
}

// Add queues key now.
func (l *Loop) Add(key string) { l.queue.Add(key) }

// AddUrgent queues key now, ahead of every key not added urgently: for an
// object one write away from done, so that it does not wait behind a burst
// of new work.
func (l *Loop) AddUrgent(key string) {
	l.lanes.mark(key)
	l.queue.Add(key)
}

// AddAfter queues key after d.
func (l *Loop) AddAfter(key string, d time.Duration) { l.queue.AddAfter(key, d) }

// Len is the queue depth.
func (l *Loop) Len() int { return l.queue.Len() }

// Run starts workers and blocks until ctx is done.
func (l *Loop) Run(ctx context.Context, workers int) {
	defer l.queue.ShutDown()
	logger := klog.FromContext(ctx).WithValues("loop", l.Name)
	logger.V(1).Info("Starting workers", "count", workers)
	for range workers {
		go wait.UntilWithContext(ctx, func(ctx context.Context) {
			for l.next(klog.NewContext(ctx, logger)) {
			}
		}, time.Second)
	}
	<-ctx.Done()
}

func (l *Loop) next(ctx context.Context) bool {
	key, quit := l.queue.Get()
	if quit {
		return false
	}
	defer l.queue.Done(key)
	res, err := l.safeSync(ctx, key)
	switch {
	case err != nil:
		// What AddRateLimited does, with the backoff at hand.
		d := l.rl.When(key)
		klog.FromContext(ctx).V(2).Info("Sync failed, will retry", "key", key, "err", err, "after", d)
		if l.waited != nil {
			l.waited(l.Name, d)
		}
		l.queue.AddAfter(key, d)
	case res.RequeueAfter > 0:
		l.queue.Forget(key)
		l.queue.AddAfter(key, res.RequeueAfter)
	default:
		l.queue.Forget(key)
	}
	return true
}

// safeSync turns a panic in a sync function into an error, so one bad object
// cannot take the controller down.
func (l *Loop) safeSync(ctx context.Context, key string) (res Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			runtime.HandleError(fmt.Errorf("panic in %s sync of %q: %v", l.Name, key, r))
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return l.sync(ctx, key)
}
