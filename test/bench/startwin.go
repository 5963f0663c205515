package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// startWindow is a system's start over objects that exist already (a
// restart, or a cold start over seeded snapshots): how long until its
// processes serve and until they are idle, and what they did meanwhile.
type startWindow struct {
	// Serving: ours /readyz (every informer synced); the community pair
	// has no readiness endpoint: its metrics answer, plus 2 s.
	Serving time.Duration
	// Idle: from the start until the last API write or busy sample of the
	// controllers (CPU above idleCPUShare of the interval), at least
	// Serving; the window then ran on for -quiet (and at least minWindow).
	Idle   time.Duration
	Window time.Duration    // the whole counted window
	Writes writeCounts      // API writes in the window (the benchmark writes nothing)
	Calls  map[string]int64 // CSI calls in the window
	CPU    time.Duration    // the new processes, from their start to the window's end
	RSSkB  int64            // at the end of the window
	HWMkB  int64            // their peak
}

// idleCPUShare: a sample interval in which the controllers used less CPU
// than this share of one core counts as idle (timers, lease renewals).
const idleCPUShare = 0.05

// startMeasured starts sys on b over what b holds and measures the start:
// from the start of its processes until no API write happened and their
// CPU stayed idle for quiet, and until at least minWindow passed.
func (b *bed) startMeasured(ctx context.Context, sys *system, quiet, minWindow, timeout time.Duration) (startWindow, error) {
	var w startWindow
	// A first start on a control plane applies the system's RBAC and mints
	// its tokens: that is set-up, not the system's writes.
	for _, role := range sys.roles() {
		if _, err := kubeconfigFor(b.env, role); err != nil {
			return w, err
		}
	}
	before, err := b.api.Writes(ctx)
	if err != nil {
		return w, err
	}
	own := b.cl.own.Snapshot()
	callsBefore, err := csiCalls(ctx, b.drv)
	if err != nil {
		return w, err
	}
	start := time.Now()
	if w.Serving, err = b.startSystem(sys, startOpts{readyTimeout: timeout}); err != nil {
		return w, err
	}
	last, busy := before, start.Add(w.Serving)
	var cpu time.Duration
	interval := max(quiet/4, 100*time.Millisecond)
	deadline := start.Add(timeout)
	for {
		select {
		case <-ctx.Done():
			return w, ctx.Err()
		case <-time.After(interval):
		}
		cur, err := b.api.Writes(ctx)
		if err != nil {
			return w, err
		}
		st, err := readProcs(b.run.pids())
		if err != nil {
			return w, err
		}
		if cur.Total(nil) != last.Total(nil) || float64(st.CPU-cpu) > idleCPUShare*float64(interval) {
			busy = time.Now()
		}
		last, cpu = cur, st.CPU
		if time.Since(busy) >= quiet && time.Since(start) >= minWindow {
			break
		}
		if err := b.exited(); err != nil {
			return w, err
		}
		if time.Now().After(deadline) {
			return w, fmt.Errorf("%s still busy (writing or computing) %s after its start", sys.ID, timeout)
		}
	}
	w.Idle, w.Window = busy.Sub(start), time.Since(start)
	w.Writes = last.Sub(before).Sub(b.cl.own.Snapshot().Sub(own))
	callsAfter, err := csiCalls(ctx, b.drv)
	if err != nil {
		return w, err
	}
	w.Calls = framework.DiffCounts(callsAfter, callsBefore)
	st, err := readProcs(b.run.pids())
	if err != nil {
		return w, err
	}
	w.CPU, w.RSSkB, w.HWMkB = st.CPU, st.RSSkB, st.HWMkB
	return w, nil
}

// progress logs every tenth of a long operation.
type progress struct {
	tag, what string
	n         int64
	done      atomic.Int64
	start     time.Time
}

func newProgress(tag, what string, n int) *progress {
	return &progress{tag: tag, what: what, n: int64(n), start: time.Now()}
}

func (p *progress) add() {
	d := p.done.Add(1)
	if p.n >= 10000 && d%(p.n/10) == 0 {
		logf("[%s] %s %d of %d (%s)", p.tag, p.what, d, p.n, time.Since(p.start).Round(time.Second))
	}
}
