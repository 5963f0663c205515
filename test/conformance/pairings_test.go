package conformance

import (
	"os"
	"time"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// Implementations of a component.
const (
	ours      = "ours"
	community = "community"
)

// pairing is which implementation runs the binder (cluster-wide, like
// snapshot-controller) and which runs the CSI side (per driver, like the
// csi-snapshotter sidecar).
type pairing struct {
	Binder, CSI string
}

// ID is "binder-csi", e.g. "ours-community"; Label is "binder/csi".
func (p pairing) ID() string    { return p.Binder + "-" + p.CSI }
func (p pairing) Label() string { return p.Binder + "/" + p.CSI }

// reference is the pairing every other one is compared with.
var reference = pairing{community, community}

// allPairings lists the reference first.
var allPairings = []pairing{reference, {ours, ours}, {ours, community}, {community, ours}}

// proc is a started controller process.
type proc struct {
	name string
	p    *framework.Process
}

func (p *proc) stop() { p.p.Stop(15 * time.Second) }

// communityFlags are the "community-tuned" flags of test/bench: with the
// default QPS 5 a binder shared by a pairing's concurrent scenarios queues
// its writes for seconds, and when a write lands would decide outcomes.
var communityFlags = []string{"--kube-api-qps=100", "--kube-api-burst=200", "--worker-threads=100"}

// No binder or CSI side of any pairing gets --feature-gates: volume group
// snapshots are on by default in both (since v8.7.0), so the group
// scenarios compare the defaults and the single-snapshot ones show that
// groups being on changes nothing for them.

// startBinder starts the binder of impl with extra flags (ours with its
// defaults; the community's with communityFlags, no leader election).
func startBinder(env *framework.Env, dir, impl string, extra []string) (*proc, error) {
	if impl == ours {
		return startOurs(env, dir, "binder", append([]string{"--components=binder", "-v=2"}, extra...), nil)
	}
	return startCommunity(env, dir, "snapshot-controller", append(append([]string{"-v=3"}, communityFlags...), extra...), nil, nil)
}

// startCSISide starts the CSI side of impl next to drv; node, when set, is
// a per-node deployment (--node-deployment, NODE_NAME).
func startCSISide(env *framework.Env, dir, impl string, drv *framework.CSIDriver, node string, extra []string) (*proc, error) {
	args := []string{"--csi-address=" + drv.Socket}
	var envs []string
	name := "csi"
	if node != "" {
		args = append(args, "--node-deployment")
		envs = append(envs, "NODE_NAME="+node)
		name += "-" + node
	}
	args = append(args, extra...)
	if impl == ours {
		return startOurs(env, dir, name, append([]string{"--components=csi", "-v=2"}, args...), envs)
	}
	return startCommunity(env, dir, "csi-snapshotter", append(append([]string{"-v=3"}, communityFlags...), args...), envs, drv)
}

// envOursBinary names a prebuilt controller binary to run as "ours" instead
// of building ./cmd/controller (to compare another build, e.g. a release).
const envOursBinary = "SNAPKEEPER_CONFORMANCE_OURS"

func oursBinary() (string, error) {
	if p := os.Getenv(envOursBinary); p != "" {
		return p, nil
	}
	return framework.OwnBinary("./cmd/controller")
}

func startOurs(env *framework.Env, dir, name string, args, envs []string) (*proc, error) {
	bin, err := oursBinary()
	if err != nil {
		return nil, err
	}
	addr, err := framework.FreeAddr()
	if err != nil {
		return nil, err
	}
	full := append([]string{"--kubeconfig=" + env.Kubeconfig, "--http-endpoint=" + addr}, args...)
	p, err := framework.StartProcess(dir, "ours-"+name, bin, full, envs...)
	if err != nil {
		return nil, err
	}
	c := &framework.Component{Name: "ours-" + name, HTTPAddr: addr, Proc: p}
	if err := c.WaitReady(60 * time.Second); err != nil {
		p.Stop(5 * time.Second)
		return nil, err
	}
	return &proc{name: c.Name, p: p}, nil
}

// startCommunity starts bin/<name> without leader election
// (Env.LaunchCommunity).
func startCommunity(env *framework.Env, dir, name string, args, envs []string, drv *framework.CSIDriver) (*proc, error) {
	p, err := env.LaunchCommunity(dir, name, append([]string{"--leader-election=false"}, args...), envs, drv)
	if err != nil {
		return nil, err
	}
	return &proc{name: "community-" + name, p: p}, nil
}
