package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/snapkeeper/snapkeeper/pkg/csi/csitest"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

// bed is the start sequence every scenario shares: a fresh production-like
// control plane (planeOptions) with the benchmark's counted admin clients,
// the API server's counters, the mock CSI driver and, once started, one
// system's controllers. close stops them in reverse order and keeps the
// logs of a failed run.
type bed struct {
	tag   string // log prefix
	env   *framework.Env
	cl    *clients
	api   *apiServer
	plane []int // kube-apiserver and etcd
	// apiPids and etcdPids: the two parts of plane, for their memory.
	apiPids, etcdPids []int
	dir               string // logs of the driver and the controllers
	drv               *framework.CSIDriver
	run               *running // nil until startSystem
	keep              bool
}

// newBed starts a control plane; the driver's and the controllers' logs go
// to its subdirectory dir.
func newBed(ctx context.Context, tag, dir string, keep bool) (*bed, error) {
	logf("[%s] starting a control plane", tag)
	env, err := framework.StartWith(ctx, planeOptions)
	if err != nil {
		return nil, fmt.Errorf("control plane: %w", err)
	}
	b := &bed{tag: tag, env: env, api: newAPIServer(env), keep: keep,
		apiPids: findPids("bin/kube-apiserver", env.Dir), etcdPids: findPids("bin/etcd", env.Dir)}
	b.plane = append(append([]int(nil), b.apiPids...), b.etcdPids...)
	if b.cl, err = newClients(env); err == nil {
		b.dir, err = mkdir(env, dir)
	}
	if err != nil {
		b.close(&err)
		return nil, err
	}
	return b, nil
}

// startDriver starts the mock CSI driver.
func (b *bed) startDriver(o framework.CSIDriverOptions) error {
	d, err := framework.StartCSIDriver(b.dir, o)
	if err != nil {
		return fmt.Errorf("mock CSI driver: %w", err)
	}
	b.drv = d
	return nil
}

// startSystem starts sys against the driver (stopping the controllers of an
// earlier start first) and returns how long its processes took to serve.
func (b *bed) startSystem(sys *system, o startOpts) (time.Duration, error) {
	b.stopSystem()
	start := time.Now()
	run, err := sys.start(b.env, b.dir, b.drv.Socket, o)
	if err != nil {
		return 0, fmt.Errorf("start %s: %w", sys.ID, err)
	}
	b.run = run
	return time.Since(start), nil
}

// stopSystem stops the running controllers, if any.
func (b *bed) stopSystem() {
	if b.run != nil {
		b.run.Stop()
		b.run = nil
	}
}

// exited reports a controller that ended on its own (nil before a start).
func (b *bed) exited() error {
	if b.run == nil {
		return nil
	}
	return b.run.exited()
}

// close adds the controllers' RBAC refusals to a failure, then stops the
// controllers, the driver and the control plane (keeping its directory when
// *err is set or -keep).
func (b *bed) close(err *error) {
	if b.run != nil {
		withRefusals(b.run, err)
	}
	b.stopSystem()
	if b.drv != nil {
		b.drv.Stop()
	}
	stopEnv(b.env, b.keep, err)
}

// mark opens a measured window once nobody writes (see takeMark).
func (b *bed) mark(ctx context.Context, quiet time.Duration) (*mark, error) {
	return takeMark(ctx, b.api, b.cl, b.drv, b.run, b.plane, quiet)
}

// driverOptions gives the mock driver latency with -csi-latency, and with
// -csi-ready-after "min-max" snapshots that become ready only after a time
// between min and max (the mock's --ready-after, --ready-after-max).
func driverOptions(latency bool, readyAfter string) framework.CSIDriverOptions {
	var o framework.CSIDriverOptions
	if latency {
		o.Faults = &framework.Faults{Rules: []framework.FaultRule{
			{Method: "CreateSnapshot", Latency: csitest.Duration(200 * time.Millisecond)},
			{Method: "ListSnapshots", Latency: csitest.Duration(50 * time.Millisecond)},
		}}
	}
	if readyAfter != "" {
		lo, hi, _ := strings.Cut(readyAfter, "-")
		o.Args = append(o.Args, "--ready-after="+lo)
		if hi != "" {
			o.Args = append(o.Args, "--ready-after-max="+hi)
		}
	}
	return o
}

// stopEnv stops the control plane and removes its directory unless keep is
// set or the run failed.
func stopEnv(env *framework.Env, keep bool, err *error) {
	env.Stop()
	if keep || *err != nil {
		logf("logs kept in %s", env.Dir)
		return
	}
	os.RemoveAll(env.Dir)
}

// loadAvg is the 1-, 5- and 15-minute load average: the machine is shared.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s bench: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}
