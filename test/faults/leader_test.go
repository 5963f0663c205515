package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// The chart's leader election (charts/snapkeeper/values.yaml,
// controller.leaderElection).
const (
	chartLeaseDuration = 15 * time.Second
	chartRenewDeadline = 10 * time.Second
	chartRetryPeriod   = 5 * time.Second
	binderLease        = "snapshot-controller-leader"
	// takeoverBound is the longest a standby can take over from a killed
	// holder, which cannot release its Lease. client-go's standby tries
	// every retry period times 1 to 2.2 (leaderelection.JitterFactor), so
	// up to 11 s apart, and counts the lease duration from the moment one
	// of its tries saw the holder's last renewal, not from the renewal:
	// that try may come up to one retry (11 s) after a renewal made just
	// before the kill. The Lease is then taken at the first try at least
	// the lease duration (15 s) later, one more retry at most: 15 s + 2 x
	// 11 s = 37 s after the kill. (TestLeaderKill measured 29.1 s on a
	// quiet machine against an earlier bound of lease duration + one retry.)
	takeoverBound = chartLeaseDuration + 2*(chartRetryPeriod*22/10)
	// takeoverSlack is what a loaded machine adds to takeoverBound: the
	// standby's Lease reads and writes, and this test's polling, wait for a
	// core. A takeover past takeoverBound is logged; past takeoverBound +
	// takeoverSlack it fails the test.
	takeoverSlack = 4 * time.Second
)

// TestLeaderKill runs two controller replicas (binder and CSI side in
// each) with leader election as the chart configures it, lets the first
// take both Leases, and SIGKILLs the leader while a workload creates and
// deletes snapshots; the standby must take the Leases over within
// takeoverBound of the kill and finish the work,
// with no snapshot cut twice. The killed replica comes back as the new
// standby; the full variant kills the leader of the moment three times.
func TestLeaderKill(t *testing.T) {
	rng := newRand(t)
	n, kills := shortOrFull(20, 150), shortOrFull(1, 3)
	s, w, r := replicaScenario(t, append(slowCalls(300*time.Millisecond, "", snapshotCalls...),
		slowCalls(1500*time.Millisecond, "snapshot-[0-3]*", "CreateSnapshot")...))

	wl := &workload{Creates: n + max(3, n/10), Deletes: n, Claims: 5}
	r.killLeadersDuring(t, rng, kills, wl, wl.claims(t, s), snapshotCalls)
	w.checkInvariants(t, 2*time.Minute)
	noPhantoms(t, r.leader)
	r.checkLeader(t, "at the end")
}

// killLeaders SIGKILLs the leader of the moment kills times, 2-5 s apart,
// while the workload runs, and returns how long the standby took to hold
// the binder's Lease each time; calls are the driver methods whose calls
// broken off by a kill are counted.
func (r *replicas) killLeaders(t *testing.T, rng *rand.Rand, kills int, wl *workload, calls []string) []time.Duration {
	t.Helper()
	var takeovers []time.Duration
	for i := range kills {
		time.Sleep(2*time.Second + time.Duration(rng.Int64N(int64(3*time.Second))))
		r.checkLeader(t, fmt.Sprintf("before kill %d", i+1))
		before := r.s.Drv.CallLog(t, 0).Last
		took := r.failover(t)
		takeovers = append(takeovers, took[0])
		t.Logf("kill %d of the leader at %d/%d operations (%d driver calls broke off): the standby holds %s after %v and %s after %v (lease duration %v)",
			i+1, wl.done.Load(), wl.ops(), canceledSince(t, r.s.Drv, before, calls), r.leases[0], took[0].Round(time.Millisecond),
			r.leases[1], took[1].Round(time.Millisecond), chartLeaseDuration)
	}
	return takeovers
}

var waitingLine = regexp.MustCompile(`Waiting for leadership.*lease="[^"]*/([^"]+)".*identity="([^"]+)"`)

// identityOf reads the holder identity controller c uses for Lease name
// from its log.
func identityOf(t *testing.T, c *framework.Component, name string) string {
	t.Helper()
	id, err := identityIn(c, name, 20*time.Second)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return id
}

// identityIn is identityOf for callers without a test (the production
// rig's supervisor).
func identityIn(c *framework.Component, name string, timeout time.Duration) (string, error) {
	var id string
	err := framework.Poll(timeout, c.Name+" logging its identity", func() (bool, error) {
		b, err := os.ReadFile(c.Proc.LogPath)
		if err != nil {
			return false, err
		}
		for _, m := range waitingLine.FindAllStringSubmatch(string(b), -1) {
			if m[1] == name {
				id = m[2]
				return true, nil
			}
		}
		return false, fmt.Errorf("no \"Waiting for leadership\" line for %s", name)
	})
	return id, err
}

// holders returns the holder identities of the Leases in the scenario's
// namespace ("" for a missing one).
func holders(s *framework.Scenario, leases []string) []string {
	out := make([]string, len(leases))
	for i, name := range leases {
		l, err := s.Env.Kube.CoordinationV1().Leases(s.NS).Get(context.Background(), name, metav1.GetOptions{})
		if err == nil && l.Spec.HolderIdentity != nil {
			out[i] = *l.Spec.HolderIdentity
		}
	}
	return out
}

// waitHolder polls the Leases every 20ms until ids[i] holds leases[i],
// and returns how long each took.
func waitHolder(t *testing.T, s *framework.Scenario, leases, ids []string, timeout time.Duration) []time.Duration {
	t.Helper()
	start := time.Now()
	took := make([]time.Duration, len(leases))
	done := 0
	for done < len(leases) {
		h := holders(s, leases)
		for i := range leases {
			if took[i] == 0 && h[i] == ids[i] {
				took[i] = time.Since(start)
				done++
			}
		}
		if time.Since(start) > timeout {
			t.Fatalf("Leases %v held by %v after %v, want %v", leases, h, timeout, ids)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return took
}
