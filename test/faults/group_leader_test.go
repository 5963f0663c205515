package faults

import (
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
	creates, deletes, kills := shortOrFull(8, 40), shortOrFull(6, 34), shortOrFull(1, 3)
	s, w, g := groupScenario(t, creates, deletes)
	r := newReplicas(t, s, w)

	apps := g.claims(t, rng, 3)
	start := r.killLeadersDuring(t, rng, kills, g.workload(creates, deletes), slices.Sorted(maps.Keys(apps)), groupCalls)
	g.checkInvariants(t, apps, 3*time.Minute)
	w.checkInvariants(t, 2*time.Minute)
	noPhantoms(t, r.leader)
	r.checkLeader(t, "at the end")
	logGroupCalls(t, s, start)
}
