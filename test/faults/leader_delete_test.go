package faults

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/snapkeeper/snapkeeper/pkg/csi/csitest"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

// TestLeaderKillDuringDeletes aims the leader kill at deletions: each
// round creates a few snapshots right after a takeover (the new leader
// still working through its backlog), lets some become ready while others
// are being cut, then deletes all of them and SIGKILLs the leader in the
// middle of the deletes. A snapshot must never go while its Delete content
// (and the backend snapshot) stays: the new leader has to finish every
// deletion it inherits. It was written to hunt the content left behind in
// one full run of TestLeaderKill (docs/history/runs.md, Findings); it has
// not reproduced it.
func TestLeaderKillDuringDeletes(t *testing.T) {
	if !runSizes().full {
		t.Skip("full sizes only (make test-faults): TestLeaderKill covers a leader kill in the short run")
	}
	rng := newRand(t)
	rounds, perRound := 8, 6
	slow := []framework.FaultRule{
		{Method: "CreateSnapshot", Latency: csitest.Duration(300 * time.Millisecond)},
		{Method: "DeleteSnapshot", Latency: csitest.Duration(200 * time.Millisecond)},
		{Method: "CreateSnapshot", Match: "snapshot-[0-7]*", Latency: csitest.Duration(1500 * time.Millisecond)},
	}
	s, w, r := replicaScenario(t, slow)
	claims := (&workload{Claims: 3}).claims(t, s)
	ctx := context.Background()

	for round := range rounds {
		var names []string
		for i := range perRound {
			name := fmt.Sprintf("snap-%02d-%d", round, i)
			if err := w.create(ctx, name, claims[rng.IntN(len(claims))]); err != nil {
				t.Fatal(err)
			}
			names = append(names, name)
			time.Sleep(time.Duration(rng.Int64N(int64(300 * time.Millisecond))))
		}
		time.Sleep(time.Duration(rng.Int64N(int64(3 * time.Second))))
		r.checkLeader(t, fmt.Sprintf("before kill %d", round+1))
		killAt := rng.IntN(perRound + 1)
		var took []time.Duration
		for i, name := range names {
			if i == killAt {
				took = r.failover(t)
			}
			if err := w.remove(ctx, name); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Duration(rng.Int64N(int64(150 * time.Millisecond))))
		}
		if took == nil {
			took = r.failover(t)
		}
		t.Logf("round %d: leader killed after %d of %d deletes; the standby held the Leases after %v and %v",
			round+1, killAt, perRound, took[0].Round(time.Millisecond), took[1].Round(time.Millisecond))
	}
	w.checkInvariants(t, 2*time.Minute)
	noPhantoms(t, r.leader)
}
