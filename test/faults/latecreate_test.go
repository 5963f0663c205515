package faults

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// TestInvariantsDeleteALateCreate: a create answered with an error can be
// committed after the name was created again and deleted (seen with etcd
// without quorum in TestProdEtcdFaults). Here the late create is made by
// hand: snap-0000 created and deleted, then created again under the same
// name behind the ledger's back. The invariants take it for what it is,
// delete it again, and require it and its content gone, backend included.
func TestInvariantsDeleteALateCreate(t *testing.T) {
	s := framework.NewScenario(t, framework.ScenarioOptions{DriverPrefix: "faults"})
	w := newWorld(s)
	claims := (&workload{Claims: 1}).claims(t, s)
	ctx := context.Background()
	if err := w.create(ctx, "snap-0000", claims[0]); err != nil {
		t.Fatal(err)
	}
	if err := w.remove(ctx, "snap-0000"); err != nil {
		t.Fatal(err)
	}
	snaps := s.Env.Snap.SnapshotV1().VolumeSnapshots(s.NS)
	if err := framework.Poll(time.Minute, "snap-0000 gone", func() (bool, error) {
		_, err := snaps.Get(ctx, "snap-0000", metav1.GetOptions{})
		return err != nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	late, err := snaps.Create(ctx, framework.DynamicSnapshot(s.NS, "snap-0000", claims[0], &s.Class), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := framework.Poll(time.Minute, "the late snap-0000 ready", func() (bool, error) {
		vs, err := snaps.Get(ctx, "snap-0000", metav1.GetOptions{})
		return err == nil && vs.Status != nil && vs.Status.ReadyToUse != nil && *vs.Status.ReadyToUse, nil
	}); err != nil {
		t.Fatal(err)
	}
	w.checkInvariants(t, 2*time.Minute)
	if _, err := snaps.Get(ctx, "snap-0000", metav1.GetOptions{}); err == nil {
		t.Errorf("the late snap-0000 (UID %s) is still there", late.UID)
	}
}
