package faults

import (
	"context"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/snapkeeper/snapkeeper/pkg/csi/csitest"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

// TestControllerKills SIGKILLs the controller at random moments while a
// workload creates and deletes snapshots, and starts it again each time.
// CreateSnapshot and DeleteSnapshot are slowed down by the driver (every
// call 300ms, a quarter of the snapshots 1.5s more) so that some kills land
// while calls are in flight; other kills come right after the driver
// answered a create or a delete, before the controller could record the
// answer. Variants: binder and CSI side in one process; binder and CSI side
// as two processes, either of which is killed.
func TestControllerKills(t *testing.T) {
	t.Run("one process", func(t *testing.T) { testKills(t, false) })
	t.Run("binder and CSI side apart", func(t *testing.T) { testKills(t, true) })
}

func testKills(t *testing.T, split bool) {
	rng := newRand(t)
	sz := runSizes()
	slow := slices.Concat(slowCalls(300*time.Millisecond, "", snapshotCalls...),
		slowCalls(1500*time.Millisecond, "snapshot-[0-3]*", snapshotCalls...))
	s := framework.NewScenario(t, framework.ScenarioOptions{DriverPrefix: "faults", NoController: true, Faults: slow})
	w := newWorld(s)
	common := []string{"--retry-interval-max=2s"}
	roles := map[string][]string{}
	if split {
		roles["binder"] = append([]string{"--components=binder"}, common...)
		roles["csi"] = append([]string{"--components=csi", "--csi-address=" + s.Drv.Socket}, common...)
	} else {
		roles["controller"] = append([]string{"--components=binder,csi", "--csi-address=" + s.Drv.Socket}, common...)
	}
	k := startKiller(t, s, w, roles, snapshotCalls...)

	keep := max(3, sz.KillN/10)
	// Pace the workload over about 4 seconds per planned kill.
	wl := &workload{Creates: sz.KillN + keep, Deletes: sz.KillN, Claims: 5}
	wl.Pause = time.Duration(sz.Kills) * 4 * time.Second / time.Duration(wl.ops())
	claims := wl.claims(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	k.run(t, rng, sz.Kills, wl, wl.start(ctx, w, child(rng), claims))
	timeout := settleTimeout()
	w.checkInvariants(t, timeout)
	calls := s.Drv.Calls(t)
	t.Logf("driver calls: CreateSnapshot %v, DeleteSnapshot %v, ListSnapshots %v; total run %v",
		calls["/csi.v1.Controller/CreateSnapshot"], calls["/csi.v1.Controller/DeleteSnapshot"], calls["/csi.v1.Controller/ListSnapshots"],
		time.Since(start).Round(time.Millisecond))
}

// snapshotCalls are the driver calls that cut and delete snapshots.
var snapshotCalls = []string{"CreateSnapshot", "DeleteSnapshot"}

// slowCalls makes each of the driver's methods take latency, for the
// snapshots whose name matches match ("" for every snapshot).
func slowCalls(latency time.Duration, match string, methods ...string) []framework.FaultRule {
	var rules []framework.FaultRule
	for _, m := range methods {
		rules = append(rules, framework.FaultRule{Method: m, Match: match, Latency: csitest.Duration(latency)})
	}
	return rules
}

// killer SIGKILLs controller processes at random moments while a workload
// runs, and starts each again at once.
type killer struct {
	s     *framework.Scenario
	w     *world
	roles map[string][]string // the arguments of each process
	names []string            // the roles, sorted
	procs map[string]*framework.Component
	// methods are the driver calls a kill may come right after (a
	// successful answer) or break off.
	methods []string
}

// startKiller starts one controller process per role.
func startKiller(t *testing.T, s *framework.Scenario, w *world, roles map[string][]string, methods ...string) *killer {
	t.Helper()
	k := &killer{s: s, w: w, roles: roles, names: slices.Sorted(maps.Keys(roles)), procs: map[string]*framework.Component{}, methods: methods}
	for _, r := range k.names {
		k.procs[r] = s.StartController(t, roles[r]...)
		w.addController(k.procs[r])
	}
	return k
}

// run kills a random process kills times, or more while the workload (whose
// result loadDone yields) is still issuing operations: half of the kills
// right after the driver answered one of k.methods, the others at a random
// moment. It fails the test when no kill broke off a call.
func (k *killer) run(t *testing.T, rng *rand.Rand, kills int, wl *workload, loadDone <-chan error) {
	t.Helper()
	start := time.Now()
	var n, afterReply, midCall, cut int
	byRole := map[string]int{}
	loading := true
	for loading || n < kills {
		select {
		case err := <-loadDone:
			loading = false
			if err != nil {
				t.Fatalf("workload: %v", err)
			}
			t.Logf("workload issued %d creates and %d deletes in %v", wl.Creates, wl.Deletes, time.Since(start).Round(time.Millisecond))
			continue
		default:
		}
		role := k.names[rng.IntN(len(k.names))]
		since := k.s.Drv.CallLog(t, 0).Last
		mode := "mid-call"
		if rng.IntN(2) == 0 && waitReply(k.s.Drv, since, 5*time.Second, k.methods) {
			mode = "after-reply"
			afterReply++
		} else {
			// A random moment while the workload's slow calls run.
			time.Sleep(200*time.Millisecond + time.Duration(rng.Int64N(int64(1300*time.Millisecond))))
			midCall++
		}
		before := k.s.Drv.CallLog(t, 0).Last
		kill(t, k.procs[role])
		n++
		byRole[role]++
		k.procs[role] = k.s.StartController(t, k.roles[role]...)
		k.w.addController(k.procs[role])
		c := canceledSince(t, k.s.Drv, before, k.methods)
		cut += c
		t.Logf("kill %d (%s, %s) at %d/%d operations: %d driver calls broke off", n, role, mode, wl.done.Load(), wl.ops(), c)
		// Let the new process work a little before the next kill.
		time.Sleep(time.Duration(rng.Int64N(int64(2 * time.Second))))
	}
	t.Logf("%d kills in %v (%d right after a reply, %d at random moments; by process %v); %d driver calls broke off with the killed process",
		n, time.Since(start).Round(time.Millisecond), afterReply, midCall, byRole, cut)
	if cut == 0 {
		t.Errorf("no kill landed while a call of %v was in flight", k.methods)
	}
}

// kill SIGKILLs a controller process and waits until it is gone.
func kill(t *testing.T, c *framework.Component) {
	t.Helper()
	c.Kill(t)
}

// waitReply polls the driver's call log after seq since until it shows a
// successful call of one of methods, for at most timeout.
func waitReply(drv *framework.CSIDriver, since int64, timeout time.Duration, methods []string) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		l, err := drv.GetCallLog(context.Background(), since)
		if err == nil {
			for _, e := range l.Entries {
				if e.Code == "OK" && slices.Contains(methods, e.Method) {
					return true
				}
			}
			since = l.Last
		}
		time.Sleep(5 * time.Millisecond)
	}
	return false
}

// canceledSince counts the calls of methods after seq since that ended
// because their caller went away.
func canceledSince(t *testing.T, drv *framework.CSIDriver, since int64, methods []string) int {
	t.Helper()
	n := 0
	for _, e := range drv.CallLog(t, since).Entries {
		if (e.Code == "Canceled" || e.Code == "Unavailable") && slices.Contains(methods, e.Method) {
			n++
		}
	}
	return n
}
