package faults

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"
)

// TestGroupLeaderKill is TestLeaderKill for VolumeGroupSnapshots: two
// replicas (binder and CSI side each, group snapshots on) with the chart's
// leader election, the leader SIGKILLed while groups are created and
// deleted against the driver faults of TestGroupKills; the standby must
// take both Leases over within takeoverBound (+ slack) and finish every
// group, with the group invariants of TestGroupKills: no group cut twice
// across the takeover, nothing left of a deleted group.
func TestGroupLeaderKill(t *testing.T) {
	rng := newRand(t)
	sz := runSizes()
	creates, deletes, kills := 8, 6, 1
	if sz.full {
		creates, deletes, kills = 40, 34, 3
	}
	s, w, g := groupScenario(t, creates, deletes)
	r := newReplicas(t, s, w)

	apps := g.claims(t, rng, 3)
	wl := g.workload(creates, deletes)
	wl.Pause = time.Duration(kills) * 20 * time.Second / time.Duration(wl.ops())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	loadDone := wl.start(ctx, w, child(rng), slices.Sorted(maps.Keys(apps)))
	takeovers := r.killLeaders(t, rng, kills, wl, groupCalls)
	if err := <-loadDone; err != nil {
		t.Fatalf("workload: %v", err)
	}
	t.Logf("workload of %d operations in %v; takeovers %v", wl.ops(), time.Since(start).Round(time.Millisecond), takeovers)
	g.checkInvariants(t, apps, 3*time.Minute)
	w.checkInvariants(t, 2*time.Minute)
	noPhantoms(t, r.leader)
	r.checkLeader(t, "at the end")
	logGroupCalls(t, s, start)
}
