package groups

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/pkg/csi/csitest"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

const createGroup = "CreateVolumeGroupSnapshot"

// TestGroupDriverFaults: replies lost after the driver cut the group, and
// answers that say "not ready yet", end in one ready group and one backend
// group; a final error is reported on the group and leaves nothing behind.
func TestGroupDriverFaults(t *testing.T) {
	w := newWorld(t, framework.ScenarioOptions{ClaimSizes: dbSizes, Faults: []framework.FaultRule{
		{Method: createGroup, Times: 2, Code: "DeadlineExceeded", AfterCall: true},
		{Method: createGroup, NotReady: 2},
		{Method: "GetVolumeGroupSnapshot", NotReady: 2},
	}})
	dbClaims(t, w)
	w.Group(t, "db", dbSelector)
	w.WaitGroupReady(t, "db", 60*time.Second)
	if b := w.Drv.Groups(t); len(b) != 1 {
		t.Fatalf("backend groups %s, want exactly one cut", framework.JSON(b))
	}
	if n := len(w.Members(t, "db")); n != 3 {
		t.Fatalf("%d members, want 3", n)
	}
	w.NoLeak(t)

	// A final error: reported on the group, nothing cut, nothing left.
	w.Drv.SetFaults(t, framework.Faults{Rules: []framework.FaultRule{{Method: createGroup, Code: "InvalidArgument", Message: "unsupported group parameter"}}})
	w.Group(t, "bad", dbSelector)
	w.Env.WaitGroupError(t, w.NS, "bad", "unsupported group parameter", 30*time.Second)
	if b := w.Drv.Groups(t); len(b) != 1 {
		t.Fatalf("backend groups %s after a refused cut, want only the first", framework.JSON(b))
	}
	w.DeleteGroup(t, "bad")
	w.DeleteGroup(t, "db")
	w.WaitGroupGone(t, "bad")
	w.WaitGroupGone(t, "db")
	w.NothingLeft(t)
}

// TestGroupControllerKilledMidCreate: the controller is SIGKILLed while the
// driver holds a CreateVolumeGroupSnapshot that already cut the group; after
// a restart the group is ready with one backend group. A group deleted while
// its cut is in flight (and the controller killed) leaves nothing behind.
func TestGroupControllerKilledMidCreate(t *testing.T) {
	w := newWorld(t, framework.ScenarioOptions{ClaimSizes: dbSizes, Faults: []framework.FaultRule{
		{Method: createGroup, Times: 1, Hang: csitest.Duration(time.Minute)},
	}})
	dbClaims(t, w)

	w.Group(t, "db", dbSelector)
	w.WaitBackendGroups(t, 1)
	w.Restart(t)
	w.WaitGroupReady(t, "db", 60*time.Second)
	if b := w.Drv.Groups(t); len(b) != 1 {
		t.Fatalf("backend groups %s, want exactly one cut", framework.JSON(b))
	}

	w.Drv.SetFaults(t, framework.Faults{Rules: []framework.FaultRule{{Method: createGroup, Times: 1, Hang: csitest.Duration(time.Minute)}}})
	w.Group(t, "gone", &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "data"}})
	w.WaitBackendGroups(t, 2)
	w.DeleteGroup(t, "gone")
	time.Sleep(time.Second) // the controller sees the deletion while its call hangs
	w.Restart(t)
	w.WaitGroupGone(t, "gone")
	w.DeleteGroup(t, "db")
	w.WaitGroupGone(t, "db")
	w.NothingLeft(t)
}

// TestGroupLostReplyThenFinalError: the driver cuts the group but the reply
// is lost, and every retry then fails with Internal before reaching the
// backend. The group content keeps its being-created mark (the lost call
// cut a group); a deletion waits for the group id rather than leak the
// group, and once the driver answers, everything goes.
func TestGroupLostReplyThenFinalError(t *testing.T) {
	w := newWorld(t, framework.ScenarioOptions{ClaimSizes: dbSizes, Faults: []framework.FaultRule{
		{Method: createGroup, Times: 1, Code: "Aborted", AfterCall: true, Message: "reply lost"},
		{Method: createGroup, Code: "Internal", Message: "backend error"},
	}})
	dbClaims(t, w)
	w.Group(t, "db", dbSelector)
	w.WaitBackendGroups(t, 1)
	framework.Eventually(t, 30*time.Second, "a CreateVolumeGroupSnapshot answered Internal", func() (bool, error) {
		return w.Drv.Calls(t).Count(createGroup, "Internal") > 0, nil
	})
	w.DeleteGroup(t, "db")
	time.Sleep(3 * time.Second)
	if b := w.Drv.Groups(t); len(b) != 1 {
		t.Fatalf("backend groups %s while the driver fails, want the one the lost call cut", framework.JSON(b))
	}
	w.Drv.SetFaults(t, framework.Faults{})
	w.WaitGroupGone(t, "db")
	w.NothingLeft(t)
}
