package faults

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

// groupCalls are the driver calls that cut and delete group snapshots.
var groupCalls = []string{"CreateVolumeGroupSnapshot", "DeleteVolumeGroupSnapshot"}

// TestGroupKills is TestControllerKills for VolumeGroupSnapshots: a
// workload creates groups of the claims of one application (2 or 3 claims
// by a label selector) and deletes some, ready or not, while the
// controller (binder and CSI side, group snapshots on) is SIGKILLed at
// random moments, half of them right after the driver answered a group
// cut or delete, and started again. The driver takes 400 ms for each
// group call, a third of the groups 1.5 s more; for other groups it loses
// replies after cutting or deleting, refuses calls (Unavailable), or says
// "not ready" at first. Invariants: every live
// group ready with one ready member snapshot per claim; every deleted
// group gone with its group content, its member snapshots and their
// contents; the driver holds exactly the groups the group contents point
// at and the snapshots the contents point at; no group name cut twice;
// and the single-snapshot invariants (nothing Terminating, no panic).
func TestGroupKills(t *testing.T) {
	rng := newRand(t)
	creates, deletes, kills := shortOrFull(12, 70), shortOrFull(9, 60), shortOrFull(3, 10)
	s, w, g := groupScenario(t, creates, deletes)
	k := startKiller(t, s, w, map[string][]string{"controller": append(slices.Clone(s.Args), "--retry-interval-max=2s")}, groupCalls...)

	apps := g.claims(t, rng, 4)
	wl := g.workload(creates, deletes)
	wl.Pause = time.Duration(kills) * 4 * time.Second / time.Duration(wl.ops())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	k.run(t, rng, kills, wl, wl.start(ctx, w, child(rng), slices.Sorted(maps.Keys(apps))))
	timeout := settleTimeout()
	g.checkInvariants(t, apps, timeout)
	w.checkInvariants(t, timeout)
	logGroupCalls(t, s, start)
}

// groupFaults are the driver's faults of the group scenarios: every group
// call slowed, and for groups picked by the first digit of their UID,
// lost replies, refused calls and "not ready" answers.
func groupFaults(creates, deletes int) []framework.FaultRule {
	return slices.Concat(slowCalls(400*time.Millisecond, "", groupCalls...),
		slowCalls(1500*time.Millisecond, "groupsnapshot-[0-4]*", groupCalls...), []framework.FaultRule{
			// Replies lost after the driver cut or deleted the group.
			{Method: groupCalls[0], Match: "groupsnapshot-[5-7]*", Code: "DeadlineExceeded", AfterCall: true, Times: max(2, creates/5), Message: "reply lost"},
			{Method: groupCalls[1], Match: "groupsnapshot-[5-7]*", Code: "DeadlineExceeded", AfterCall: true, Times: max(2, deletes/5), Message: "reply lost"},
			// Calls refused before they reach the backend.
			{Method: groupCalls[0], Match: "groupsnapshot-[89a]*", Code: "Unavailable", Times: max(2, creates/5), Message: "driver busy"},
			{Method: groupCalls[1], Match: "groupsnapshot-[89a]*", Code: "Unavailable", Times: max(2, deletes/5), Message: "driver busy"},
			// Groups cut but not ready at first.
			{Method: groupCalls[0], Match: "groupsnapshot-[b-d]*", NotReady: 1},
			{Method: "GetVolumeGroupSnapshot", Match: "groupsnapshot-[b-d]*", NotReady: 2},
		})
}

// logGroupCalls logs the driver's group calls of a scenario begun at start.
func logGroupCalls(t *testing.T, s *framework.Scenario, start time.Time) {
	t.Helper()
	calls := s.Drv.Calls(t)
	t.Logf("driver calls: CreateVolumeGroupSnapshot %d (%d replies lost, %d refused), DeleteVolumeGroupSnapshot %d (%d lost, %d refused), GetVolumeGroupSnapshot %d; total run %v",
		calls.Count(groupCalls[0], ""), calls.Count(groupCalls[0], "DeadlineExceeded"), calls.Count(groupCalls[0], "Unavailable"),
		calls.Count(groupCalls[1], ""), calls.Count(groupCalls[1], "DeadlineExceeded"), calls.Count(groupCalls[1], "Unavailable"),
		calls.Count("GetVolumeGroupSnapshot", ""), time.Since(start).Round(time.Millisecond))
}

// groupLedger is what a group scenario created and deleted.
type groupLedger struct {
	s      *framework.Scenario
	ledger // every group created and deleted
}

