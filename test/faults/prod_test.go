package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/test/framework"
	"github.com/snapkeeper/snapkeeper/test/framework/faultproxy"
)

// prodRig is a scenario on the production-shaped plane (three etcd
// members, two API servers): two controller replicas (binder and CSI side
// in each, with the chart's leader election), each in a seat of its own:
// seat i talks to API server i through fault proxy api[i], as user
// framework.SeatUser(i), and to the driver through fault proxy csi[i]. The
// replicas are ours (one controller process per seat) or the community's
// (snapshot-controller and csi-snapshotter per seat, at our client limits).
// A process that exits (both pairs exit when they lose a Lease) is started
// again in its seat, as its pod would be. Every fault injected, every
// operation of the workload (with its outcome and attempts), every restart
// and every verdict is written to the scenario's record (record.jsonl next
// to the logs); the invariants are checked from the world's operations,
// the API servers' audit logs and the driver's call log.
type prodRig struct {
	s         *framework.Scenario
	w         *world
	api       []*faultproxy.Proxy
	csi       []*faultproxy.Proxy
	rec       *record
	leases    []string
	kc        []string // per seat: its kubeconfig
	community bool
	groups    bool

	mu    sync.Mutex
	procs [][]*framework.Component // per seat, per role
	ids   [][]string               // per seat: its identity for each Lease
	// restarts counts the processes started again after they exited.
	restarts int
}

// seats is the number of controller seats of a rig.
const seats = 2

// Pairs of replicas a rig runs.
const (
	pairOurs      = "ours"
	pairCommunity = "community"
)

// prodPairs are the pairs the TestProd* scenarios run: ours, unless
// SNAPKEEPER_PROD_PAIRS (comma-separated: ours, community) chooses. The
// community pair's outcomes are findings about the peer, recorded side by
// side in docs/history/runs.md, and never gate a run of ours.
func prodPairs() []string {
	if v := os.Getenv("SNAPKEEPER_PROD_PAIRS"); v != "" {
		return strings.Split(v, ",")
	}
	return []string{pairOurs}
}

// eachPair runs body as a subtest per pair of prodPairs.
func eachPair(t *testing.T, body func(t *testing.T, pair string)) {
	for _, pair := range prodPairs() {
		t.Run(pair, func(t *testing.T) { body(t, pair) })
	}
}

// newProdRig starts the scenario's driver with faults on the production
// plane, the proxies of both seats, and a replica of pair in each; seat
// 0's replica holds both Leases when it returns. The rig's supervisor runs
// until the test ends.
func newProdRig(t *testing.T, rng *rand.Rand, pair string, faults []framework.FaultRule) *prodRig {
	t.Helper()
	return newProdRigWith(t, rng, pair, framework.ScenarioOptions{Faults: faults})
}

