package faults

import (
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
