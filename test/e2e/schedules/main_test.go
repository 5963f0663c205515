// Package schedules runs SnapshotSchedules for real time on the cluster-like
// plane: kube-controller-manager, the real csi-provisioner next to the mock
// CSI driver (which keeps its snapshots' data), the webhook over TLS, and
// our controller with the binder, the CSI side and the schedule component
// in one process. Schedules fire every minute, so the scenarios run in
// parallel, each in a namespace of its own, and the package takes about
// three minutes whatever their number. docs/schedules.md.
package schedules

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/snapkeeper/snapkeeper/pkg/apis/snapkeeper/v1alpha1"
	"github.com/snapkeeper/snapkeeper/pkg/schedclient"
	"github.com/snapkeeper/snapkeeper/pkg/schedule"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

func TestMain(m *testing.M) { framework.MainWith(m, framework.ControlPlaneOptions{Cluster: true}) }

// world is the package's one driver, provisioner, webhook and controller;
// each scenario brings its own namespace.
type world struct {
	*framework.Scenario
	sched *schedclient.Client
}

func newWorld(t *testing.T) *world {
	t.Helper()
	s := framework.NewScenario(t, framework.ScenarioOptions{DriverPrefix: "sched", DefaultClass: true, GroupClass: true,
		ControllerArgs: []string{"--components=binder,csi,schedules"}})
	if s.Prov == nil {
		t.Fatal("the cluster-like plane gave the scenario no csi-provisioner")
	}
	s.Env.StartWebhook(t)
	return &world{Scenario: s, sched: s.Env.Schedules(t)}
}

// claims provisions bound claims in ns with label app=<app>.
func (w *world) claims(t *testing.T, ns, app string, names ...string) {
	t.Helper()
	w.Env.ProvisionLabelled(t, w.Prov, ns, app, names...)
}

func (w *world) create(t *testing.T, s *v1alpha1.SnapshotSchedule) {
	t.Helper()
	if _, err := w.sched.Schedules(s.Namespace).Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create schedule %s/%s: %v", s.Namespace, s.Name, err)
	}
}

