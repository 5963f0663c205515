package faults

import (
	"context"
	"testing"
	"time"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

// TestNoLeakAfterLostReplyThenFinalError is the regression test of the leak
// TestDriverFaults found (docs/history/runs.md, "Findings"). The driver cuts the
// snapshot but the reply is lost (Aborted, which may mean "in progress":
// the being-created mark stays); every retry of the same CreateSnapshot then
// fails with Internal, a final code, before reaching the backend. A final
// error proves only that its own call cut nothing, so the CSI side keeps the
// mark (pkg/sync/csiside/lifecycle.go, createFailed), and a deletion waits for
// the handle instead of walking away without a DeleteSnapshot
// (pkg/sync/csiside/delete.go, finishInFlight). Once the driver answers,
// everything goes and nothing is left in the backend.
func TestNoLeakAfterLostReplyThenFinalError(t *testing.T) {
	newRand(t)
	s := framework.NewScenario(t, framework.ScenarioOptions{DriverPrefix: "faults"})
	w := newWorld(s)
	s.Drv.SetFaults(t, framework.Faults{Rules: []framework.FaultRule{
		// First call: cut, then the reply is lost.
		{Method: "CreateSnapshot", Code: lostReplyCode, AfterCall: true, Times: 1, Message: "reply lost"},
		// Every later call: a final error before the backend.
		{Method: "CreateSnapshot", Code: "Internal", Message: "backend error"},
	}})
	s.PVC(t, "data")
	ctx := context.Background()
	if err := w.create(ctx, "snap", "data"); err != nil {
		t.Fatal(err)
	}
	s.WaitBackend(t, 1, 30*time.Second)
	framework.Eventually(t, 30*time.Second, "a CreateSnapshot answered Internal", func() (bool, error) {
		return s.Drv.Calls(t).Count("CreateSnapshot", "Internal") > 0, nil
	})
	name := snapshot.ContentNameFor(w.uid("snap"))
	if c := s.Content(t, name); !snapshot.HasAnnotation(c, snapshot.AnnBeingCreated, snapshot.ValueYes) {
		t.Fatalf("after Aborted then Internal the content lost its being-created mark (annotations %v): a deletion would forget the cut snapshot", c.Annotations)
	}
	if err := w.remove(ctx, "snap"); err != nil {
		t.Fatal(err)
	}
	// While the driver keeps failing, the deletion waits: the content stays
	// with its mark and the backend snapshot stays with it.
	time.Sleep(3 * time.Second)
	if c := s.Content(t, name); c.DeletionTimestamp == nil && !snapshot.HasAnnotation(c, snapshot.AnnBeingCreated, snapshot.ValueYes) {
		t.Fatalf("content %s released while the driver has not told its snapshot id", name)
	}
	if got := s.Drv.Created(t); len(got) != 1 {
		t.Fatalf("backend snapshots while the deletion waits: %v, want the one cut", got)
	}
	s.Drv.SetFaults(t, framework.Faults{})
	s.WaitSnapshotGone(t, "snap")
	w.checkInvariants(t, 30*time.Second)
}
