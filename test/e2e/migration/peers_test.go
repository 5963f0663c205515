package migration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// impl is which generation of the controllers runs.
type impl string

const (
	community impl = "community"
	ours      impl = "ours"
)

// deploymentArgs are the arguments both Deployments keep across the switch:
// the "community-tuned" client flags of test/bench (the community defaults,
// QPS 5 and 10 workers, would make the community side the bottleneck of
// the run) and no leader election, as in test/bench and test/conformance.
var deploymentArgs = []string{"--leader-election=false", "--kube-api-qps=100", "--kube-api-burst=200", "--worker-threads=100", "-v=2"}

// pair is a running binder and CSI side of one generation: two processes,
// like the snapshot-controller Deployment and the sidecar in the driver's pod.
type pair struct {
	impl  impl
	procs []*framework.Process
}

// binderArgs and csiArgs are the command lines of the two processes, the
// same for both generations: the switch changes only the binary (the image).
func (w *world) binderArgs() []string { return append([]string(nil), deploymentArgs...) }

func (w *world) csiArgs() []string {
	return append(append([]string{"--csi-address=" + w.Drv.Socket}, deploymentArgs...), w.nameArgs...)
}

// startPair starts the binder and the CSI side of impl and waits until both
// work: ours until /readyz (caches synced); the community binaries, which
// have no readiness endpoint, until they serve metrics and the sidecar asked
// the driver for its capabilities, then a moment for their informers to list.
func (w *world) startPair(t *testing.T, which impl) *pair {
	t.Helper()
	p := &pair{impl: which}
	t.Cleanup(func() { p.stop() })
	for _, side := range []string{"binder", "csi"} {
		args := w.binderArgs()
		if side == "csi" {
			args = w.csiArgs()
		}
		var err error
		if which == ours {
			err = w.startOurs(p, side, args)
		} else {
			err = w.startCommunity(p, side, args)
		}
		if err != nil {
			t.Fatalf("start %s %s: %v", which, side, err)
		}
	}
	return p
}

func (w *world) startOurs(p *pair, side string, args []string) error {
	bin, err := framework.OwnBinary("./cmd/controller")
	if err != nil {
		return err
	}
	// Without --components our controller picks the side from the command
	// line, as after an image swap. /run/csi on the test host would make it
	// pick the CSI side for the binder too: say it then.
	if _, err := os.Stat("/run/csi"); err == nil && side == "binder" {
		args = append(args, "--components=binder")
	}
	addr, err := framework.FreeAddr()
	if err != nil {
		return err
	}
	full := append([]string{"--kubeconfig=" + w.Env.Kubeconfig, "--http-endpoint=" + addr}, args...)
	proc, err := framework.StartProcess(w.dir, "ours-"+side, bin, full)
	if err != nil {
		return err
	}
	p.procs = append(p.procs, proc)
	c := &framework.Component{Name: "ours-" + side, HTTPAddr: addr, Proc: proc}
	return c.WaitReady(60 * time.Second)
}

func (w *world) startCommunity(p *pair, side string, args []string) error {
	name, drv := "snapshot-controller", (*framework.CSIDriver)(nil)
	if side == "csi" {
		name, drv = "csi-snapshotter", w.Drv
	}
	proc, err := w.Env.LaunchCommunity(w.dir, name, args, nil, drv)
	if err != nil {
		return err
	}
	p.procs = append(p.procs, proc)
	return nil
}

// stopGrace is how long a process may take after SIGTERM before SIGKILL:
// Kubernetes' default terminationGracePeriodSeconds.
const stopGrace = 30 * time.Second

// stop sends SIGTERM to both processes at once, as a rollout that replaces
// both would, and waits until they are gone. It reports how long that took
// and which needed SIGKILL.
func (p *pair) stop() (time.Duration, []string) {
	start := time.Now()
	done := make(chan string, len(p.procs))
	for _, proc := range p.procs {
		go func() {
			t0 := time.Now()
			proc.Stop(stopGrace)
			if time.Since(t0) >= stopGrace {
				done <- proc.Name
				return
			}
			done <- ""
		}()
	}
	var killed []string
	for range p.procs {
		if n := <-done; n != "" {
			killed = append(killed, n)
		}
	}
	return time.Since(start), killed
}

// names lists the processes, for logs.
func (p *pair) names() string {
	var out []string
	for _, proc := range p.procs {
		out = append(out, filepath.Base(proc.LogPath))
	}
	return strings.Join(out, ", ")
}