// newProdRigWith is newProdRig for a scenario of options o (ControllerArgs
// groupArgs turn group snapshots on in both pairs).
func newProdRigWith(t *testing.T, rng *rand.Rand, pair string, o framework.ScenarioOptions) *prodRig {
	t.Helper()
	o.DriverPrefix, o.NoController, o.Production = "prod", true, true
	s := framework.NewScenario(t, o)
	// Unix socket paths are limited to 108 bytes: a short directory.
	dir, err := os.MkdirTemp("", "skp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	g := &prodRig{s: s, w: newWorld(s), rec: newRecord(t, s.Env.TempDir(t, "record")),
		leases: []string{binderLease, snapshot.CSILeaseName(s.Drv.Name)}, community: pair == pairCommunity,
		groups: slices.Equal(o.ControllerArgs, groupArgs)}
	servers := s.Env.APIServers()
	for i := range seats {
		api, err := faultproxy.New(faultproxy.Options{Network: "tcp", Listen: "127.0.0.1:0", Target: servers[i].HostPort(), Seed: rng.Uint64()})
		if err != nil {
			t.Fatal(err)
		}
		csi, err := faultproxy.New(faultproxy.Options{Network: "unix", Listen: filepath.Join(dir, fmt.Sprintf("csi-%d.sock", i)), Target: s.Drv.Socket, Seed: rng.Uint64()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { api.Close(); csi.Close() })
		g.api, g.csi = append(g.api, api), append(g.csi, csi)
		kc := filepath.Join(dir, fmt.Sprintf("seat-%d.kubeconfig", i))
		if err := framework.WriteKubeconfig(kc, "https://"+api.Addr(), framework.SeatToken(i)); err != nil {
			t.Fatal(err)
		}
		g.kc = append(g.kc, kc)
		g.procs = append(g.procs, make([]*framework.Component, len(g.roles())))
		g.ids = append(g.ids, nil)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		<-done
		g.mu.Lock()
		defer g.mu.Unlock()
		for _, seat := range g.procs {
			for _, c := range seat {
				if c != nil {
					c.Proc.Stop(15 * time.Second)
				}
			}
		}
	})
	for i := range seats {
		for role := range g.roles() {
			if err := g.start(t, i, role); err != nil {
				close(done)
				t.Fatal(err)
			}
		}
		if i == 0 {
			waitHolder(t, s, g.leases, g.ids[0], 30*time.Second)
		}
	}
	go func() { defer close(done); g.supervise(ctx, t) }()
	g.rec.add("rig", pair+" pair: leader in seat 0, standby in seat 1")
	return g
}

// roles are the processes of a seat.
func (g *prodRig) roles() []string {
	if g.community {
		return []string{"snapshot-controller", "csi-snapshotter"}
	}
	return []string{"controller"}
}

// leArgs are the chart's leader election in the seat's namespace.
func (g *prodRig) leArgs() []string {
	return []string{"--leader-election=true", "--leader-election-namespace=" + g.s.NS,
		"--leader-election-lease-duration=" + chartLeaseDuration.String(),
		"--leader-election-renew-deadline=" + chartRenewDeadline.String(),
		"--leader-election-retry-period=" + chartRetryPeriod.String()}
}

// start starts process role (an index of roles) of seat i and records the
// seat's Lease identities.
func (g *prodRig) start(t *testing.T, i, role int) error {
	dir := g.s.Env.TempDir(t, fmt.Sprintf("seat-%d", i))
	var c *framework.Component
	var ids []string
	if g.community {
		host := fmt.Sprintf("community-seat-%d", i)
		args := append([]string{"--kubeconfig=" + g.kc[i], "-v=3", "--kube-api-qps=100", "--kube-api-burst=200", "--worker-threads=100"}, g.leArgs()...)
		if g.groups {
			args = append(args, groupArgs...)
		}
		name := g.roles()[role]
		var drv *framework.CSIDriver
		if name == "csi-snapshotter" {
			args, drv = append(args, "--csi-address="+g.csi[i].Addr(), "--timeout=10s"), g.s.Drv
		}
		p, err := g.s.Env.LaunchCommunityAs(dir, name, host, args, nil, drv)
		if err != nil {
			return err
		}
		c = &framework.Component{Name: name + "-seat-" + fmt.Sprint(i), Proc: p}
		ids = []string{host, host}
	} else {
		args := append(slices.Clone(g.s.Args), g.leArgs()...)
		args = append(args, "-v=2", "--retry-interval-max=2s", "--kubeconfig="+g.kc[i], "--csi-address="+g.csi[i].Addr())
		var err error
		c, err = g.s.Env.StartComponent(dir, fmt.Sprintf("controller-seat-%d", i), "./cmd/controller", args...)
		if err != nil {
			return err
		}
		for _, l := range g.leases {
			id, err := identityIn(c, l, 20*time.Second)
			if err != nil {
				c.Proc.Stop(5 * time.Second)
				return err
			}
			ids = append(ids, id)
		}
	}
	g.w.addController(c)
	g.mu.Lock()
	g.procs[i][role], g.ids[i] = c, ids
	g.mu.Unlock()
	return nil
}