// groupScenario sets up a group scenario: a driver with groupFaults, no
// VolumeSnapshotClass, the driver's default VolumeGroupSnapshotClass
// (deletion policy Delete), and no controller: the test starts them with
// s.Args, which turn group snapshots on.
func groupScenario(t *testing.T, creates, deletes int) (*framework.Scenario, *world, *groupLedger) {
	t.Helper()
	s := framework.NewScenario(t, framework.ScenarioOptions{DriverPrefix: "gfaults", NoClass: true, NoController: true,
		Faults: groupFaults(creates, deletes), ControllerArgs: groupArgs})
	return s, newWorld(s), newGroupLedger(t, s)
}

// groupArgs turn group snapshots on.
var groupArgs = []string{"--feature-gates=CSIVolumeGroupSnapshot=true"}

// newGroupLedger creates the driver's default VolumeGroupSnapshotClass
// (deletion policy Delete) in scenario s and returns an empty ledger.
func newGroupLedger(t *testing.T, s *framework.Scenario) *groupLedger {
	t.Helper()
	g := &groupLedger{s: s, ledger: newLedger()}
	c := framework.MustCreate(t, g.s.Env.Snap.GroupsnapshotV1().VolumeGroupSnapshotClasses().Create,
		framework.GroupSnapshotClass("group-class-"+g.s.NS, g.s.Drv.Name, snapv1.VolumeSnapshotContentDelete, true))
	t.Cleanup(func() {
		_ = g.s.Env.Snap.GroupsnapshotV1().VolumeGroupSnapshotClasses().Delete(context.Background(), c.Name, metav1.DeleteOptions{})
	})
	return g
}

// workload creates and deletes groups of the applications' claims.
func (g *groupLedger) workload(creates, deletes int) *workload {
	return &workload{Creates: creates, Deletes: deletes, Create: g.create, Remove: g.remove, Name: "group-%03d"}
}

// claims creates n applications of 2 or 3 bound claims each, labelled
// app=<application>, and returns the claims of each application.
func (g *groupLedger) claims(t *testing.T, rng interface{ IntN(int) int }, n int) map[string][]string {
	t.Helper()
	ctx := context.Background()
	apps := map[string][]string{}
	for a := range n {
		app := fmt.Sprintf("app-%d", a)
		for c := range 2 + rng.IntN(2) {
			name := fmt.Sprintf("%s-data-%d", app, c)
			pvc := g.s.PVC(t, name)
			pvc.Labels = map[string]string{"app": app}
			if _, err := g.s.Env.Kube.CoreV1().PersistentVolumeClaims(g.s.NS).Update(ctx, pvc, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			apps[app] = append(apps[app], name)
		}
	}
	return apps
}

// create creates VolumeGroupSnapshot name of the claims labelled app.
func (g *groupLedger) create(ctx context.Context, name, app string) error {
	vgs := &groupv1.VolumeGroupSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: g.s.NS},
		Spec: groupv1.VolumeGroupSnapshotSpec{Source: groupv1.VolumeGroupSnapshotSource{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}},
	}
	out, err := g.s.Env.Snap.GroupsnapshotV1().VolumeGroupSnapshots(g.s.NS).Create(ctx, vgs, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create group snapshot %s: %w", name, err)
	}
	g.created(name, out.UID)
	return nil
}

// patientCreate is create for a retry: a group an earlier attempt stored
// (AlreadyExists) counts as created.
func (g *groupLedger) patientCreate(ctx context.Context, name, app string) error {
	err := g.create(ctx, name, app)
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	vgs, err := g.s.Env.Snap.GroupsnapshotV1().VolumeGroupSnapshots(g.s.NS).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	g.created(name, vgs.UID)
	return nil
}

// remove deletes VolumeGroupSnapshot name.
func (g *groupLedger) remove(ctx context.Context, name string) error {
	return g.markAndDelete(ctx, "group snapshot", name, g.s.Env.Snap.GroupsnapshotV1().VolumeGroupSnapshots(g.s.NS).Delete)
}

