package main

import (
	"context"
	"fmt"
	"sync"
)

// leaderGuard runs the work a Lease guards at most once, and lets the
// elector's owner wait for it to end before the Lease is released: a
// release while the work still runs would let the next leader act next to
// it (client-go's ReleaseOnCancel requires the guarded code to have
// stopped first).
type leaderGuard struct {
	mu       sync.Mutex
	stopping bool // no run may start any more
	running  bool
	done     chan leaderResult // run's end; buffered, sent once
}

// leaderResult is how run ended.
type leaderResult struct {
	err  error
	lost bool // the Lease was lost while running, not stopped by us
}

func newLeaderGuard() *leaderGuard { return &leaderGuard{done: make(chan leaderResult, 1)} }

// run is OnStartedLeading: run works until stop ends (SIGTERM) or leCtx ends
// (the Lease was lost), whichever comes first. It does nothing once wait
// has begun to stop, so the Lease is never acquired for work that would
// start after the release decision.
func (g *leaderGuard) run(stop, leCtx context.Context, run func(context.Context) error) {
	g.mu.Lock()
	if g.stopping || g.running {
		g.mu.Unlock()
		return
	}
	g.running = true
	g.mu.Unlock()
	workCtx, cancel := context.WithCancel(leCtx)
	defer cancel()
	defer context.AfterFunc(stop, cancel)()
	err := run(workCtx)
	g.done <- leaderResult{err: err, lost: leCtx.Err() != nil && stop.Err() == nil}
}

// wait returns when run has ended by itself or by losing the Lease (with
// run's error, or a lost-Lease error), or, once stop ends, as soon as run
// (if it had started) has returned. From then on no run starts.
func (g *leaderGuard) wait(stop context.Context, name string) error {
	var r leaderResult
	select {
	case r = <-g.done:
		g.mu.Lock()
		g.stopping = true
		g.mu.Unlock()
	case <-stop.Done():
		g.mu.Lock()
		g.stopping = true
		running := g.running
		g.mu.Unlock()
		if !running {
			return nil
		}
		r = <-g.done
	}
	if r.lost {
		if r.err != nil {
			return fmt.Errorf("lost the %s lease: %w", name, r.err)
		}
		return fmt.Errorf("lost the %s lease", name)
	}
	return r.err
}
