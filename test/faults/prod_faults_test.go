package faults

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/test/framework"
	"github.com/snapkeeper/snapkeeper/test/framework/faultproxy"
)

// prodFault is one fault of the production plane: inject starts it and
// returns what ends it. Faults of one run may overlap
// (TestProdTwoFaults).
type prodFault struct {
	name   string
	inject func(t *testing.T, g *prodRig, rng *rand.Rand) (heal func())
}

// prodFaults is the catalogue: the faults of scenarios 1-4 of the
// production plane, each lasting long enough to matter (past the renew
// deadline where a Lease is at stake).
var prodFaults = []prodFault{
	{"leader API connection stalled", func(t *testing.T, g *prodRig, rng *rand.Rand) func() {
		seat := max(g.leaderSeat(), 0)
		g.fault(fmt.Sprintf("seat %d API connection stalled", seat), g.api[seat], faultproxy.Faults{Stall: true})
		return func() { g.fault(fmt.Sprintf("seat %d API connection healed", seat), g.api[seat], faultproxy.Faults{}) }
	}},
	{"etcd leader killed", func(t *testing.T, g *prodRig, rng *rand.Rand) func() {
		// Without a leader (another fault holds quorum) a random running
		// member goes instead.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		m, err := g.s.Env.EtcdLeader(ctx)
		cancel()
		what := "etcd leader "
		if err != nil {
			var running []*framework.EtcdMember
			for _, m := range g.s.Env.EtcdMembers() {
				if m.Running() {
					running = append(running, m)
				}
			}
			if len(running) == 0 {
				return func() {}
			}
			m, what = running[rng.IntN(len(running))], "etcd member (no leader) "
		}
		if err := m.Kill(); err != nil {
			t.Fatal(err)
		}
		g.rec.add("fault", what+m.Name+" SIGKILLed")
		return func() {
			if err := m.Start(); err != nil {
				t.Errorf("start etcd member %s again: %v", m.Name, err)
			}
			g.rec.add("fault", "etcd member "+m.Name+" started again")
		}
	}},
	{"etcd member partitioned", func(t *testing.T, g *prodRig, rng *rand.Rand) func() {
		m := g.s.Env.EtcdMembers()[rng.IntN(3)]
		heal, err := g.s.Env.CutEtcd(m.Name)
		if err != nil {
			t.Fatal(err)
		}
		g.rec.add("fault", "etcd member "+m.Name+" cut from the others")
		return func() { heal(); g.rec.add("fault", "etcd member "+m.Name+" healed") }
	}},
	{"etcd quorum lost", func(t *testing.T, g *prodRig, rng *rand.Rand) func() {
		ms := g.s.Env.EtcdMembers()
		i := rng.IntN(3)
		a, b := ms[i], ms[(i+1)%3]
		heal, err := g.s.Env.CutEtcd(a.Name, b.Name)
		if err != nil {
			t.Fatal(err)
		}
		g.rec.add("fault", fmt.Sprintf("etcd members %s and %s cut from every other: no quorum", a.Name, b.Name))
		return func() { heal(); g.rec.add("fault", fmt.Sprintf("etcd members %s and %s healed", a.Name, b.Name)) }
	}},
	{"leader API server slow", func(t *testing.T, g *prodRig, rng *rand.Rand) func() {
		seat := max(g.leaderSeat(), 0)
		// 5% of the chunks wait 6 s more: the p99 of a request is above 5 s.
		g.fault(fmt.Sprintf("seat %d API server slow", seat), g.api[seat],
			faultproxy.Faults{Latency: 20 * time.Millisecond, Jitter: 80 * time.Millisecond, SpikeProb: 0.05, Spike: 6 * time.Second})
		return func() { g.fault(fmt.Sprintf("seat %d API server fast again", seat), g.api[seat], faultproxy.Faults{}) }
	}},
	{"API connections reset every few seconds", func(t *testing.T, g *prodRig, rng *rand.Rand) func() {
		seat := rng.IntN(seats)
		stop := make(chan struct{})
		done := make(chan int)
		seed := rng.Uint64()
		go func() {
			r := rand.New(rand.NewPCG(seed, 1))
			n := 0
			for {
				select {
				case <-stop:
					done <- n
					return
				case <-time.After(2*time.Second + time.Duration(r.Int64N(int64(2*time.Second)))):
					n += g.api[seat].Reset()
				}
			}
		}()
		g.rec.add("fault", fmt.Sprintf("seat %d API connections (watches and all) reset every 2-4 s", seat))
		return func() {
			close(stop)
			g.rec.add("fault", fmt.Sprintf("seat %d resets stopped after %d connections", seat, <-done))
		}
	}},
	{"watch expiry", func(t *testing.T, g *prodRig, rng *rand.Rand) func() {
		// Seat 1's API server serves watches from etcd: a watch resumed
		// after a compaction is answered "too old resource version". The
		// test resumes one of its own there to show the answer.
		snap1 := g.serverClient(t, 1)
		ctx := context.Background()
		rv := ""
		if l, err := snap1.SnapshotV1().VolumeSnapshots(g.s.NS).List(ctx, metav1.ListOptions{}); err == nil {
			rv = l.ResourceVersion
		}
		g.fault("seat 1 API connection stalled for the compaction", g.api[1], faultproxy.Faults{Stall: true})
		return func() {
			rev, err := g.s.Env.CompactEtcd(ctx)
			if err != nil {
				// Another fault of the round holds quorum: nothing to compact.
				g.rec.add("fault", fmt.Sprintf("etcd compaction refused: %v", err))
			} else if rv != "" {
				g.rec.add("fault", fmt.Sprintf("a watch resumed on API server 1 from resourceVersion %s after the compaction: %s", rv, watchExpired(ctx, snap1, g.s.NS, rv)))
			}
			n := g.api[1].Reset()
			g.api[1].Set(faultproxy.Faults{})
			g.rec.add("fault", fmt.Sprintf("etcd compacted at revision %d; seat 1's %d connections reset and healed: its watches resume from a compacted revision", rev, n))
		}
	}},
	{"driver hangs", func(t *testing.T, g *prodRig, rng *rand.Rand) func() {
		seat := max(g.leaderSeat(), 0)
		g.fault(fmt.Sprintf("seat %d driver connection hangs", seat), g.csi[seat], faultproxy.Faults{Stall: true})
		return func() { g.fault(fmt.Sprintf("seat %d driver answers again", seat), g.csi[seat], faultproxy.Faults{}) }
	}},
	{"driver replies lost", func(t *testing.T, g *prodRig, rng *rand.Rand) func() {
		seat := max(g.leaderSeat(), 0)
		// Calls reach the driver, which acts; its answers never come back.
		g.fault(fmt.Sprintf("seat %d driver replies dropped", seat), g.csi[seat], faultproxy.Faults{Blackhole: faultproxy.Down})
		return func() {
			g.fault(fmt.Sprintf("seat %d driver replies flow again", seat), g.csi[seat], faultproxy.Faults{})
		}
	}},
}

