package faults

import (
	"context"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snapkeeper/snapkeeper/pkg/csi/csitest"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

// callTimeout is the controller's --timeout in the driver-fault scenario.
const callTimeout = 2 * time.Second

// hexDigits are the first characters a snapshot's UID, and so the CSI
// snapshot name "snapshot-<uid>", can start with: the fault rules pick the
// snapshots they hit by it.
const hexDigits = "0123456789abcdef"

// faultCodes are the codes of the injected failures.
var faultCodes = []string{"Unavailable", "DeadlineExceeded", "ResourceExhausted", "Internal"}

// lostReplyCode marks a call the driver performed while the caller got an
// error, as when the reply is lost; Aborted is used for nothing else, so
// the driver's call counts tell these calls apart.
const lostReplyCode = "Aborted"

// randomFaults draws one rule set: of the 16 possible first characters of
// a snapshot's UID, 5 (31%) make every call about the snapshot fail with
// one of faultCodes before it reaches the backend, 1 (6%) makes
// CreateSnapshot hang after the cut and DeleteSnapshot wait before it,
// both past the controller's call timeout, and 1 (6%) makes
// CreateSnapshot and DeleteSnapshot take effect on the backend and then
// answer lostReplyCode. The scenario draws a new set every half second or
// so, so every snapshot meets faults now and then, not forever.
func randomFaults(rng *rand.Rand) framework.Faults {
	digits := []byte(hexDigits)
	rng.Shuffle(len(digits), func(i, j int) { digits[i], digits[j] = digits[j], digits[i] })
	match := func(d byte) string { return "snapshot-" + string(d) + "*" }
	var rules []framework.FaultRule
	for _, d := range digits[:5] {
		code := faultCodes[rng.IntN(len(faultCodes))]
		rules = append(rules, framework.FaultRule{Method: "*", Match: match(d), Code: code, Message: "injected by the fault suite"})
	}
	hang := match(digits[5])
	rules = append(rules,
		framework.FaultRule{Method: "CreateSnapshot", Match: hang, HangUntilDeadline: true},
		framework.FaultRule{Method: "DeleteSnapshot", Match: hang, Latency: csitest.Duration(3 * callTimeout)})
	lost := match(digits[6])
	for _, m := range []string{"CreateSnapshot", "DeleteSnapshot"} {
		rules = append(rules, framework.FaultRule{Method: m, Match: lost, Code: lostReplyCode, AfterCall: true, Message: "reply lost"})
	}
	return framework.Faults{Rules: rules}
}

// TestDriverFaults runs a workload against a driver that fails about 30%
// of the calls (Unavailable, DeadlineExceeded, ResourceExhausted,
// Internal), hangs about 5% past the controller's --timeout, performs some
// creates and deletes but loses their replies, and restarts once midway
// (losing its backend, like a crash of a driver without persistent state).
func TestDriverFaults(t *testing.T) {
	rng := newRand(t)
	sz := runSizes()
	// Every incarnation of the driver starts refusing the controller's
	// creates (see world.restartDriver) until the first random rule set
	// replaces this one.
	hold := []framework.FaultRule{{Method: "CreateSnapshot", Match: "snapshot-*", Code: "Unavailable", Message: "driver starting"}}
	s := framework.NewScenario(t, framework.ScenarioOptions{DriverPrefix: "faults", Faults: hold,
		ControllerArgs: []string{"--timeout=" + callTimeout.String(), "--retry-interval-max=1s"}})
	w := newWorld(s)
	keep := max(3, sz.DriverN/10)
	wl := &workload{Creates: sz.DriverN + keep, Deletes: sz.DriverN, Claims: 5, Pause: 60 * time.Millisecond}
	claims := wl.claims(t, s)

	// mu orders the fault shuffler's calls with the driver's restart.
	var mu sync.Mutex
	stop := make(chan struct{})
	stopShuffler := sync.OnceFunc(func() { close(stop) })
	t.Cleanup(stopShuffler)
	shuffled := make(chan int, 1)
	frng := child(rng)
	go func() {
		n := 0
		defer func() { shuffled <- n }()
		for {
			mu.Lock()
			_, err := s.Drv.PutFaults(context.Background(), randomFaults(frng))
			mu.Unlock()
			if err == nil {
				n++
			}
			select {
			case <-stop:
				return
			case <-time.After(250*time.Millisecond + time.Duration(frng.Int64N(int64(500*time.Millisecond)))):
			}
		}
	}()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	loadDone := wl.start(ctx, w, child(rng), claims)

	// Restart the driver once the workload is about halfway.
	restartAt := int64(wl.ops()/3 + rng.IntN(wl.ops()/3+1))
	var loadErr error
	loaded := false
	framework.Eventually(t, 5*time.Minute, "workload progress", func() (bool, error) {
		select {
		case loadErr = <-loadDone:
			loaded = true
		default:
		}
		return loaded || wl.done.Load() >= restartAt, nil
	})
	if loadErr != nil {
		t.Fatalf("workload: %v", loadErr)
	}
	mu.Lock()
	// Nothing may cut or delete a backend snapshot while the restart
	// records what the driver holds: pause the creates and deletes (every
	// hang of the current rule set sits after the cut, and a delete that
	// still waits out its latency deletes a snapshot recorded as lost).
	before := s.Drv.Calls(t)
	s.Drv.SetFaults(t, framework.Faults{Rules: []framework.FaultRule{
		{Method: "CreateSnapshot", Code: "Unavailable", Message: "paused for the restart"},
		{Method: "DeleteSnapshot", Code: "Unavailable", Message: "paused for the restart"},
	}})
	time.Sleep(300 * time.Millisecond)
	w.restartDriver(t)
	mu.Unlock()
	t.Logf("driver restarted at %d/%d operations", restartAt, wl.ops())

	if !loaded {
		loadErr = <-loadDone
	}
	if loadErr != nil {
		t.Fatalf("workload: %v", loadErr)
	}
	t.Logf("workload issued %d creates and %d deletes in %v", wl.Creates, wl.Deletes, time.Since(start).Round(time.Millisecond))
	// Let the last operations meet faults too, then clear them.
	time.Sleep(3 * time.Second)
	stopShuffler()
	sets := <-shuffled
	mu.Lock()
	s.Drv.SetFaults(t, framework.Faults{})
	mu.Unlock()

	timeout := settleTimeout()
	w.checkInvariants(t, timeout)
	after := s.Drv.Calls(t)
	var total, injected, lostReplies int64
	for _, c := range []csitest.Calls{before, after} {
		for _, m := range []string{"CreateSnapshot", "DeleteSnapshot", "ListSnapshots"} {
			total += c.Count(m, "")
			for _, code := range faultCodes {
				injected += c.Count(m, code)
			}
			lostReplies += c.Count(m, lostReplyCode)
		}
	}
	// Calls hung past the deadline count as DeadlineExceeded, like the
	// injected ones.
	t.Logf("%d fault sets drawn; snapshot calls: %d, of them %d failed with an injected or timed-out code (%.0f%%) and %d lost their replies; before the restart %v, after %v; total %v",
		sets, total, injected, 100*float64(injected)/float64(max(total, 1)), lostReplies,
		callSummary(before), callSummary(after), time.Since(start).Round(time.Millisecond))
}

// callSummary shows the snapshot calls of a Calls by code.
func callSummary(c csitest.Calls) map[string]map[string]int64 {
	out := map[string]map[string]int64{}
	for m, byCode := range c {
		if short, ok := strings.CutPrefix(m, "/csi.v1.Controller/"); ok && strings.Contains(short, "Snapshot") {
			out[short] = byCode
		}
	}
	return out
}
