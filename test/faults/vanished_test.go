package faults

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/pkg/csi/csitest"
	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

// TestSnapshotVanishedWithItsFinalizers removes protected VolumeSnapshots
// from etcd behind the API server, as kube-apiserver itself does when a
// DELETE races the write of our finalizers (kubernetes#77988; it cost the
// fault suite a content and its backend snapshot once): one ready, one
// whose CreateSnapshot is still in flight. The binder must tear each
// content down as a deleted snapshot's: contents gone, the in-flight cut
// finished first, no backend snapshot left.
func TestSnapshotVanishedWithItsFinalizers(t *testing.T) {
	s := framework.NewScenario(t, framework.ScenarioOptions{DriverPrefix: "faults"})
	w := newWorld(s)
	claims := (&workload{Claims: 1}).claims(t, s)
	ctx := context.Background()
	snaps := s.Env.Snap.SnapshotV1()

	vanish := func(name string) {
		t.Helper()
		w.markDeleted(name)
		removeBehindAPIServer(t, s, framework.SnapshotKey(s.NS, name), func() error {
			_, err := snaps.VolumeSnapshots(s.NS).Get(ctx, name, metav1.GetOptions{})
			return err
		})
	}

	if err := w.create(ctx, "ready", claims[0]); err != nil {
		t.Fatal(err)
	}
	s.WaitReady(t, "ready", time.Minute)
	vanish("ready")

	s.Drv.SetFaults(t, framework.Faults{Rules: []framework.FaultRule{
		{Method: "CreateSnapshot", Latency: csitest.Duration(3 * time.Second)},
	}})
	if err := w.create(ctx, "in-flight", claims[0]); err != nil {
		t.Fatal(err)
	}
	content := snapshot.ContentNameFor(w.uid("in-flight"))
	framework.Eventually(t, 30*time.Second, "CreateSnapshot of in-flight under way", func() (bool, error) {
		c, err := snaps.VolumeSnapshotContents().Get(ctx, content, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && snapshot.HasAnnotation(c, snapshot.AnnBeingCreated, snapshot.ValueYes), err
	})
	vanish("in-flight")

	w.checkInvariants(t, time.Minute)
	calls := s.Drv.Calls(t)
	if n := calls.Count("DeleteSnapshot", "OK"); n != 2 {
		t.Errorf("%d DeleteSnapshot OK, want 2 (one per vanished snapshot)", n)
	}
}

// TestGroupVanishedWithItsFinalizer is TestSnapshotVanishedWithItsFinalizers
// for groups (the shape TestGroupKills once left in CI: a deleted group's
// content, ready, and its members' backend snapshots): a ready group and
// one whose CreateVolumeGroupSnapshot is in flight are removed from etcd
// while they hold the binder's finalizer. Their contents, members and
// backend groups must go.
func TestGroupVanishedWithItsFinalizer(t *testing.T) {
	s, w, g := groupScenario(t, 0, 0)
	s.Drv.SetFaults(t, framework.Faults{})
	s.StartController(t, s.Args...)
	apps := g.claims(t, newRand(t), 1)
	ctx := context.Background()
	groups := s.Env.Snap.GroupsnapshotV1().VolumeGroupSnapshots(s.NS)
	vanish := func(name string) {
		t.Helper()
		g.markDeleted(name)
		removeBehindAPIServer(t, s, framework.GroupSnapshotKey(s.NS, name), func() error {
			_, err := groups.Get(ctx, name, metav1.GetOptions{})
			return err
		})
	}
	if err := g.create(ctx, "ready", "app-0"); err != nil {
		t.Fatal(err)
	}
	s.Env.WaitGroupReady(t, s.NS, "ready", time.Minute)
	vanish("ready")

	s.Drv.SetFaults(t, framework.Faults{Rules: []framework.FaultRule{
		{Method: groupCalls[0], Latency: csitest.Duration(3 * time.Second)},
	}})
	if err := g.create(ctx, "in-flight", "app-0"); err != nil {
		t.Fatal(err)
	}
	content := snapshot.GroupContentNameFor(g.uid("in-flight"))
	framework.Eventually(t, 30*time.Second, "CreateVolumeGroupSnapshot of in-flight under way", func() (bool, error) {
		_, err := s.Env.Snap.GroupsnapshotV1().VolumeGroupSnapshotContents().Get(ctx, content, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	vanish("in-flight")

	g.checkInvariants(t, apps, time.Minute)
	w.checkInvariants(t, time.Minute)
	if gs := s.Drv.Groups(t); len(gs) != 0 {
		t.Errorf("backend groups left: %+v", gs)
	}
}

// removeBehindAPIServer removes the object at etcd key and waits until get
// (a read of it through the API server) answers NotFound.
func removeBehindAPIServer(t *testing.T, s *framework.Scenario, key string, get func() error) {
	t.Helper()
	n, err := s.Env.RemoveFromEtcd(context.Background(), key)
	if err != nil || n != 1 {
		t.Fatalf("remove %s from etcd: %d keys, %v", key, n, err)
	}
	framework.Eventually(t, 30*time.Second, key+" gone from the API server", func() (bool, error) {
		return apierrors.IsNotFound(get()), nil
	})
}
