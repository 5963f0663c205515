package framework

import (
	"context"
	"fmt"
	"time"
)

// LaunchCommunity starts the community's bin/<name> (snapshot-controller or
// csi-snapshotter, built by `make bin/<name>`; bin/<name>-<version> with
// SNAPKEEPER_COMMUNITY=previous, see Tool) with the admin kubeconfig, a
// free --http-endpoint and args, logs in dir as "community-<name>.log". It
// waits until the process serves metrics (the community binaries have no
// readiness endpoint); for a csi-snapshotter next to drv also until it has
// asked the driver for its capabilities (it starts its informers right
// after), then gives the informers a moment to list. The caller stops the
// process.
func (e *Env) LaunchCommunity(dir, name string, args, envs []string, drv *CSIDriver) (*Process, error) {
	return e.LaunchCommunityAs(dir, name, "", args, envs, drv)
}

// LaunchCommunityAs is LaunchCommunity in a UTS namespace of its own whose
// host name is host (when not ""): the community binaries take their
// leader-election identity from the host name, so two replicas on one
// machine need two names (as two pods have). It needs unshare(1) and the
// privilege to use it.
func (e *Env) LaunchCommunityAs(dir, name, host string, args, envs []string, drv *CSIDriver) (*Process, error) {
	bin, err := Tool(name) // its error names the make target
	if err != nil {
		return nil, err
	}
	addr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	var since int64
	if drv != nil {
		log, err := drv.GetCallLog(context.Background(), 0)
		if err != nil {
			return nil, err
		}
		since = log.Last
	}
	full := append([]string{"--kubeconfig=" + e.Kubeconfig, "--http-endpoint=" + addr}, args...)
	logName := "community-" + name
	if host != "" {
		full = append([]string{"-u", "sh", "-c", `hostname "$0" && exec "$@"`, host, bin}, full...)
		bin, logName = "unshare", logName+"-"+host
	}
	p, err := StartProcess(dir, logName, bin, full, envs...)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(60 * time.Second)
	if err := p.WaitServing("http://"+addr+"/metrics", deadline); err != nil {
		p.Stop(15 * time.Second)
		return nil, err
	}
	for drv != nil {
		log, err := drv.GetCallLog(context.Background(), since)
		if err == nil && HasCall(log, "ControllerGetCapabilities") {
			break
		}
		if p.Exited() || time.Now().After(deadline) {
			p.Stop(15 * time.Second)
			return nil, fmt.Errorf("%s did not ask the driver for its capabilities:\n%s", name, p.Tail(3000))
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(1500 * time.Millisecond)
	if p.Exited() {
		return nil, fmt.Errorf("%s exited:\n%s", name, p.Tail(3000))
	}
	return p, nil
}

// HasCall reports whether log holds a call of method (short name).
func HasCall(log CallLog, method string) bool {
	for _, e := range log.Entries {
		if e.Method == method {
			return true
		}
	}
	return false
}

// StartCommunity is LaunchCommunity for a test: the log in a directory of
// its own, the process stopped when the test ends, the end of its log shown
// when the test failed.
func (e *Env) StartCommunity(t T, name string, args []string, drv *CSIDriver) *Process {
	t.Helper()
	p, err := e.LaunchCommunity(e.TempDir(t, name), name, args, nil, drv)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s log (tail):\n%s", name, p.Tail(6000))
		}
		p.Stop(15 * time.Second)
	})
	return p
}
