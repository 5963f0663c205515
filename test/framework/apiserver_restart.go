package framework

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The fault suite (test/faults) kills the API server under running
// clients: KillAPIServer SIGKILLs it, StartAPIServerAgain starts the same
// binary with the same arguments, so on the same etcd, port, certificates,
// tokens and service-account key; every client (kubeconfig, rest.Config)
// keeps working once it is back. CompactEtcd compacts etcd's history, so
// that watches resuming from an older resource version are answered "too
// old resource version" and their clients must list again.

// APIServerPid is the pid of the running kube-apiserver.
func (cp *ControlPlane) APIServerPid() int { return cp.apiserver.Pid() }

// KillAPIServer SIGKILLs kube-apiserver and waits until it is gone.
func (cp *ControlPlane) KillAPIServer() error {
	cp.apiserver.Signal(syscall.SIGKILL)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cp.apiserver.Wait(ctx); err == context.DeadlineExceeded {
		return fmt.Errorf("kube-apiserver survived SIGKILL")
	}
	return nil
}

// StartAPIServerAgain starts kube-apiserver as it was started before (its
// log goes on in the same file) and waits until it is ready.
func (cp *ControlPlane) StartAPIServerAgain(ctx context.Context) error {
	if !cp.apiserver.Exited() {
		return fmt.Errorf("kube-apiserver still runs (pid %d)", cp.apiserver.Pid())
	}
	old := cp.apiserver.cmd
	p, err := StartProcess(cp.Dir, "kube-apiserver", old.Path, old.Args[1:])
	if err != nil {
		return err
	}
	cp.apiserver = p
	return cp.waitReady(ctx)
}

// EtcdURL is the client URL of etcd.
func (cp *ControlPlane) EtcdURL() string {
	for _, a := range cp.etcd.cmd.Args {
		if v, ok := strings.CutPrefix(a, "--advertise-client-urls="); ok {
			return v
		}
	}
	return ""
}

// CompactEtcd compacts etcd up to its current revision through etcd's
// JSON gateway (no etcd client in this module) and returns that revision.
func (cp *ControlPlane) CompactEtcd(ctx context.Context) (int64, error) {
	var rng struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
	}
	// A range over one key answers the store's current revision.
	if err := etcdPost(ctx, cp.EtcdURL()+"/v3/kv/range", `{"key":"AA=="}`, &rng); err != nil {
		return 0, err
	}
	rev, err := strconv.ParseInt(rng.Header.Revision, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("etcd revision %q: %w", rng.Header.Revision, err)
	}
	body := fmt.Sprintf(`{"revision":%d,"physical":true}`, rev)
	if err := etcdPost(ctx, cp.EtcdURL()+"/v3/kv/compaction", body, nil); err != nil {
		return 0, err
	}
	return rev, nil
}

func etcdPost(ctx context.Context, url, body string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader([]byte(body)))
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("etcd %s: %s: %s", url, resp.Status, b)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(b, out)
}
