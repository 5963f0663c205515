package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// system is one set of controllers under test.
type system struct {
	ID    string // flag value: ours, community-default, community-tuned
	Label string // table heading
	Flags string // for the report
	// start runs the controllers against env and the CSI socket in dir.
	start func(env *framework.Env, dir, socket string, o startOpts) (*running, error)
	// perSnapshotBudget bounds each phase: timeout = 2m + n*budget.
	perSnapshotBudget time.Duration
}

// startOpts are the per-start settings of a system.
type startOpts struct {
	extra []string // flags for every binary (a feature gate)
	// readyTimeout bounds the wait until the processes serve (0: a
	// minute); a start over many objects lists for longer.
	readyTimeout time.Duration
}

func (o startOpts) deadline() time.Time {
	if o.readyTimeout <= 0 {
		return time.Now().Add(time.Minute)
	}
	return time.Now().Add(o.readyTimeout)
}

// roles are the identities the system's processes run as: the empty
// controller runs as ours do.
func (s *system) roles() []string {
	if s.ours() || s.ID == sysWritesOnly {
		return []string{roleBinder, roleCSISide}
	}
	return []string{roleSnapshotController, roleCSISnapshotter}
}

// ours reports whether the system is our controller (as built, or the
// baseline); not the empty controller (writes-only), which exports none of
// our metrics.
func (s *system) ours() bool { return s.ID == sysOurs || s.ID == sysOursBaseline }

// running is the started controllers of a system.
type running struct {
	procs []*framework.Process
	addrs []string // HTTP endpoints (metrics), same order as procs
	// ours are our controller's processes, whose metrics and profiles the
	// benchmark reads (none for the empty controller).
	ours []*framework.Component
}

func (r *running) pids() []int {
	out := make([]int, len(r.procs))
	for i, p := range r.procs {
		out[i] = p.Pid()
	}
	return out
}

// Stop ends every process and waits for it.
func (r *running) Stop() {
	for _, p := range r.procs {
		p.Stop(15 * time.Second)
	}
}

// exited reports a process that ended on its own, with its log tail.
func (r *running) exited() error {
	for _, p := range r.procs {
		if p.Exited() {
			return fmt.Errorf("%s exited:\n%s", p.Name, p.Tail(3000))
		}
	}
	return nil
}

const (
	sysOurs             = "ours"
	sysCommunityDefault = "community-default"
	sysCommunityTuned   = "community-tuned"
	sysCommunityEqual   = "community-equal"
	sysWritesOnly       = "writes-only"
)

var communityTunedFlags = []string{"--kube-api-qps=100", "--kube-api-burst=200", "--worker-threads=100"}

// communityEqualFlags are our built defaults as the community's flags.
func communityEqualFlags() []string {
	d := ourDefaultValues()
	if len(d) < 3 {
		return nil
	}
	return []string{"--kube-api-qps=" + d["kube-api-qps"], "--kube-api-burst=" + d["kube-api-burst"], "--worker-threads=" + d["worker-threads"]}
}

// allSystems lists the systems; oursArgs are extra flags for ours (for
// experiments: the label then says so).
func allSystems(oursArgs []string) []*system {
	ours := &system{
		ID: sysOurs, Label: "snapkeeper (default flags)",
		perSnapshotBudget: 50 * time.Millisecond,
	}
	ours.start = func(env *framework.Env, dir, sock string, o startOpts) (*running, error) {
		o.extra = append(append([]string(nil), oursArgs...), o.extra...)
		r, err := startOurs(env, dir, sock, o)
		if err == nil && ours.Flags == "" {
			extra := strings.Join(append([]string{""}, oursArgs...), " ")
			ours.Flags = "two processes, `--components=binder" + extra + "` and `--components=csi --csi-address=<sock>" + extra + "` (" + ourDefaults() + ")"
			if len(oursArgs) > 0 {
				ours.Flags += " **with extra flags: not the defaults**"
			}
		}
		return r, err
	}
	if len(oursArgs) > 0 {
		ours.Label = "snapkeeper " + strings.Join(oursArgs, " ")
	}
	all := []*system{ours}
	if baselineRev != "" {
		all = append(all, baselineSystem(oursArgs))
	}
	return append(all,
		&system{
			ID: sysCommunityEqual, Label: "community " + framework.CommunityVersion() + ", our client limits and workers",
			Flags: "both binaries: `" + strings.Join(communityEqualFlags(), " ") + "` (snapkeeper's defaults as built)",
			start: func(env *framework.Env, dir, sock string, o startOpts) (*running, error) {
				f := communityEqualFlags()
				if f == nil {
					return nil, fmt.Errorf("snapkeeper's defaults could not be read from its -h")
				}
				o.extra = append(f, o.extra...)
				return startCommunity(env, dir, sock, o)
			},
			perSnapshotBudget: 500 * time.Millisecond,
		},
		&system{
			ID: sysCommunityTuned, Label: "community " + framework.CommunityVersion() + ", QPS 100/burst 200/100 workers",
			Flags: "both binaries: `--kube-api-qps=100 --kube-api-burst=200 --worker-threads=100`",
			start: func(env *framework.Env, dir, sock string, o startOpts) (*running, error) {
				o.extra = append(append([]string(nil), communityTunedFlags...), o.extra...)
				return startCommunity(env, dir, sock, o)
			},
			perSnapshotBudget: 500 * time.Millisecond,
		},
		&system{
			ID: sysCommunityDefault, Label: "community " + framework.CommunityVersion() + ", default flags",
			Flags:             "defaults (QPS 5, burst 10, 10 workers)",
			start:             startCommunity,
			perSnapshotBudget: 6 * time.Second,
		},
		&system{
			ID: sysWritesOnly, Label: "empty controller: the same writes, no logic",
			Flags: "test/bench/writesonly: two processes, `--half=binder` and `--half=csi`, as snapkeeper's binder and CSI side " +
				"(their ServiceAccounts and RBAC, no leader election, QPS 1000, burst 2000, 64 workers each) that send only the " +
				"writes snapkeeper sends for a dynamic snapshot (9 to create, 4 to delete), from informer caches, without CSI calls or events: " +
				"what the API server alone needs to serve those writes",
			start:             startWritesOnly,
			perSnapshotBudget: 50 * time.Millisecond,
		},
	)
}

