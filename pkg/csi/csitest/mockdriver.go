// Package csitest runs the mock CSI driver binary (hack/tools/kube/mockcsi,
// built into bin/mock-csi-driver) for tests, and talks to its HTTP API:
// call counts, the call log, faults, the backend's snapshot and group
// snapshot lists, and per-volume snapshot sizes.
//
// The mock starts with three built-in snapshots ("Mock Snapshot 1..3", ids
// "1".."3"): count only the snapshots your test created (Created).
package csitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// DriverName is the mock's default driver name.
const DriverName = "mock.csi.snapkeeper.io"

const (
	startTimeout = 30 * time.Second
	stopTimeout  = 10 * time.Second
)

// Options configure StartMock.
type Options struct {
	// DriverName defaults to DriverName.
	DriverName string
	// Faults are installed before the first call (--faults).
	Faults *Faults
	// HideCapabilities removes controller or group controller
	// capabilities, e.g. "CREATE_DELETE_SNAPSHOT", "LIST_SNAPSHOTS" or
	// "CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT".
	HideCapabilities []string
	// NoGroupController leaves the GroupController service out: its calls
	// answer Unimplemented, like a driver without group snapshots.
	NoGroupController bool
	// VolumeSizes are the initial per-volume snapshot sizes
	// (--volume-sizes); see Mock.SetVolumeSizes.
	VolumeSizes VolumeSizes
	// Socket is the socket path; default: csi.sock in a new temp dir.
	Socket string
	// Args are extra command-line flags.
	Args []string
}

// Mock is a running mock CSI driver process.
type Mock struct {
	// Socket is the unix socket path the driver serves CSI on.
	Socket string

	bin      string
	args     []string
	dir      string
	httpAddr string
	cmd      *exec.Cmd
	exited   chan struct{}
	logPath  string
}

// StartMock builds the mock driver if needed, starts it and stops it in
// t.Cleanup. The process is in its own process group and dies with the
// test binary (Pdeathsig), so nothing outlives the test.
func StartMock(t testing.TB, opts Options) *Mock {
	t.Helper()
	bin := Binary(t)
	dir := shortTempDir(t)
	m := &Mock{Socket: opts.Socket, bin: bin, dir: dir, logPath: filepath.Join(dir, "driver.log")}
	if m.Socket == "" {
		m.Socket = filepath.Join(dir, "csi.sock")
	}
	name := opts.DriverName
	if name == "" {
		name = DriverName
	}
	m.args = []string{"--csi-address", m.Socket, "--name", name, "--http-address", "127.0.0.1:0",
		"--ready-file", filepath.Join(dir, "ready.json")}
	if opts.Faults != nil {
		b, err := json.Marshal(opts.Faults)
		if err != nil {
			t.Fatalf("encoding faults: %v", err)
		}
		m.args = append(m.args, "--faults", string(b))
	}
	if len(opts.HideCapabilities) > 0 {
		m.args = append(m.args, "--hide-capabilities", strings.Join(opts.HideCapabilities, ","))
	}
	if opts.NoGroupController {
		m.args = append(m.args, "--no-group-controller")
	}
	if len(opts.VolumeSizes) > 0 {
		vols := make([]string, 0, len(opts.VolumeSizes))
		for vol, n := range opts.VolumeSizes {
			vols = append(vols, vol+"="+strconv.FormatInt(n, 10))
		}
		sort.Strings(vols)
		m.args = append(m.args, "--volume-sizes", strings.Join(vols, ","))
	}
	m.args = append(m.args, opts.Args...)
	t.Cleanup(func() {
		m.Stop(t)
		if t.Failed() {
			if b, err := os.ReadFile(m.logPath); err == nil {
				t.Logf("mock CSI driver log:\n%s", tail(b, 8000))
			}
		}
	})
	m.start(t)
	return m
}