func faultNamed(name string) prodFault {
	for _, f := range prodFaults {
		if f.name == name {
			return f
		}
	}
	panic("no fault " + name)
}

// healOnExit returns heal, run at most once, and also when the test ends
// before it (a failure mid-fault must not leave the shared plane broken
// for the next scenario).
func (g *prodRig) healOnExit(t *testing.T, heal func()) func() {
	var once sync.Once
	h := func() { once.Do(heal) }
	t.Cleanup(h)
	return h
}

// step is a fault held for a while.
type step struct {
	fault string
	hold  time.Duration
}

// runFaults injects the steps' faults one after the other, with a random
// pause of 2-5 s before each, while a workload of single snapshots runs;
// then checks the invariants.
func runFaults(t *testing.T, rng *rand.Rand, g *prodRig, wl *workload, steps ...step) {
	t.Helper()
	injectDuring(t, rng, g, wl, wl.claims(t, g.s), steps...)
	g.w.checkInvariants(t, 3*time.Minute)
	g.recordRepeats(t)
}

// injectDuring runs wl on the claims (or applications) and injects the
// steps' faults meanwhile; it returns once the workload is done and etcd
// has a leader.
func injectDuring(t *testing.T, rng *rand.Rand, g *prodRig, wl *workload, claims []string, steps ...step) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	loadDone := wl.start(ctx, g.w, child(rng), claims)
	for _, st := range steps {
		time.Sleep(2*time.Second + time.Duration(rng.Int64N(int64(3*time.Second))))
		f := faultNamed(st.fault)
		g.rec.add("step", fmt.Sprintf("%s at %d/%d operations, for %v", f.name, wl.done.Load(), wl.ops(), st.hold))
		heal := g.healOnExit(t, f.inject(t, g, rng))
		time.Sleep(st.hold)
		heal()
	}
	if err := <-loadDone; err != nil {
		t.Fatalf("workload: %v", err)
	}
	g.rec.add("workload", fmt.Sprintf("%d operations done", wl.ops()))
	if _, err := g.s.Env.EtcdLeader(context.Background()); err != nil {
		t.Fatalf("etcd: %v", err)
	}
}