// supervise starts again, in its seat, every process that exited.
func (g *prodRig) supervise(ctx context.Context, t *testing.T) {
	for ctx.Err() == nil {
		for i := range seats {
			for role := range g.roles() {
				g.mu.Lock()
				c := g.procs[i][role]
				g.mu.Unlock()
				if c == nil || !c.Proc.Exited() || ctx.Err() != nil {
					continue
				}
				g.rec.add("restart", fmt.Sprintf("seat %d %s exited (%s); started again", i, g.roles()[role], lastLine(c.Proc.Tail(400))))
				if err := g.start(t, i, role); err != nil {
					g.rec.add("restart", fmt.Sprintf("seat %d %s: %v", i, g.roles()[role], err))
					continue
				}
				g.mu.Lock()
				g.restarts++
				g.mu.Unlock()
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// leaderSeat is the seat whose replica holds both Leases, or -1.
func (g *prodRig) leaderSeat() int {
	h := holders(g.s, g.leases)
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, ids := range g.ids {
		if slices.Equal(h, ids) {
			return i
		}
	}
	return -1
}

// waitLeader waits until one seat holds both Leases and says which, and
// when it was seen.
func (g *prodRig) waitLeader(t *testing.T, not int, timeout time.Duration) (int, time.Time) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if seat := g.leaderSeat(); seat >= 0 && seat != not {
			return seat, time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("no seat but %d holds both Leases %v after %v: holders %v", not, g.leases, timeout, holders(g.s, g.leases))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// acquired is when the seat's replica took the first of the Leases it holds
// (their acquireTime): it may write from then on, a moment before
// waitLeader sees it hold both.
func (g *prodRig) acquired(seat int) time.Time {
	g.mu.Lock()
	ids := slices.Clone(g.ids[seat])
	g.mu.Unlock()
	var first time.Time
	for i, name := range g.leases {
		l, err := g.s.Env.Kube.CoordinationV1().Leases(g.s.NS).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != ids[i] || l.Spec.AcquireTime == nil {
			continue
		}
		if t := l.Spec.AcquireTime.Time; first.IsZero() || t.Before(first) {
			first = t
		}
	}
	return first
}

// fault sets the faults of a proxy and records them.
func (g *prodRig) fault(what string, p *faultproxy.Proxy, f faultproxy.Faults) {
	p.Set(f)
	g.rec.add("fault", fmt.Sprintf("%s: %+v", what, f))
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// record is the scenario's log of faults, operations and verdicts, one
// JSON object per line.
type record struct {
	t    *testing.T
	mu   sync.Mutex
	f    *os.File
	path string
}

func newRecord(t *testing.T, dir string) *record {
	path := filepath.Join(dir, "record.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	t.Logf("record of faults and verdicts: %s", path)
	return &record{t: t, f: f, path: path}
}

func (r *record) add(kind, detail string) {
	r.write(kind, detail)
	r.t.Logf("%s: %s", kind, detail)
}

// write adds a line to the record only (operations: too many to log).
func (r *record) write(kind, detail string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, _ := json.Marshal(map[string]string{"time": time.Now().Format(time.RFC3339Nano), "kind": kind, "detail": detail})
	r.f.Write(append(b, '\n'))
}

// checkNoLateWrites fails the test for every write to the snapshot APIs
// that seat's user got accepted after from (the moment another replica
// took its Leases over) and before until (zero: the end of the test): a
// replica that lost its Leases must not change anything any more, whatever
// its connection delivers late.
func (g *prodRig) checkNoLateWrites(t *testing.T, seat int, from, until time.Time) {
	t.Helper()
	events, err := g.s.Env.AuditEvents()
	if err != nil {
		t.Fatalf("audit log: %v", err)
	}
	var late []string
	n := 0
	for _, e := range events {
		if e.User.Username != framework.SeatUser(seat) || !e.Accepted() || e.ObjectRef.Resource == "leases" {
			continue
		}
		n++
		if e.Done.After(from) && (until.IsZero() || e.Done.Before(until)) {
			late = append(late, e.String())
		}
	}
	sort.Strings(late)
	g.rec.add("verdict", fmt.Sprintf("seat %d: %d snapshot writes accepted in all, %d after it lost its Leases at %s", seat, n, len(late), from.Format("15:04:05.000")))
	for _, l := range late {
		t.Errorf("write of seat %d accepted after it lost its Leases: %s", seat, l)
	}
}

// patientCreate is world.create retried, as a user or a GitOps tool
// re-applying would, while the plane refuses writes (no quorum, an API
// server cut off): until it succeeds or ten minutes pass (overlapping
// quorum losses have kept an API server from writing for over two). A create answered with an error may
// still have been stored; AlreadyExists on a retry counts as done.
func (g *prodRig) patientCreate(ctx context.Context, name, pvc string) error {
	return g.recordOp(ctx, "create "+name+" of "+pvc, func(ctx context.Context) error {
		err := g.w.create(ctx, name, pvc)
		if !apierrors.IsAlreadyExists(err) {
			return err
		}
		vs, err := g.s.Env.Snap.SnapshotV1().VolumeSnapshots(g.s.NS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		g.w.created(name, vs.UID)
		return nil
	})
}

// patientRemove is world.remove retried as patientCreate.
func (g *prodRig) patientRemove(ctx context.Context, name string) error {
	return g.recordOp(ctx, "delete "+name, func(ctx context.Context) error { return g.w.remove(ctx, name) })
}

// recordOp runs op patiently and writes it with its outcome and attempts
// to the record.
func (g *prodRig) recordOp(ctx context.Context, what string, op func(context.Context) error) error {
	attempts := 0
	start := time.Now()
	err := patiently(ctx, func(ctx context.Context) error { attempts++; return op(ctx) })
	outcome := "ok"
	if err != nil {
		outcome = err.Error()
	}
	g.rec.write("op", fmt.Sprintf("%s: %s after %d attempts in %v", what, outcome, attempts, time.Since(start).Round(time.Millisecond)))
	return err
}

func patiently(ctx context.Context, op func(context.Context) error) error {
	deadline := time.Now().Add(10 * time.Minute)
	for {
		octx, cancel := context.WithTimeout(ctx, 15*time.Second)
		err := op(octx)
		cancel()
		if err == nil || ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// workload returns a workload of the rig's patient operations.
func (g *prodRig) workload(creates, deletes, claims int, spread time.Duration) *workload {
	wl := &workload{Creates: creates, Deletes: deletes, Claims: claims, Create: g.patientCreate, Remove: g.patientRemove}
	wl.Pause = spread / time.Duration(wl.ops())
	return wl
}

// serverClient is an admin client of API server i, bypassing the proxies.
func (g *prodRig) serverClient(t *testing.T, i int) snapclient.Interface {
	t.Helper()
	cfg := rest.CopyConfig(g.s.Env.Config)
	cfg.Host = g.s.Env.APIServers()[i].URL
	c, err := snapclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// recordRepeats records how many snapshot names the driver answered
// CreateSnapshot OK for more than once, and how many snapshot ids it
// answered DeleteSnapshot OK for more than once (idempotent repeats, the
// same id each time: checkNoDoubleCut fails the test on a second id).
func (g *prodRig) recordRepeats(t *testing.T) {
	t.Helper()
	creates, deletes := map[string]int{}, map[string]int{}
	for _, e := range g.s.Drv.CallLog(t, 0).Entries {
		switch {
		case e.Code != "OK":
		case e.Method == "CreateSnapshot":
			creates[e.Name]++
		case e.Method == "DeleteSnapshot":
			deletes[e.SnapshotID]++
		}
	}
	more := func(m map[string]int) (n int) {
		for _, c := range m {
			if c > 1 {
				n++
			}
		}
		return n
	}
	g.rec.add("verdict", fmt.Sprintf("CreateSnapshot answered OK more than once for %d of %d names, DeleteSnapshot for %d of %d ids",
		more(creates), len(creates), more(deletes), len(deletes)))
}