func (m *Mock) start(t testing.TB) {
	t.Helper()
	ready := filepath.Join(m.dir, "ready.json")
	_ = os.Remove(ready)
	logf, err := os.OpenFile(m.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatalf("opening driver log: %v", err)
	}
	defer logf.Close()
	cmd := exec.Command(m.bin, m.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting mock CSI driver: %v", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	m.cmd, m.exited = cmd, exited

	deadline := time.Now().Add(startTimeout)
	for {
		if b, err := os.ReadFile(ready); err == nil {
			var r struct {
				HTTPAddress string `json:"httpAddress"`
			}
			if err := json.Unmarshal(b, &r); err != nil {
				t.Fatalf("reading the driver's ready file: %v", err)
			}
			m.httpAddr = r.HTTPAddress
			return
		}
		select {
		case <-exited:
			b, _ := os.ReadFile(m.logPath)
			t.Fatalf("mock CSI driver exited during start-up (%v):\n%s", cmd.ProcessState, tail(b, 4000))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			m.kill()
			t.Fatalf("mock CSI driver did not become ready within %v", startTimeout)
		}
	}
}

// Stop ends the driver with SIGTERM (SIGKILL after a grace period); the
// driver removes its socket. It is a no-op when the driver is not running.
func (m *Mock) Stop(t testing.TB) {
	t.Helper()
	if m.cmd == nil {
		return
	}
	_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-m.exited:
		// A clean stop exits 0; anything else (a panic, a report of the race
		// detector, which exits 66) is a bug worth failing for.
		if st := m.cmd.ProcessState; st != nil && !st.Success() {
			b, _ := os.ReadFile(m.logPath)
			t.Errorf("mock CSI driver exited with %v after SIGTERM:\n%s", st, tail(b, 8000))
		}
	case <-time.After(stopTimeout):
		t.Errorf("mock CSI driver ignored SIGTERM for %v; killing it", stopTimeout)
		m.kill()
	}
	m.cmd = nil
}

// Crash kills the driver with SIGKILL: its socket file stays behind, as
// after a real crash.
func (m *Mock) Crash(t testing.TB) {
	t.Helper()
	if m.cmd != nil {
		m.kill()
		m.cmd = nil
	}
}

func (m *Mock) kill() {
	_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
	<-m.exited
}

// Start starts a stopped or crashed driver again on the same socket, with
// the same flags. Its state is new: snapshots created before are gone.
func (m *Mock) Start(t testing.TB) {
	t.Helper()
	if m.cmd != nil {
		t.Fatalf("mock CSI driver is already running")
	}
	m.start(t)
}

// Restart is Stop followed by Start.
func (m *Mock) Restart(t testing.TB) {
	t.Helper()
	m.Stop(t)
	m.Start(t)
}

// HTTPAddress is host:port of the running driver's HTTP API.
func (m *Mock) HTTPAddress() string { return m.httpAddr }

// Calls returns the call counts (GET /calls).
func (m *Mock) Calls(t testing.TB) Calls {
	t.Helper()
	var out struct {
		Calls Calls `json:"calls"`
	}
	m.do(t, http.MethodGet, "/calls", nil, &out)
	return out.Calls
}

// ResetCalls zeroes the call counts (DELETE /calls).
func (m *Mock) ResetCalls(t testing.TB) {
	t.Helper()
	m.do(t, http.MethodDelete, "/calls", nil, nil)
}

// CallLog returns the calls logged after seq since (0: all kept), with
// their secret keys and parameters (GET /calllog).
func (m *Mock) CallLog(t testing.TB, since int64) CallLog {
	t.Helper()
	var out CallLog
	m.do(t, http.MethodGet, fmt.Sprintf("/calllog?since=%d", since), nil, &out)
	return out
}

// ResetCallLog empties the call log (DELETE /calllog).
func (m *Mock) ResetCallLog(t testing.TB) {
	t.Helper()
	m.do(t, http.MethodDelete, "/calllog", nil, nil)
}

// SetFaults replaces the live faults (PUT /faults) and resets their counters.
func (m *Mock) SetFaults(t testing.TB, f Faults) FaultsState {
	t.Helper()
	var out FaultsState
	m.do(t, http.MethodPut, "/faults", f, &out)
	return out
}