var prodSlowDriver = slowCalls(300*time.Millisecond, "", snapshotCalls...)

// runProdSteps runs the steps' faults (runFaults) on every pairing's
// production plane with prodSlowDriver, during a workload of n operations
// spread over span (short: 16, full: 120).
func runProdSteps(t *testing.T, span time.Duration, steps ...step) {
	t.Helper()
	eachPair(t, func(t *testing.T, pair string) {
		rng := newRand(t)
		n := shortOrFull(16, 120)
		g := newProdRig(t, rng, pair, prodSlowDriver)
		runFaults(t, rng, g, g.workload(n+3, n, 4, span), steps...)
	})
}

// TestProdEtcdFaults: during creates and deletes the etcd leader is
// SIGKILLed (and started again), then a member is cut from the other two,
// then two members are cut from every other: quorum lost for 20 s and
// regained. Replicas that lose their Leases meanwhile exit and are started
// again.
func TestProdEtcdFaults(t *testing.T) {
	runProdSteps(t, 70*time.Second,
		step{"etcd leader killed", 4 * time.Second}, step{"etcd member partitioned", 10 * time.Second}, step{"etcd quorum lost", 20 * time.Second})
}

// TestProdAPIServerFaults: the leader's API server slow (p99 above 5 s),
// then one seat's connections (watches included) reset every few seconds,
// then watch expiry: a seat cut off while etcd is compacted resumes its
// watches from a compacted revision.
func TestProdAPIServerFaults(t *testing.T) {
	runProdSteps(t, 60*time.Second,
		step{"leader API server slow", 15 * time.Second}, step{"API connections reset every few seconds", 15 * time.Second}, step{"watch expiry", 5 * time.Second})
}

// TestProdDriverFaults: the leader's driver connection hangs (open, no
// answers) and recovers, then its replies are lost (the driver acts, the
// answers never arrive) and the connection is reset.
func TestProdDriverFaults(t *testing.T) {
	runProdSteps(t, 50*time.Second,
		step{"driver hangs", 15 * time.Second}, step{"driver replies lost", 10 * time.Second})
}

