package upgrade

import (
	"context"
	"testing"
	"time"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// workload is what the previous release leaves at the upgrade.
type workload struct {
	ready, polling, cutting []string
	inflight                []string // polling and cutting
	// done: the backend names of everything ready before the upgrade (the
	// ready snapshots and the group); none may be cut again.
	done map[string]bool
	// before: every snapshot object once the ready ones settled; none may
	// be written again.
	before *state
}

// notReady keeps every snapshot cut from now on not ready, until the
// faults are cleared.
var notReady = framework.FaultRule{Method: "CreateSnapshot", NotReady: 1 << 30}

// makeWorkload: readyN snapshots and a group of two claims, ready; then
// pollingN cut and not ready, and cuttingN whose CreateSnapshot the driver
// holds (after cutting them) until the caller goes away.
func (c *cluster) makeWorkload(t *testing.T) *workload {
	t.Helper()
	w := &workload{ready: names("ready", readyN), polling: names("polling", pollingN), cutting: names("cutting", cuttingN)}
	w.inflight = append(append([]string(nil), w.polling...), w.cutting...)
	c.createSnapshots(t, w.ready)
	createGroup(t, c.env, c.apps, "db")
	s := c.waitFor(t, w.ready, 2*time.Minute, "the previous release to make the ready snapshots", (*state).ready)
	c.env.WaitGroupReady(t, c.apps, "db", time.Minute)
	w.done = map[string]bool{}
	backend := c.backendByName(t)
	for _, n := range w.ready {
		name := csiName(s.snaps[n])
		if backend[name] != 1 {
			t.Fatalf("%s: the backend holds %d snapshots named %s (want 1; backend %v)", n, backend[name], name, backend)
		}
		w.done[name] = true
	}
	for _, g := range c.drv.Groups(t) {
		w.done[g.Name] = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.env.WaitQuietWrites(ctx, contract, time.Second, 30*time.Second); err != nil {
		t.Fatalf("the previous release did not settle: %v", err)
	}
	w.before = c.read(t)

	c.drv.SetFaults(t, framework.Faults{Rules: []framework.FaultRule{notReady}})
	c.createSnapshots(t, w.polling)
	c.waitFor(t, w.polling, time.Minute, "the polling snapshots to be cut, not ready", (*state).cutNotReady)
	// Every create from now on is held until its caller goes: the cutting
	// snapshots' first calls, and the polling ones' readiness checks (the
	// CSI side asks CreateSnapshot again). A held call that reaches the CSI
	// side's --timeout is repeated and held again: still in flight.
	c.drv.SetFaults(t, framework.Faults{Rules: []framework.FaultRule{notReady, {Method: "CreateSnapshot", HangUntilDeadline: true}}})
	c.createSnapshots(t, w.cutting)
	c.waitFor(t, w.cutting, time.Minute, "the cutting snapshots to be cut with CreateSnapshot unanswered", c.cutUnanswered)
	return w
}

// cutUnanswered: the backend holds the snapshot, its content no handle.
func (c *cluster) cutUnanswered(s *state, name string) (bool, string) {
	if ok, why := s.noHandle(name); !ok {
		return ok, why
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	created, err := c.drv.GetCreated(ctx)
	if err != nil {
		return false, err.Error()
	}
	for _, b := range created {
		if b.Name == csiName(s.snaps[name]) {
			return true, ""
		}
	}
	return false, "not cut yet"
}

// stillInFlight fails the test when a snapshot of the workload finished
// before the swap: the swap would then test nothing in flight.
func (c *cluster) stillInFlight(t *testing.T, w *workload) {
	t.Helper()
	s := c.read(t)
	for _, n := range w.polling {
		if ok, why := s.cutNotReady(n); !ok {
			t.Fatalf("%s is no longer in flight at the swap: %s", n, why)
		}
	}
	for _, n := range w.cutting {
		if ok, why := c.cutUnanswered(s, n); !ok {
			t.Fatalf("%s is no longer in flight at the swap (%s): the held CreateSnapshot returned, raise the CSI side's --timeout or swap sooner", n, why)
		}
	}
}

// afterUpgrade: the new release makes snapshots and a group snapshot.
func (c *cluster) afterUpgrade(t *testing.T) {
	t.Helper()
	after := names("after", afterN)
	c.createSnapshots(t, after)
	createGroup(t, c.env, c.apps, "db-after")
	c.waitFor(t, after, time.Minute, "snapshots made after the upgrade to be ready", (*state).ready)
	c.env.WaitGroupReady(t, c.apps, "db-after", time.Minute)
}

// deleteAll deletes every group and snapshot; the driver must end up
// holding nothing (no leak) and no content may remain.
func (c *cluster) deleteAll(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	snaps := c.env.Snap.SnapshotV1()
	groups := c.env.Snap.GroupsnapshotV1()
	if err := groups.VolumeGroupSnapshots(c.apps).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, "the group snapshots to be gone", func() (bool, error) {
		l, err := groups.VolumeGroupSnapshots(c.apps).List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 0, err
	})
	if err := snaps.VolumeSnapshots(c.apps).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, "every snapshot, content and backend snapshot to be gone", func() (bool, error) {
		vs, err := snaps.VolumeSnapshots(c.apps).List(ctx, metav1.ListOptions{})
		if err != nil || len(vs.Items) > 0 {
			return false, err
		}
		vsc, err := snaps.VolumeSnapshotContents().List(ctx, metav1.ListOptions{})
		if err != nil || len(vsc.Items) > 0 {
			return false, err
		}
		gc, err := groups.VolumeGroupSnapshotContents().List(ctx, metav1.ListOptions{})
		if err != nil || len(gc.Items) > 0 {
			return false, err
		}
		created, err := c.drv.GetCreated(ctx)
		if err != nil || len(created) > 0 {
			return false, err
		}
		g, err := c.drv.GetGroups(ctx)
		return err == nil && len(g) == 0, err
	})
}

// createGroupClass: the driver's default group class.
func createGroupClass(t *testing.T, env *framework.Env) {
	t.Helper()
	framework.MustCreate(t, env.Snap.GroupsnapshotV1().VolumeGroupSnapshotClasses().Create,
		framework.GroupSnapshotClass("upgrade-group", framework.MockDriverName, snapv1.VolumeSnapshotContentDelete, true))
}

// labelled creates bound claims labelled app=db, the group's members.
func labelled(t *testing.T, env *framework.Env, ns string, claims ...string) {
	t.Helper()
	for _, name := range claims {
		pvc := env.CreateBoundPVC(t, ns, name, framework.PVCOptions{Driver: framework.MockDriverName})
		pvc.Labels = map[string]string{"app": "db"}
		if _, err := env.Kube.CoreV1().PersistentVolumeClaims(ns).Update(context.Background(), pvc, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// createGroup: a group snapshot of the claims labelled app=db.
func createGroup(t *testing.T, env *framework.Env, ns, name string) {
	t.Helper()
	g := &groupv1.VolumeGroupSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: groupv1.VolumeGroupSnapshotSpec{Source: groupv1.VolumeGroupSnapshotSource{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}},
	}
	framework.MustCreate(t, env.Snap.GroupsnapshotV1().VolumeGroupSnapshots(ns).Create, g)
}