// checkInvariants asserts, within timeout, the group invariants of
// TestGroupKills: live groups ready with a ready member per claim of their
// application, deleted groups gone with their group content and members,
// no group object Terminating, the driver's groups those of the group
// contents, and no group name cut twice.
func (g *groupLedger) checkInvariants(t *testing.T, apps map[string][]string, timeout time.Duration) {
	t.Helper()
	ctx := context.Background()
	uids, live, gone := g.split()
	// The application each live group was made of, from its selector.
	appOf := map[string]string{}
	err := framework.Poll(timeout, fmt.Sprintf("%d live groups ready with their members, %d deleted ones gone with theirs", len(live), len(gone)), func() (bool, error) {
		groups, err := g.s.Env.Snap.GroupsnapshotV1().VolumeGroupSnapshots(g.s.NS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		gcs, err := g.s.Env.Snap.GroupsnapshotV1().VolumeGroupSnapshotContents().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		snaps, err := g.s.Env.Snap.SnapshotV1().VolumeSnapshots(g.s.NS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		have := itemsByName(groups.Items)
		members := map[string][]*snapv1.VolumeSnapshot{}
		for i := range snaps.Items {
			if owner := snapshot.GroupOwner(&snaps.Items[i]); owner != "" {
				members[owner] = append(members[owner], &snaps.Items[i])
			}
		}
		haveContent := itemsByName(gcs.Items)
		var problems []string
		for _, name := range live {
			vgs := have[name]
			if vgs == nil {
				problems = append(problems, name+": missing")
				continue
			}
			if p := notLive(name, vgs, vgs.Status != nil && ptr.Deref(vgs.Status.ReadyToUse, false), vgs.Status); p != "" {
				problems = append(problems, p)
			}
			appOf[name] = vgs.Spec.Source.Selector.MatchLabels["app"]
			if want := len(apps[appOf[name]]); len(members[name]) != want {
				problems = append(problems, fmt.Sprintf("%s: %d member snapshots, want %d (one per claim of %s)", name, len(members[name]), want, appOf[name]))
			}
			for _, vs := range members[name] {
				if vs.DeletionTimestamp != nil || vs.Status == nil || vs.Status.ReadyToUse == nil || !*vs.Status.ReadyToUse {
					problems = append(problems, fmt.Sprintf("%s: member %s not ready or terminating, status %s", name, vs.Name, framework.JSON(vs.Status)))
				}
			}
		}
		for _, name := range gone {
			cn := snapshot.GroupContentNameFor(uids[name])
			problems = append(problems, leftBehind(name, have[name], "group content", haveContent[cn])...)
			for _, vs := range members[name] {
				problems = append(problems, fmt.Sprintf("member %s of deleted %s still there (finalizers %v)", vs.Name, name, vs.Finalizers))
			}
		}
		for _, c := range gcs.Items {
			if c.Spec.Driver == g.s.Drv.Name && c.DeletionTimestamp != nil {
				problems = append(problems, fmt.Sprintf("group content %s terminating (finalizers %v)", c.Name, c.Finalizers))
			}
		}
		return len(problems) == 0, summarize(problems)
	})
	if err != nil {
		t.Errorf("%v", err)
	}
	if err := framework.Poll(timeout, "backend groups == group content handles", func() (bool, error) {
		return g.s.Env.BackendGroupsMatchGroupContents(ctx, g.s.Drv)
	}); err != nil {
		t.Errorf("%v", err)
	}
	g.checkNoDoubleCut(t)
	t.Logf("group invariants hold: %d live groups ready with %d members, %d deleted ones gone", len(live), memberCount(apps, appOf), len(gone))
}

// checkNoDoubleCut fails the test when a group name was cut twice: two
// backend groups of one name, or two ids answered for one name.
func (g *groupLedger) checkNoDoubleCut(t *testing.T) {
	t.Helper()
	byName := map[string][]string{}
	for _, b := range g.s.Drv.Groups(t) {
		byName[b.Name] = append(byName[b.Name], b.ID)
	}
	ids := map[string]map[string]bool{}
	for _, e := range g.s.Drv.CallLog(t, 0).Entries {
		if e.Method == groupCalls[0] && e.Code == "OK" && e.GroupSnapshotID != "" {
			if ids[e.Name] == nil {
				ids[e.Name] = map[string]bool{}
			}
			ids[e.Name][e.GroupSnapshotID] = true
		}
	}
	for name, set := range ids {
		for id := range set {
			if !slices.Contains(byName[name], id) {
				byName[name] = append(byName[name], id)
			}
		}
	}
	for name, all := range byName {
		if len(all) > 1 {
			t.Errorf("double cut: group name %s has %d backend groups %v", name, len(all), all)
		}
	}
}

func memberCount(apps map[string][]string, appOf map[string]string) int {
	n := 0
	for _, app := range appOf {
		n += len(apps[app])
	}
	return n
}