// startWritesOnly starts the empty controller (test/bench/writesonly) as
// ours is started: its binder half and CSI half as two processes with our
// binder's and CSI side's identities, waiting until both serve /readyz.
// They stay out of running.ours: the benchmark reads no metrics of theirs
// (their /metrics is empty) and takes no profiles of them.
func startWritesOnly(env *framework.Env, dir, _ string, o startOpts) (*running, error) {
	bin, err := framework.OwnBinary("./test/bench/writesonly")
	if err != nil {
		return nil, err
	}
	ownBuilt = "./test/bench/writesonly"
	// o.extra are our controller's flags (a feature gate): not for it.
	r, _, err := startSides(env, dir, bin, []side{
		{roleBinder, "writes-only-binder", []string{"--half=binder"}},
		{roleCSISide, "writes-only-csi", []string{"--half=csi"}},
	}, o)
	return r, err
}

// side is one process of a two-process system: its identity, its name and
// its flags besides --kubeconfig and --http-endpoint.
type side struct {
	role, name string
	args       []string
}

// startSides starts one process of bin per side, each with the kubeconfig
// of its role and an HTTP endpoint of its own, and waits until every one
// serves /readyz (o's timeout each). It returns them as a running system
// and as components.
func startSides(env *framework.Env, dir, bin string, sides []side, o startOpts) (*running, []*framework.Component, error) {
	r := &running{}
	var comps []*framework.Component
	for _, sd := range sides {
		kc, err := kubeconfigFor(env, sd.role)
		if err != nil {
			r.Stop()
			return nil, nil, err
		}
		addr, err := framework.FreeAddr()
		if err != nil {
			r.Stop()
			return nil, nil, err
		}
		p, err := framework.StartProcess(dir, sd.name, bin, append([]string{"--kubeconfig=" + kc, "--http-endpoint=" + addr}, sd.args...))
		if err != nil {
			r.Stop()
			return nil, nil, err
		}
		r.procs, r.addrs = append(r.procs, p), append(r.addrs, addr)
		comps = append(comps, &framework.Component{Name: sd.name, HTTPAddr: addr, Proc: p})
	}
	for _, c := range comps {
		if err := c.WaitReady(time.Until(o.deadline())); err != nil {
			r.Stop()
			return nil, nil, err
		}
	}
	return r, comps, nil
}

// startOurs starts the binder and the CSI side as two processes, as the
// chart deploys them (the binder in its Deployment, the CSI side in the
// driver's pods), each as its own ServiceAccount, both at once, and waits
// until both report their caches synced (/readyz).
func startOurs(env *framework.Env, dir, socket string, o startOpts) (*running, error) {
	bin, err := framework.OwnBinary("./cmd/controller")
	if err != nil {
		return nil, err
	}
	ownBuilt = "./cmd/controller"
	if profileDir != "" {
		o.extra = append([]string{"--enable-pprof"}, o.extra...)
	}
	return startOurBinary(env, dir, socket, bin, o)
}

