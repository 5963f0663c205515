package faults

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/snapkeeper/snapkeeper/test/framework/faultproxy"
)

// TestProdLeaderStall cuts the leader off its API server while it runs: its
// connection stalls (nothing forwarded, sockets open, bytes held and
// delivered later, as TCP does across a partition) mid-workload, the
// standby on the other API server takes both Leases over, and a lease
// duration later the stall heals and whatever the old leader had sent
// arrives. The old leader must not act after it lost its Leases: no write
// of its seat accepted after the takeover (audit logs), no snapshot cut
// twice, nothing lost or leaked. Short: one stall; full: four, alternating
// seats.
func TestProdLeaderStall(t *testing.T) {
	eachPair(t, func(t *testing.T, pair string) {
		rng := newRand(t)
		n, stalls := shortOrFull(16, 120), shortOrFull(1, 4)
		g := newProdRig(t, rng, pair, prodSlowDriver)
		wl := g.workload(n+3, n, 4, time.Duration(stalls)*50*time.Second)
		claims := wl.claims(t, g.s)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		loadDone := wl.start(ctx, g.w, child(rng), claims)

		type window struct {
			seat        int
			from, until time.Time
		}
		var windows []window
		for i := range stalls {
			time.Sleep(2*time.Second + time.Duration(rng.Int64N(int64(4*time.Second))))
			old, _ := g.waitLeader(t, -1, takeoverBound+takeoverSlack)
			stalled := time.Now()
			g.fault(fmt.Sprintf("stall %d: seat %d (the leader) cut off its API server at %d/%d operations", i+1, old, wl.done.Load(), wl.ops()),
				g.api[old], faultproxy.Faults{Stall: true})
			seat, at := g.waitLeader(t, old, takeoverBound+takeoverSlack+10*time.Second)
			g.rec.add("takeover", fmt.Sprintf("seat %d holds both Leases %v after the stall", seat, at.Sub(stalled).Round(time.Millisecond)))
			for j := range windows {
				if windows[j].seat == seat && windows[j].until.IsZero() {
					// Leading again from its first Lease on: its binder
					// writes before both Leases are seen held.
					windows[j].until = at
					if acquired := g.acquired(seat); !acquired.IsZero() && acquired.Before(at) {
						windows[j].until = acquired
					}
				}
			}
			windows = append(windows, window{seat: old, from: at})
			time.Sleep(chartLeaseDuration)
			g.fault(fmt.Sprintf("stall %d healed", i+1), g.api[old], faultproxy.Faults{})
		}
		if err := <-loadDone; err != nil {
			t.Fatalf("workload: %v", err)
		}
		g.rec.add("workload", fmt.Sprintf("%d operations done", wl.ops()))
		g.w.checkInvariants(t, 2*time.Minute)
		g.recordRepeats(t)
		for _, w := range windows {
			g.checkNoLateWrites(t, w.seat, w.from, w.until)
		}
	})
}