// TestProdTwoFaults draws two faults at a time from the catalogue and lets
// them overlap, round after round, while a workload runs. Short: 2 rounds,
// one stream of 42 operations; full (make test-faults): rounds for at least
// 30 minutes while 4 streams issue 3,400 operations.
func TestProdTwoFaults(t *testing.T) {
	eachPair(t, func(t *testing.T, pair string) {
		rng := newRand(t)
		rounds, n, streams := shortOrFull(2, 0), shortOrFull(20, 400), shortOrFull(1, 4)
		span := shortOrFull(time.Minute, 30*time.Minute)
		g := newProdRig(t, rng, pair, prodSlowDriver)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var wls []*workload
		var claims []string
		var done []<-chan error
		for i := range streams {
			wl := g.workload(n+n/10, n, 6, span)
			wl.Name = fmt.Sprintf("s%d-snap-%%04d", i)
			if i == 0 {
				claims = wl.claims(t, g.s)
			}
			wls = append(wls, wl)
		}
		begin := time.Now()
		for _, wl := range wls {
			done = append(done, wl.start(ctx, g.w, child(rng), claims))
		}
		progress := func() (d, all int64) {
			for _, wl := range wls {
				d, all = d+wl.done.Load(), all+int64(wl.ops())
			}
			return d, all
		}
		for r := 0; (rounds > 0 && r < rounds) || (rounds == 0 && time.Since(begin) < span); r++ {
			a := prodFaults[rng.IntN(len(prodFaults))]
			b := prodFaults[rng.IntN(len(prodFaults))]
			for b.name == a.name {
				b = prodFaults[rng.IntN(len(prodFaults))]
			}
			d, all := progress()
			g.rec.add("step", fmt.Sprintf("round %d at %d/%d operations: %s, then %s", r+1, d, all, a.name, b.name))
			healA := g.healOnExit(t, a.inject(t, g, rng))
			time.Sleep(time.Duration(2+rng.IntN(6)) * time.Second)
			healB := g.healOnExit(t, b.inject(t, g, rng))
			time.Sleep(time.Duration(5+rng.IntN(10)) * time.Second)
			healA()
			time.Sleep(time.Duration(1+rng.IntN(5)) * time.Second)
			healB()
			time.Sleep(time.Duration(3+rng.IntN(5)) * time.Second)
		}
		for _, c := range done {
			if err := <-c; err != nil {
				t.Fatalf("workload: %v", err)
			}
		}
		_, all := progress()
		g.rec.add("workload", fmt.Sprintf("%d operations done in %v", all, time.Since(begin).Round(time.Second)))
		if _, err := g.s.Env.EtcdLeader(context.Background()); err != nil {
			t.Fatalf("etcd: %v", err)
		}
		g.w.checkInvariants(t, 3*time.Minute)
		g.recordRepeats(t)
	})
}

// TestProdGroupFaults runs a workload of VolumeGroupSnapshots (the group
// scenarios' driver faults: slow group calls, lost replies, refusals)
// through the production plane's faults: the leader cut off its API
// server until the standby takes over, the etcd leader killed, the
// driver hanging. The group invariants of TestGroupKills hold after.
func TestProdGroupFaults(t *testing.T) {
	eachPair(t, func(t *testing.T, pair string) {
		rng := newRand(t)
		creates, deletes := shortOrFull(8, 60), shortOrFull(6, 50)
		g := newProdRigWith(t, rng, pair, framework.ScenarioOptions{NoClass: true, Faults: groupFaults(creates, deletes), ControllerArgs: groupArgs})
		gl := newGroupLedger(t, g.s)
		apps := gl.claims(t, rng, 3)
		wl := gl.workload(creates, deletes)
		wl.Create = func(ctx context.Context, name, app string) error {
			return g.recordOp(ctx, "create group "+name+" of "+app, func(ctx context.Context) error { return gl.patientCreate(ctx, name, app) })
		}
		wl.Remove = func(ctx context.Context, name string) error {
			return g.recordOp(ctx, "delete group "+name, func(ctx context.Context) error { return gl.remove(ctx, name) })
		}
		wl.Pause = 60 * time.Second / time.Duration(wl.ops())
		injectDuring(t, rng, g, wl, slices.Sorted(maps.Keys(apps)),
			step{"leader API connection stalled", 25 * time.Second}, step{"etcd leader killed", 4 * time.Second}, step{"driver hangs", 10 * time.Second})
		gl.checkInvariants(t, apps, 3*time.Minute)
		g.w.checkInvariants(t, 3*time.Minute)
		g.recordRepeats(t)
	})
}
