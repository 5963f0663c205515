// Package schedules is the fault suite of SnapshotSchedules (docs/faults.md):
// the schedule component's leader killed at a scheduled minute, the API
// server killed while retention deletes, and the component stopped past
// scheduled times, on the cluster-like plane (kube-controller-manager, the
// real csi-provisioner, the mock CSI driver). Each fault must leave exactly
// one snapshot per claim per scheduled time that ran, and no backend
// snapshot that no content points at. The scenarios stop and start the
// cluster-wide schedule component, so they run one after the other; each
// waits for the clock's minutes, so the package takes about eight minutes,
// mostly idle (make test runs it beside the other suites).
package schedules

import (
	"context"
	"fmt"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/snapkeeper/snapkeeper/pkg/apis/snapkeeper/v1alpha1"
	"github.com/snapkeeper/snapkeeper/pkg/schedule"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

func TestMain(m *testing.M) { framework.MainWith(m, framework.ControlPlaneOptions{Cluster: true}) }

const schedulesLease = "snapkeeper-schedules-leader"

// newScenario is a driver with its provisioner and default class, and a
// controller running the binder and the CSI side; the schedule component
// is started by each test.
func newScenario(t *testing.T) *framework.Scenario {
	t.Helper()
	s := framework.NewScenario(t, framework.ScenarioOptions{DriverPrefix: "schedfault", DefaultClass: true})
	if s.Prov == nil {
		t.Fatal("the cluster-like plane gave the scenario no csi-provisioner")
	}
	return s
}

// startSchedules starts a schedule component with a short leader election
// whose Lease lives in the scenario's namespace.
func startSchedules(t *testing.T, s *framework.Scenario) *framework.Component {
	t.Helper()
	return s.StartController(t, "--components=schedules", "--leader-election=true", "--leader-election-namespace="+s.NS,
		"--leader-election-lease-duration=4s", "--leader-election-renew-deadline=3s", "--leader-election-retry-period=1s")
}

// holder is the holder of the schedule component's Lease, "" for none.
func holder(s *framework.Scenario) string {
	l, err := s.Env.Kube.CoordinationV1().Leases(s.NS).Get(context.Background(), schedulesLease, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// untilMinute sleeps until off after the next minute boundary, which it
// returns in UTC (as schedule.ScheduledTime reads them: map keys compare
// the location too).
func untilMinute(off time.Duration) time.Time {
	next := time.Now().UTC().Truncate(time.Minute).Add(time.Minute)
	time.Sleep(time.Until(next.Add(off)))
	return next
}

// perTime counts, per claim, the snapshots of each scheduled time.
func perTime(t *testing.T, by map[string][]snapv1.VolumeSnapshot) map[string]map[time.Time]int {
	t.Helper()
	out := map[string]map[time.Time]int{}
	for claim, l := range by {
		out[claim] = map[time.Time]int{}
		for _, vs := range l {
			tm, ok := schedule.ScheduledTime(vs.Annotations)
			if !ok {
				t.Fatalf("snapshot %s has no %s annotation", vs.Name, schedule.AnnScheduledTime)
			}
			out[claim][tm.UTC()]++
		}
	}
	return out
}

// oncePerTime fails on a claim with two snapshots of one scheduled time.
func oncePerTime(t *testing.T, by map[string][]snapv1.VolumeSnapshot) {
	t.Helper()
	for claim, times := range perTime(t, by) {
		for tm, n := range times {
			if n != 1 {
				t.Errorf("claim %s has %d snapshots of %s", claim, n, tm.Format(time.RFC3339))
			}
		}
	}
}

// TestLeaderKilledAtScheduledMinute: two replicas of the schedule
// component; the leader is SIGKILLed within half a second of a scheduled
// minute, while it creates that minute's snapshots. The standby takes the
// Lease, runs that minute (its names find what the dead leader created)
// and the next one: one snapshot per claim per minute, none missed.
func TestLeaderKilledAtScheduledMinute(t *testing.T) {
	s := newScenario(t)
	claims := []string{"db-0", "db-1", "db-2", "db-3", "db-4", "db-5"}
	s.Env.ProvisionLabelled(t, s.Prov, s.NS, "db", claims...)
	leader := startSchedules(t, s)
	framework.Eventually(t, 30*time.Second, "the first replica leads", func() (bool, error) { return holder(s) != "", nil })
	first := holder(s)
	startSchedules(t, s)
	sched := s.Env.Schedules(t).Schedules(s.NS)
	if _, err := sched.Create(context.Background(), framework.EveryMinute(s.NS, "db", "db", v1alpha1.RetentionPolicy{KeepLast: ptr.To[int32](10)}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	off := time.Duration(time.Now().UnixNano()%500) * time.Millisecond
	minute := untilMinute(off)
	leader.Kill(t)
	t.Logf("killed the leader %s at %s + %v", first, minute.Format(time.RFC3339), off)
	framework.Eventually(t, 30*time.Second, "the standby leads", func() (bool, error) {
		h := holder(s)
		return h != "" && h != first, fmt.Errorf("holder %q", h)
	})
	next := minute.Add(time.Minute)
	framework.Eventually(t, 2*time.Minute, "both minutes cut for every claim, all ready", func() (bool, error) {
		by := s.Env.ScheduledSnapshots(t, s.NS, "db")
		times := perTime(t, by)
		for _, c := range claims {
			if times[c][minute] < 1 || times[c][next] < 1 {
				return false, fmt.Errorf("claim %s: %v", c, framework.SnapshotNames(by[c]))
			}
			for _, vs := range by[c] {
				if !framework.IsReady(&vs) {
					return false, fmt.Errorf("%s not ready", vs.Name)
				}
			}
		}
		return true, nil
	})
	oncePerTime(t, s.Env.ScheduledSnapshots(t, s.NS, "db"))
	st, err := sched.Get(context.Background(), "db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Status.MissedRuns != 0 {
		t.Errorf("missed runs %d, want 0: the standby runs the minute the leader died in", st.Status.MissedRuns)
	}
	s.BackendMatchesContents(t)
}

// TestAPIServerKilledDuringRetention: keepLast 1 over ten claims; the API
// server is SIGKILLed a moment after a scheduled minute, while the new
// snapshots turn ready and retention deletes the old ones, and started
// again 3 s later. By the next minute each claim keeps exactly its newest
// snapshot, no scheduled time was cut twice, nothing is stuck being deleted
// and the driver holds exactly the snapshots the contents point at.
func TestAPIServerKilledDuringRetention(t *testing.T) {
	s := newScenario(t)
	var claims []string
	for i := range 10 {
		claims = append(claims, fmt.Sprintf("app-%d", i))
	}
	s.Env.ProvisionLabelled(t, s.Prov, s.NS, "app", claims...)
	comp := startSchedules(t, s)
	sched := s.Env.Schedules(t).Schedules(s.NS)
	if _, err := sched.Create(context.Background(), framework.EveryMinute(s.NS, "app", "app", v1alpha1.RetentionPolicy{KeepLast: ptr.To[int32](1)}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 2*time.Minute, "a first ready snapshot of every claim", func() (bool, error) {
		by := s.Env.ScheduledSnapshots(t, s.NS, "app")
		for _, c := range claims {
			if len(by[c]) == 0 || !framework.IsReady(&by[c][0]) {
				return false, fmt.Errorf("claim %s: %v", c, framework.SnapshotNames(by[c]))
			}
		}
		return true, nil
	})
	minute := untilMinute(800 * time.Millisecond)
	if err := s.Env.KillAPIServer(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := s.Env.StartAPIServerAgain(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed kube-apiserver at %s + 800ms, serving again after %v", minute.Format(time.RFC3339), time.Since(minute).Round(time.Millisecond))
	// An outage longer than the renew deadline (3 s here) loses the Lease,
	// and the component exits, as the community's do: the kubelet would
	// restart it, so the test does.
	time.Sleep(5 * time.Second)
	if comp.Proc.Exited() {
		t.Log("the schedule component lost its Lease during the outage and exited; restarting it as the kubelet would")
		startSchedules(t, s)
	}
	next := minute.Add(time.Minute)
	framework.Eventually(t, 2*time.Minute, "each claim keeps exactly its newest ready snapshot", func() (bool, error) {
		by := s.Env.ScheduledSnapshots(t, s.NS, "app")
		for _, c := range claims {
			l := by[c]
			if len(l) != 1 || !framework.IsReady(&l[0]) || l[0].DeletionTimestamp != nil {
				return false, fmt.Errorf("claim %s: %v", c, framework.SnapshotNames(l))
			}
			if tm, _ := schedule.ScheduledTime(l[0].Annotations); tm.Before(next) {
				return false, fmt.Errorf("claim %s keeps %s, not the %s run's yet", c, l[0].Name, next.Format("15:04"))
			}
		}
		return true, nil
	})
	oncePerTime(t, s.Env.ScheduledSnapshots(t, s.NS, "app"))
	s.BackendMatchesContents(t)
}

// TestStoppedPastScheduledTimes: the schedule component stops right after
// a run and stays down past two scheduled minutes and 15 s more. Started
// again, a schedule with startingDeadlineSeconds 3600 runs the most recent
// missed minute once and counts the other one missed; one with 10 s runs
// neither (both missed); both then run the next minute as usual.
func TestStoppedPastScheduledTimes(t *testing.T) {
	s := newScenario(t)
	s.Env.ProvisionLabelled(t, s.Prov, s.NS, "catchup", "c")
	s.Env.ProvisionLabelled(t, s.Prov, s.NS, "strict", "s")
	comp := startSchedules(t, s)
	sched := s.Env.Schedules(t).Schedules(s.NS)
	for app, deadline := range map[string]int64{"catchup": 3600, "strict": 10} {
		sc := framework.EveryMinute(s.NS, app, app, v1alpha1.RetentionPolicy{KeepLast: ptr.To[int32](5)})
		sc.Spec.StartingDeadlineSeconds = ptr.To(deadline)
		if _, err := sched.Create(context.Background(), sc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	first := untilMinute(5 * time.Second)
	framework.Eventually(t, 30*time.Second, "both schedules ran once", func() (bool, error) {
		return len(s.Env.ScheduledSnapshots(t, s.NS, "catchup")["c"]) == 1 && len(s.Env.ScheduledSnapshots(t, s.NS, "strict")["s"]) == 1, nil
	})
	comp.Proc.Stop(10 * time.Second)
	t.Logf("stopped the schedule component after the %s run", first.Format("15:04"))
	third := first.Add(2 * time.Minute)
	time.Sleep(time.Until(third.Add(15 * time.Second)))
	startSchedules(t, s)
	t.Logf("started it again at %s + 15s", third.Format("15:04"))
	status := func(name string) v1alpha1.SnapshotScheduleStatus {
		sc, err := sched.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return sc.Status
	}
	framework.Eventually(t, 30*time.Second, "the catch-up run, and the missed times counted", func() (bool, error) {
		c, st := status("catchup"), status("strict")
		ok := c.LastScheduleTime != nil && c.LastScheduleTime.Time.Equal(third) && c.MissedRuns == 1 && st.MissedRuns == 2
		return ok, fmt.Errorf("catchup %+v, strict %+v", c, st)
	})
	times := perTime(t, s.Env.ScheduledSnapshots(t, s.NS, "catchup"))["c"]
	if times[third] != 1 || times[first.Add(time.Minute)] != 0 {
		t.Errorf("catchup cut %v, want %s and %s only", times, first.Format("15:04"), third.Format("15:04"))
	}
	if n := len(s.Env.ScheduledSnapshots(t, s.NS, "strict")["s"]); n != 1 {
		t.Errorf("strict has %d snapshots before its next minute, want its first only", n)
	}
	fourth := third.Add(time.Minute)
	framework.Eventually(t, 90*time.Second, "both run the next minute", func() (bool, error) {
		c := perTime(t, s.Env.ScheduledSnapshots(t, s.NS, "catchup"))["c"][fourth]
		st := perTime(t, s.Env.ScheduledSnapshots(t, s.NS, "strict"))["s"][fourth]
		return c == 1 && st == 1, fmt.Errorf("%s: catchup %d, strict %d", fourth.Format("15:04"), c, st)
	})
	s.BackendMatchesContents(t)
}
