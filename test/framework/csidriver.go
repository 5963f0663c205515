package framework

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/snapkeeper/snapkeeper/pkg/csi/csitest"
)

// MockDriverName is the driver name the mock CSI driver reports by default.
const MockDriverName = "mock.csi.snapkeeper.io"

// CSIDriverOptions configure a mock CSI driver.
type CSIDriverOptions struct {
	Name   string      // driver name; default MockDriverName
	Faults []FaultRule // initial faults
	Args   []string    // extra flags, e.g. --hide-capabilities=LIST_SNAPSHOTS
}

// FaultRule is one fault of the mock driver; BackendSnapshot is one
// snapshot it holds. Both are the Go mirror of its HTTP API in
// pkg/csi/csitest (see hack/tools/kube/mockcsi/faults.go for the meaning).
type (
	FaultRule       = csitest.Rule
	BackendSnapshot = csitest.BackendSnapshot
	BackendGroup    = csitest.BackendGroup
	CallLog         = csitest.CallLog
	CallLogEntry    = csitest.CallLogEntry
)

// CSIDriver is a running mock CSI driver: the Kubernetes e2e mock service
// behind our fault-injecting, serializing gRPC wrapper.
type CSIDriver struct {
	Name     string
	Socket   string // unix socket path (no scheme)
	HTTPAddr string // host:port of its /calls, /calllog, /faults, /snapshots API
	proc     *Process
}

// StartCSIDriver starts the mock driver on a socket in a fresh directory;
// t.Cleanup stops it.
func (e *Env) StartCSIDriver(t T, o CSIDriverOptions) *CSIDriver {
	t.Helper()
	d, err := StartCSIDriver(e.TempDir(t, "csi"), o)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(d.Stop)
	return d
}

// StartCSIDriver starts the mock driver with its socket and log in dir.
func StartCSIDriver(dir string, o CSIDriverOptions) (*CSIDriver, error) {
	bin, err := Tool("mock-csi-driver")
	if err != nil {
		return nil, err
	}
	if o.Name == "" {
		o.Name = MockDriverName
	}
	// Unix socket paths are limited to 108 bytes: keep the socket short.
	sockDir, err := os.MkdirTemp("", "csi-")
	if err != nil {
		return nil, err
	}
	d := &CSIDriver{Name: o.Name, Socket: filepath.Join(sockDir, "csi.sock")}
	ready := filepath.Join(dir, "csi-ready.json")
	args := []string{"--csi-address=" + d.Socket, "--name=" + o.Name,
		"--http-address=127.0.0.1:0", "--ready-file=" + ready}
	if len(o.Faults) > 0 {
		b, _ := json.Marshal(map[string]any{"rules": o.Faults})
		args = append(args, "--faults="+string(b))
	}
	args = append(args, o.Args...)
	d.proc, err = StartProcess(dir, "mock-csi-driver", bin, args)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(ready)
		if err == nil {
			var r struct {
				HTTPAddress string `json:"httpAddress"`
			}
			if json.Unmarshal(b, &r) == nil && r.HTTPAddress != "" {
				d.HTTPAddr = r.HTTPAddress
				return d, nil
			}
		}
		if d.proc.Exited() || time.Now().After(deadline) {
			d.Stop()
			return nil, fmt.Errorf("mock CSI driver did not start:\n%s", d.proc.Tail(2000))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop ends the driver and removes its socket directory.
func (d *CSIDriver) Stop() {
	d.proc.Stop(5 * time.Second)
	os.RemoveAll(filepath.Dir(d.Socket))
}

// Process is the driver's process (for restarts and logs).
func (d *CSIDriver) Process() *Process { return d.proc }

// SetFaults replaces the driver's faults.
func (d *CSIDriver) SetFaults(ctx context.Context, rules ...FaultRule) error {
	if rules == nil {
		rules = []FaultRule{}
	}
	b, _ := json.Marshal(map[string]any{"rules": rules})
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, "http://"+d.HTTPAddr+"/faults", bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("set faults: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("set faults: %s", resp.Status)
	}
	return nil
}

// Calls returns call counts by full gRPC method and result code.
func (d *CSIDriver) Calls(ctx context.Context) (map[string]map[string]int64, error) {
	var r struct {
		Calls map[string]map[string]int64 `json:"calls"`
	}
	return r.Calls, d.getJSON(ctx, "/calls", &r)
}

// CountCalls sums the calls of every result code to the gRPC method whose
// full name ends with method (e.g. "DeleteSnapshot").
func CountCalls(calls map[string]map[string]int64, method string) int64 {
	var n int64
	for m, byCode := range calls {
		if strings.HasSuffix(m, method) {
			for _, v := range byCode {
				n += v
			}
		}
	}
	return n
}

// CallLog returns the calls the driver received after sequence number since
// (0: every call it still keeps), each with its snapshot, secret keys and
// parameters. Pass the answer's Last as the next since.
func (d *CSIDriver) CallLog(ctx context.Context, since int64) (CallLog, error) {
	var r CallLog
	return r, d.getJSON(ctx, fmt.Sprintf("/calllog?since=%d", since), &r)
}

// ResetCallLog empties the driver's call log.
func (d *CSIDriver) ResetCallLog(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, "http://"+d.HTTPAddr+"/calllog", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("reset call log: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("reset call log: %s", resp.Status)
	}
	return nil
}

// Snapshots returns the snapshots the driver holds, without the three
// built-in ones the mock starts with.
func (d *CSIDriver) Snapshots(ctx context.Context) ([]BackendSnapshot, error) {
	var r struct {
		Snapshots []BackendSnapshot `json:"snapshots"`
	}
	if err := d.getJSON(ctx, "/snapshots", &r); err != nil {
		return nil, err
	}
	var out []BackendSnapshot
	for _, s := range r.Snapshots {
		if !s.Builtin {
			out = append(out, s)
		}
	}
	return out, nil
}

// Groups returns the group snapshots the driver holds.
func (d *CSIDriver) Groups(ctx context.Context) ([]BackendGroup, error) {
	var r struct {
		Groups []BackendGroup `json:"groups"`
	}
	if err := d.getJSON(ctx, "/groups", &r); err != nil {
		return nil, err
	}
	return r.Groups, nil
}

func (d *CSIDriver) getJSON(ctx context.Context, path string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+d.HTTPAddr+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(into)
}
