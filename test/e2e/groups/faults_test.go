package groups

import (
	"context"
	"fmt"
	"strings"
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
	ctx := context.Background()
	w := newWorld(t, worldOpts{sizes: dbSizes, faults: []framework.FaultRule{
		{Method: createGroup, Times: 2, Code: "DeadlineExceeded", AfterCall: true},
		{Method: createGroup, NotReady: 2},
		{Method: "GetVolumeGroupSnapshot", NotReady: 2},
	}})
	dbClaims(t, w)
	w.group(t, "db", dbSelector)
	w.waitGroupReady(t, "db", 60*time.Second)
	if b := w.backendGroups(t); len(b) != 1 {
		t.Fatalf("backend groups %s, want exactly one cut", framework.JSON(b))
	}
	if n := len(w.members(t, "db")); n != 3 {
		t.Fatalf("%d members, want 3", n)
	}
	w.noLeak(t)

	// A final error: reported on the group, nothing cut, nothing left.
	if err := w.drv.SetFaults(ctx, framework.FaultRule{Method: createGroup, Code: "InvalidArgument", Message: "unsupported group parameter"}); err != nil {
		t.Fatal(err)
	}
	w.group(t, "bad", dbSelector)
	w.waitGroupError(t, "bad", "unsupported group parameter")
	if b := w.backendGroups(t); len(b) != 1 {
		t.Fatalf("backend groups %s after a refused cut, want only the first", framework.JSON(b))
	}
	w.deleteGroup(t, "bad")
	w.deleteGroup(t, "db")
	w.waitGroupGone(t, "bad")
	w.waitGroupGone(t, "db")
	w.noLeak(t)
	if b := w.backendGroups(t); len(b) != 0 {
		t.Fatalf("backend groups left: %s", framework.JSON(b))
	}
}

// TestGroupControllerKilledMidCreate: the controller is SIGKILLed while the
// driver holds a CreateVolumeGroupSnapshot that already cut the group; after
// a restart the group is ready with one backend group. A group deleted while
// its cut is in flight (and the controller killed) leaves nothing behind.
func TestGroupControllerKilledMidCreate(t *testing.T) {
	w := newWorld(t, worldOpts{sizes: dbSizes, faults: []framework.FaultRule{
		{Method: createGroup, Times: 1, Hang: csitest.Duration(time.Minute)},
	}})
	dbClaims(t, w)

	w.group(t, "db", dbSelector)
	w.waitBackendGroups(t, 1)
	w.restart(t)
	w.waitGroupReady(t, "db", 60*time.Second)
	if b := w.backendGroups(t); len(b) != 1 {
		t.Fatalf("backend groups %s, want exactly one cut", framework.JSON(b))
	}

	if err := w.drv.SetFaults(context.Background(),
		framework.FaultRule{Method: createGroup, Times: 1, Hang: csitest.Duration(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	w.group(t, "gone", &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "data"}})
	w.waitBackendGroups(t, 2)
	w.deleteGroup(t, "gone")
	time.Sleep(time.Second) // the controller sees the deletion while its call hangs
	w.restart(t)
	w.waitGroupGone(t, "gone")
	w.deleteGroup(t, "db")
	w.waitGroupGone(t, "db")
	w.noLeak(t)
	if b := w.backendGroups(t); len(b) != 0 {
		t.Fatalf("backend groups left: %s", framework.JSON(b))
	}
}

func (w *world) waitBackendGroups(t *testing.T, n int) {
	t.Helper()
	framework.Eventually(t, 30*time.Second, fmt.Sprintf("%d backend groups", n), func() (bool, error) {
		b, err := w.drv.Groups(context.Background())
		return len(b) == n, fmt.Errorf("%d groups (%v)", len(b), err)
	})
}

func (w *world) waitGroupError(t *testing.T, name, substr string) {
	t.Helper()
	framework.Eventually(t, 30*time.Second, "group "+name+" error "+substr, func() (bool, error) {
		g, err := w.env.Snap.GroupsnapshotV1().VolumeGroupSnapshots(w.ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if g.Status == nil || g.Status.Error == nil || g.Status.Error.Message == nil {
			return false, fmt.Errorf("status %s", framework.JSON(g.Status))
		}
		return strings.Contains(*g.Status.Error.Message, substr), fmt.Errorf("error %q", *g.Status.Error.Message)
	})
}