// startOurBinary is startOurs with the controller binary bin.
func startOurBinary(env *framework.Env, dir, socket, bin string, o startOpts) (*running, error) {
	sides := []side{
		{roleBinder, "snapkeeper-binder", []string{"--components=binder"}},
		{roleCSISide, "snapkeeper-csi-side", []string{"--components=csi", "--csi-address=" + socket}},
	}
	for i := range sides {
		// A pod reads its namespace (for its Leases) from the mounted token.
		if !controllersAsAdmin {
			sides[i].args = append(sides[i].args, "--leader-election-namespace="+accountNamespace(sides[i].role))
		}
		sides[i].args = append(sides[i].args, o.extra...)
	}
	r, comps, err := startSides(env, dir, bin, sides, o)
	if err != nil {
		return nil, err
	}
	r.ours = comps
	return r, nil
}

// startCommunity starts snapshot-controller and csi-snapshotter, built by
// `make bin/snapshot-controller bin/csi-snapshotter`, without leader election.
func startCommunity(env *framework.Env, dir, socket string, o startOpts) (*running, error) {
	r := &running{}
	for _, name := range []string{"snapshot-controller", "csi-snapshotter"} {
		bin, err := framework.Tool(name)
		if err != nil {
			r.Stop()
			return nil, fmt.Errorf("%w (make %s)", err, filepath.Join("bin", name))
		}
		addr, err := framework.FreeAddr()
		if err != nil {
			r.Stop()
			return nil, err
		}
		kc, err := kubeconfigFor(env, name)
		if err != nil {
			r.Stop()
			return nil, err
		}
		args := []string{"--kubeconfig=" + kc, "--http-endpoint=" + addr, "--leader-election=false"}
		if name == "csi-snapshotter" {
			args = append(args, "--csi-address="+socket)
		}
		p, err := framework.StartProcess(dir, name, bin, append(args, o.extra...))
		if err != nil {
			r.Stop()
			return nil, err
		}
		r.procs = append(r.procs, p)
		r.addrs = append(r.addrs, addr)
	}
	// The community binaries have no readiness endpoint: wait until their
	// metrics answer, then give the informers a moment to list.
	deadline := o.deadline()
	for i, addr := range r.addrs {
		if err := r.procs[i].WaitServing("http://"+addr+"/metrics", deadline); err != nil {
			r.Stop()
			return nil, err
		}
	}
	time.Sleep(2 * time.Second)
	if err := r.exited(); err != nil {
		r.Stop()
		return nil, err
	}
	return r, nil
}

var defaultFlag = regexp.MustCompile(`(?m)^\s+-(kube-api-qps|kube-api-burst|worker-threads) \w+\n.*\(default ([^)]+)\)`)

// ourDefaults reads the client limits and workers that the built controller
// defaults to from its --help, so the report never states stale defaults.
func ourDefaults() string {
	d := ourDefaultValues()
	if len(d) < 3 {
		return "defaults unknown"
	}
	return fmt.Sprintf("defaults as built: QPS %s, burst %s, %s workers per side", d["kube-api-qps"], d["kube-api-burst"], d["worker-threads"])
}

// ourDefaultValues are the built controller's defaults of kube-api-qps,
// kube-api-burst and worker-threads, from its -h (built once, cached).
func ourDefaultValues() map[string]string {
	bin, err := framework.OwnBinary("./cmd/controller")
	if err != nil {
		return nil
	}
	ownBuilt = "./cmd/controller"
	out, _ := exec.Command(bin, "-h").CombinedOutput()
	d := map[string]string{}
	for _, m := range defaultFlag.FindAllStringSubmatch(string(out), -1) {
		d[m[1]] = m[2]
	}
	return d
}

// ourMetrics returns our controller's own write counter and retries, for
// the cross-check and the "what dominated" notes.
func ourMetrics(ctx context.Context, r *running) (map[string]float64, error) {
	if r.ours == nil {
		return nil, nil
	}
	out := map[string]float64{}
	for _, m := range []string{"snapkeeper_api_writes_total", "workqueue_retries_total", "workqueue_adds_total"} {
		var samples []sample
		for _, c := range r.ours {
			s, err := scrape(ctx, c.HTTPAddr, m)
			if err != nil {
				return nil, err
			}
			samples = append(samples, s...)
		}
		for _, s := range samples {
			key := m
			for _, l := range []string{"component", "resource", "verb", "result", "name"} {
				if v, ok := s.Labels[l]; ok {
					key += " " + l + "=" + v
				}
			}
			out[key] += s.Value
		}
	}
	return out, nil
}

// mkdir makes a subdirectory of the control plane's directory.
func mkdir(env *framework.Env, name string) (string, error) {
	d := filepath.Join(env.Dir, name)
	return d, os.MkdirAll(d, 0o755)
}