func (w *world) get(t *testing.T, ns, name string) *v1alpha1.SnapshotSchedule {
	t.Helper()
	s, err := w.sched.Schedules(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (w *world) scheduled(t *testing.T, ns, name string) map[string][]snapv1.VolumeSnapshot {
	t.Helper()
	return w.Env.ScheduledSnapshots(t, ns, name)
}

func ready(vs *snapv1.VolumeSnapshot) bool { return framework.IsReady(vs) }

func names(l []snapv1.VolumeSnapshot) []string { return framework.SnapshotNames(l) }

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestSchedules runs each scenario in parallel against one controller.
func TestSchedules(t *testing.T) {
	w := newWorld(t)
	t.Run("group", func(t *testing.T) {
		t.Run("keep last two of three claims", func(t *testing.T) { t.Parallel(); keepLast(t, w) })
		t.Run("group mode", func(t *testing.T) { t.Parallel(); groupMode(t, w) })
		t.Run("restore keeps its source", func(t *testing.T) { t.Parallel(); restoreKeepsSource(t, w) })
		t.Run("suspend", func(t *testing.T) { t.Parallel(); suspended(t, w) })
		t.Run("webhook denials", func(t *testing.T) { t.Parallel(); denials(t, w) })
	})
	w.BackendMatchesContents(t)
}

// keepLast: three claims, every minute, keepLast 2. After the third run's
// snapshots are ready, each claim has exactly its two newest, both ready;
// a snapshot of the same claim made by hand is never touched.
func keepLast(t *testing.T, w *world) {
	ns := w.Env.Namespace(t)
	w.claims(t, ns, "db", "db-0", "db-1", "db-2")
	manual := w.Env.Snap.SnapshotV1().VolumeSnapshots(ns)
	if _, err := manual.Create(context.Background(), &snapv1.VolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: "by-hand", Namespace: ns},
		Spec:       snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{PersistentVolumeClaimName: ptr.To("db-0")}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.create(t, framework.EveryMinute(ns, "hourly", "db", v1alpha1.RetentionPolicy{KeepLast: ptr.To[int32](2)}))
	runs := map[string]bool{}
	framework.Eventually(t, 4*time.Minute, "three runs, two ready snapshots per claim", func() (bool, error) {
		by := w.scheduled(t, ns, "hourly")
		for _, l := range by {
			for _, vs := range l {
				if tm, ok := schedule.ScheduledTime(vs.Annotations); ok {
					runs[tm.Format(time.RFC3339)] = true
				}
			}
		}
		if len(runs) < 3 {
			return false, fmt.Errorf("runs seen %d", len(runs))
		}
		for _, c := range []string{"db-0", "db-1", "db-2"} {
			l := by[c]
			if len(l) != 2 || !ready(&l[0]) || !ready(&l[1]) {
				return false, fmt.Errorf("claim %s: %v", c, names(l))
			}
		}
		return len(by) == 3, fmt.Errorf("series %d", len(by))
	})
	if _, err := manual.Get(context.Background(), "by-hand", metav1.GetOptions{}); err != nil {
		t.Fatalf("the snapshot made by hand: %v", err)
	}
	s := w.get(t, ns, "hourly")
	cond := meta.FindStatusCondition(s.Status.Conditions, "Ready")
	if cond == nil || cond.Status != metav1.ConditionTrue || s.Status.Kept < 6 || s.Status.LastScheduleTime == nil ||
		s.Status.NextScheduleTime == nil || s.Status.LastSuccessfulTime == nil || len(s.Status.Claims) != 3 {
		t.Fatalf("status: %s", jsonOf(s.Status))
	}
	t.Logf("status after %d runs: %s", len(runs), jsonOf(s.Status))
}

// groupMode: one VolumeGroupSnapshot of both claims per run; keepLast 1
// leaves the newest ready group.
func groupMode(t *testing.T, w *world) {
	ns := w.Env.Namespace(t)
	w.claims(t, ns, "pair", "a", "b")
	s := framework.EveryMinute(ns, "crash-consistent", "pair", v1alpha1.RetentionPolicy{KeepLast: ptr.To[int32](1)})
	s.Spec.GroupSnapshot = &v1alpha1.GroupSnapshotTemplate{VolumeGroupSnapshotClassName: &w.GroupClass}
	w.create(t, s)
	var first string
	framework.Eventually(t, 4*time.Minute, "a second ready group, the first deleted", func() (bool, error) {
		list, err := w.Env.Snap.GroupsnapshotV1().VolumeGroupSnapshots(ns).List(context.Background(), metav1.ListOptions{LabelSelector: schedule.LabelSchedule + "=crash-consistent"})
		if err != nil {
			return false, err
		}
		var readyNames []string
		for _, g := range list.Items {
			if groupReady(&g) {
				readyNames = append(readyNames, g.Name)
			}
		}
		if first == "" && len(readyNames) > 0 {
			first = readyNames[0]
		}
		return len(list.Items) == 1 && len(readyNames) == 1 && readyNames[0] != first, fmt.Errorf("groups %d, ready %v (first %q)", len(list.Items), readyNames, first)
	})
}

func groupReady(g *groupv1.VolumeGroupSnapshot) bool {
	return g.Status != nil && g.Status.ReadyToUse != nil && *g.Status.ReadyToUse
}

// restoreKeepsSource: a claim restoring from a scheduled snapshot that is
// not bound yet keeps that snapshot past its retention; once the claim is
// gone, retention deletes it.
func restoreKeepsSource(t *testing.T, w *world) {
	ns := w.Env.Namespace(t)
	w.claims(t, ns, "app", "data")
	w.create(t, framework.EveryMinute(ns, "sched", "app", v1alpha1.RetentionPolicy{KeepLast: ptr.To[int32](1)}))
	var held string
	framework.Eventually(t, 2*time.Minute, "a ready scheduled snapshot", func() (bool, error) {
		l := w.scheduled(t, ns, "sched")["data"]
		for _, vs := range l {
			if ready(&vs) {
				held = vs.Name
				return true, nil
			}
		}
		return false, fmt.Errorf("snapshots %v", names(l))
	})
	// A class no provisioner serves keeps the claim Pending: a restore
	// that has not copied the data yet.
	w.Env.CreateClaim(t, ns, "restore", framework.ClaimOptions{StorageClass: "never-provisioned", RestoreFrom: held})
	framework.Eventually(t, 3*time.Minute, "a newer ready snapshot", func() (bool, error) {
		l := w.scheduled(t, ns, "sched")["data"]
		for _, vs := range l {
			if vs.Name > held && ready(&vs) {
				return true, nil
			}
		}
		return false, fmt.Errorf("snapshots %v", names(l))
	})
	// Retention has had its chance: the schedule syncs on the newer one's
	// readiness. Give it a few seconds more, then check.
	time.Sleep(5 * time.Second)
	if _, err := w.Env.Snap.SnapshotV1().VolumeSnapshots(ns).Get(context.Background(), held, metav1.GetOptions{}); err != nil {
		t.Fatalf("snapshot %s, source of a claim not bound yet: %v", held, err)
	}
	if err := w.Env.Kube.CoreV1().PersistentVolumeClaims(ns).Delete(context.Background(), "restore", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 60*time.Second, "the held snapshot deleted once the claim is gone", func() (bool, error) {
		_, err := w.Env.Snap.SnapshotV1().VolumeSnapshots(ns).Get(context.Background(), held, metav1.GetOptions{})
		return apierrors.IsNotFound(err), err
	})
}

// suspended: a suspended schedule cuts nothing and says so.
func suspended(t *testing.T, w *world) {
	ns := w.Env.Namespace(t)
	w.claims(t, ns, "app", "data")
	s := framework.EveryMinute(ns, "paused", "app", v1alpha1.RetentionPolicy{KeepLast: ptr.To[int32](1)})
	s.Spec.Suspend = ptr.To(true)
	w.create(t, s)
	framework.Eventually(t, 30*time.Second, "Ready: Suspended", func() (bool, error) {
		cond := meta.FindStatusCondition(w.get(t, ns, "paused").Status.Conditions, "Ready")
		return cond != nil && cond.Reason == "Suspended", fmt.Errorf("%+v", cond)
	})
	time.Sleep(65 * time.Second) // a scheduled minute passes
	if by := w.scheduled(t, ns, "paused"); len(by) != 0 {
		t.Fatalf("a suspended schedule cut %v", by)
	}
	if st := w.get(t, ns, "paused").Status; st.NextScheduleTime != nil || st.LastScheduleTime != nil {
		t.Fatalf("status of a suspended schedule: %s", jsonOf(st))
	}
}

// denials: the webhook refuses what cannot work, naming the field.
func denials(t *testing.T, w *world) {
	ns := w.Env.Namespace(t)
	keep := v1alpha1.RetentionPolicy{KeepLast: ptr.To[int32](1)}
	for name, tc := range map[string]struct {
		mutate func(*v1alpha1.SnapshotSchedule)
		want   []string
	}{
		"a cron line that does not parse": {func(s *v1alpha1.SnapshotSchedule) { s.Spec.Schedule = "every hour" }, []string{"spec.schedule"}},
		"a time zone that does not exist": {func(s *v1alpha1.SnapshotSchedule) { s.Spec.TimeZone = ptr.To("Mars/Olympus") }, []string{"spec.timeZone"}},
		"no retention":                    {func(s *v1alpha1.SnapshotSchedule) { s.Spec.Retention = v1alpha1.RetentionPolicy{} }, []string{"spec.retention"}},
		"a selector that cannot match": {func(s *v1alpha1.SnapshotSchedule) {
			s.Spec.ClaimSelector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpDoesNotExist}}
		}, []string{"spec.claimSelector"}},
		"a class that does not exist": {func(s *v1alpha1.SnapshotSchedule) {
			s.Spec.SnapshotTemplate.VolumeSnapshotClassName = ptr.To("no-such-class")
		}, []string{"spec.snapshotTemplate.volumeSnapshotClassName"}},
		"a group class that does not exist": {func(s *v1alpha1.SnapshotSchedule) {
			s.Spec.GroupSnapshot = &v1alpha1.GroupSnapshotTemplate{VolumeGroupSnapshotClassName: ptr.To("no-such-group-class")}
		}, []string{"spec.groupSnapshot.volumeGroupSnapshotClassName"}},
	} {
		s := framework.EveryMinute(ns, "bad", "db", keep)
		tc.mutate(s)
		_, err := w.sched.Schedules(ns).Create(context.Background(), s, metav1.CreateOptions{})
		if err == nil || !apierrors.IsInvalid(err) && !strings.Contains(err.Error(), "denied") {
			t.Errorf("%s: created, or not denied: %v", name, err)
			continue
		}
		if !framework.ContainsAll(err.Error(), tc.want) {
			t.Errorf("%s: the denial does not name %v: %v", name, tc.want, err)
		}
		t.Logf("%s: %v", name, err)
	}
}
