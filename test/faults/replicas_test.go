package faults

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

// replicas are two controller processes (binder and CSI side in each)
// with leader election as the chart configures it: the leader holds both
// Leases, the standby waits. failover SIGKILLs the leader, waits for the
// standby to take both Leases over and starts the killed one again as the
// new standby.
type replicas struct {
	s      *framework.Scenario
	w      *world
	args   []string
	leases []string

	leader, standby     *framework.Component
	leaderID, standbyID []string
}

// replicaScenario is a scenario of driver faults without a controller,
// its world, and two replicas in it.
func replicaScenario(t *testing.T, faults []framework.FaultRule) (*framework.Scenario, *world, *replicas) {
	t.Helper()
	s := framework.NewScenario(t, framework.ScenarioOptions{DriverPrefix: "faults", NoController: true, Faults: faults})
	w := newWorld(s)
	return s, w, newReplicas(t, s, w)
}

func newReplicas(t *testing.T, s *framework.Scenario, w *world) *replicas {
	t.Helper()
	r := &replicas{s: s, w: w, leases: []string{binderLease, snapshot.CSILeaseName(s.Drv.Name)}}
	r.args = append(slices.Clone(s.Args), "--leader-election=true", "--leader-election-namespace="+s.NS,
		"--leader-election-lease-duration="+chartLeaseDuration.String(),
		"--leader-election-renew-deadline="+chartRenewDeadline.String(),
		"--leader-election-retry-period="+chartRetryPeriod.String(), "--retry-interval-max=2s")
	r.leader, r.leaderID = r.start(t)
	waitHolder(t, s, r.leases, r.leaderID, 30*time.Second)
	r.standby, r.standbyID = r.start(t)
	return r
}

// start runs one more replica; each Lease has a holder identity of its own.
func (r *replicas) start(t *testing.T) (*framework.Component, []string) {
	t.Helper()
	c := r.s.StartController(t, r.args...)
	r.w.addController(c)
	return c, []string{identityOf(t, c, r.leases[0]), identityOf(t, c, r.leases[1])}
}

// killLeadersDuring runs wl on the claims (or applications) and meanwhile
// SIGKILLs the leader kills times (killLeaders), the workload paced to
// last 20 s per kill; it returns when the workload is done, with the time
// it started.
func (r *replicas) killLeadersDuring(t *testing.T, rng *rand.Rand, kills int, wl *workload, claims, calls []string) time.Time {
	t.Helper()
	wl.Pause = time.Duration(kills) * 20 * time.Second / time.Duration(wl.ops())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	loadDone := wl.start(ctx, r.w, child(rng), claims)
	takeovers := r.killLeaders(t, rng, kills, wl, calls)
	if err := <-loadDone; err != nil {
		t.Fatalf("workload: %v", err)
	}
	t.Logf("workload of %d operations in %v; takeovers %v", wl.ops(), time.Since(start).Round(time.Millisecond), takeovers)
	return start
}

// checkLeader fails the test unless the leader holds both Leases.
func (r *replicas) checkLeader(t *testing.T, when string) {
	t.Helper()
	if h := holders(r.s, r.leases); !slices.Equal(h, r.leaderID) {
		t.Fatalf("%s the Leases are held by %v, not by the leader %s", when, h, r.leaderID)
	}
}

// failover SIGKILLs the leader and returns how long the standby took to
// hold each Lease; the killed replica comes back as the standby.
func (r *replicas) failover(t *testing.T) []time.Duration {
	t.Helper()
	kill(t, r.leader)
	took := waitHolder(t, r.s, r.leases, r.standbyID, takeoverBound+takeoverSlack+10*time.Second)
	for j, d := range took {
		switch {
		case d > takeoverBound+takeoverSlack:
			t.Errorf("Lease %s taken over %v after the kill, more than lease duration %v + 2 x 2.2 x retry period %v + %v of scheduling slack",
				r.leases[j], d.Round(time.Millisecond), chartLeaseDuration, chartRetryPeriod, takeoverSlack)
		case d > takeoverBound:
			t.Logf("Lease %s taken over %v after the kill, past lease duration %v + 2 x 2.2 x retry period %v (within the %v of scheduling slack)",
				r.leases[j], d.Round(time.Millisecond), chartLeaseDuration, chartRetryPeriod, takeoverSlack)
		}
	}
	r.leader, r.leaderID = r.standby, r.standbyID
	r.standby, r.standbyID = r.start(t)
	return took
}