// FaultsState reads the live faults (GET /faults).
func (m *Mock) FaultsState(t testing.TB) FaultsState {
	t.Helper()
	var out FaultsState
	m.do(t, http.MethodGet, "/faults", nil, &out)
	return out
}

// Snapshots lists the backend's snapshots, built-in ones included, without
// faults and without counting a CSI call (GET /snapshots).
func (m *Mock) Snapshots(t testing.TB) []BackendSnapshot {
	t.Helper()
	var out struct {
		Snapshots []BackendSnapshot `json:"snapshots"`
	}
	m.do(t, http.MethodGet, "/snapshots", nil, &out)
	return out.Snapshots
}

// Created lists the backend's snapshots except the three built-in ones.
func (m *Mock) Created(t testing.TB) []BackendSnapshot {
	t.Helper()
	var out []BackendSnapshot
	for _, s := range m.Snapshots(t) {
		if !s.Builtin {
			out = append(out, s)
		}
	}
	return out
}

// Groups lists the backend's live group snapshots, without faults and
// without counting a CSI call (GET /groups).
func (m *Mock) Groups(t testing.TB) []BackendGroup {
	t.Helper()
	var out struct {
		Groups []BackendGroup `json:"groups"`
	}
	m.do(t, http.MethodGet, "/groups", nil, &out)
	return out.Groups
}

// VolumeSizes returns the per-volume snapshot sizes (GET /volume-sizes).
func (m *Mock) VolumeSizes(t testing.TB) VolumeSizes {
	t.Helper()
	out := VolumeSizes{}
	m.do(t, http.MethodGet, "/volume-sizes", nil, &out)
	return out
}

// SetVolumeSizes replaces every per-volume snapshot size (PUT
// /volume-sizes): from now on every answer about a snapshot of such a
// volume (CreateSnapshot, ListSnapshots, group answers, Snapshots) reports
// that size, whenever the snapshot was cut; other volumes fall back to a
// SizeBytes rule (--snapshot-size), else 0. A nil or empty map clears them.
// The sizes survive Restart only when given in Options.VolumeSizes.
func (m *Mock) SetVolumeSizes(t testing.TB, sizes VolumeSizes) VolumeSizes {
	t.Helper()
	if sizes == nil {
		sizes = VolumeSizes{}
	}
	out := VolumeSizes{}
	m.do(t, http.MethodPut, "/volume-sizes", sizes, &out)
	return out
}

// SetVolumeSize sets the snapshot size of one volume, leaving the others
// alone (PATCH /volume-sizes); 0 removes the volume's size.
func (m *Mock) SetVolumeSize(t testing.TB, volumeID string, sizeBytes int64) VolumeSizes {
	t.Helper()
	out := VolumeSizes{}
	m.do(t, http.MethodPatch, "/volume-sizes", VolumeSizes{volumeID: sizeBytes}, &out)
	return out
}

func (m *Mock) do(t testing.TB, method, path string, in, out any) {
	t.Helper()
	if m.cmd == nil {
		t.Fatalf("%s %s: mock CSI driver is not running", method, path)
	}
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			t.Fatalf("encoding %s %s: %v", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, "http://"+m.httpAddr+path, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", method, path, err)
	}
	if resp.StatusCode >= 300 {
		t.Fatalf("%s %s: %s: %s", method, path, resp.Status, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: decoding %q: %v", method, path, b, err)
		}
	}
}

// shortTempDir returns t.TempDir(), or a shorter temp dir when the test's
// name makes the path too long for a unix socket (108 bytes on Linux).
func shortTempDir(t testing.TB) string {
	dir := t.TempDir()
	if len(dir) < 80 {
		return dir
	}
	dir, err := os.MkdirTemp("", "csi")
	if err != nil {
		t.Fatalf("creating temp dir: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

var errNoRepo = errors.New("no hack/tools/kube/go.mod above the working directory")

// repoRoot finds the snapkeeper checkout from the test's working directory.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "hack", "tools", "kube", "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("%w", errNoRepo)
		}
		dir = parent
	}
}
