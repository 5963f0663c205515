// Package csitest runs the mock CSI driver binary (hack/tools/kube/mockcsi,
// built into bin/mock-csi-driver) for tests, and talks to its HTTP API:
// call counts, the call log, faults, the backend's snapshot and group
// snapshot lists, and per-volume snapshot sizes. Its Mock is the one driver
// harness of the repository: the unit tests of pkg/csi use it, and so do
// the end-to-end suites, the conformance runner and the benchmarks through
// test/framework (framework.CSIDriver is Mock).
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
	httpTimeout  = 30 * time.Second
)

// TB is the part of testing.TB the mock's test helpers use. *testing.T
// satisfies it, and so does test/framework's T.
type TB interface {
	Helper()
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
	Failed() bool
	Cleanup(func())
}

// Options configure a mock driver.
type Options struct {
	// DriverName defaults to DriverName.
	DriverName string
	// Faults are installed before the first call (--faults); they survive
	// Restart, unlike faults set with SetFaults.
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
	// Socket is the socket path; default: csi.sock in the driver's
	// directory, or in a temp dir of its own when that path would be too
	// long for a unix socket.
	Socket string
	// Args are extra command-line flags.
	Args []string
}

// Mock is a mock CSI driver process. It can be stopped, crashed and started
// again on the same socket with the same flags.
type Mock struct {
	// Name is the driver name the mock reports.
	Name string
	// Socket is the unix socket path the driver serves CSI on.
	Socket string

	bin      string
	args     []string
	dir      string
	sockDir  string // a temp dir of our own holding Socket, or ""
	httpAddr string
	cmd      *exec.Cmd
	exited   chan struct{}
}

// StartMock builds the mock driver if needed, starts it with its log in
// t.TempDir() and stops it in t.Cleanup; see StartMockIn.
func StartMock(t testing.TB, opts Options) *Mock {
	t.Helper()
	return StartMockIn(t, t.TempDir(), opts)
}

// StartMockIn builds the mock driver if needed (see Binary: without it the
// test is skipped, or fails with SNAPKEEPER_REQUIRE_MOCK_CSI=1), starts it
// with its log in dir and stops it in t.Cleanup, failing the test when it
// did not exit cleanly. The process is in its own process group and dies
// with the test binary (Pdeathsig), so nothing outlives the test.
func StartMockIn(t TB, dir string, opts Options) *Mock {
	t.Helper()
	m, err := newMock(Binary(t), dir, opts)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		if err := m.stop(); err != nil {
			t.Errorf("%v", err)
		}
		m.removeSocketDir()
		if t.Failed() {
			t.Logf("mock CSI driver log:\n%s", m.logTail(8000))
		}
	})
	if err := m.start(); err != nil {
		t.Fatalf("%v", err)
	}
	return m
}

// Launch starts the mock driver with its log in dir, for callers without a
// test (`make run`, benchmarks, the conformance runner); they must Stop it.
func Launch(dir string, opts Options) (*Mock, error) {
	bin, err := BinaryPath()
	if err != nil {
		return nil, err
	}
	m, err := newMock(bin, dir, opts)
	if err != nil {
		return nil, err
	}
	if err := m.start(); err != nil {
		m.Stop()
		return nil, err
	}
	return m, nil
}

func newMock(bin, dir string, opts Options) (*Mock, error) {
	m := &Mock{Name: opts.DriverName, Socket: opts.Socket, bin: bin, dir: dir}
	if m.Name == "" {
		m.Name = DriverName
	}
	if m.Socket == "" {
		// Unix socket paths are limited to 108 bytes on Linux.
		m.Socket = filepath.Join(dir, "csi.sock")
		if len(m.Socket) > 100 {
			d, err := os.MkdirTemp("", "csi-")
			if err != nil {
				return nil, err
			}
			m.sockDir, m.Socket = d, filepath.Join(d, "csi.sock")
		}
	}
	m.args = []string{"--csi-address", m.Socket, "--name", m.Name, "--http-address", "127.0.0.1:0",
		"--ready-file", m.readyFile()}
	if opts.Faults != nil && len(opts.Faults.Rules) > 0 {
		b, err := json.Marshal(opts.Faults)
		if err != nil {
			return nil, fmt.Errorf("encoding faults: %w", err)
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
	return m, nil
}

func (m *Mock) readyFile() string { return filepath.Join(m.dir, "mock-csi-driver-ready.json") }

// LogPath is the file the driver's output goes to (every start appends).
func (m *Mock) LogPath() string { return filepath.Join(m.dir, "mock-csi-driver.log") }

func (m *Mock) start() error {
	_ = os.Remove(m.readyFile())
	if err := os.MkdirAll(filepath.Dir(m.Socket), 0o755); err != nil {
		return err
	}
	logf, err := os.OpenFile(m.LogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("opening driver log: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(m.bin, m.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting mock CSI driver: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	m.cmd, m.exited = cmd, exited

	deadline := time.Now().Add(startTimeout)
	for {
		if b, err := os.ReadFile(m.readyFile()); err == nil {
			var r struct {
				HTTPAddress string `json:"httpAddress"`
			}
			if err := json.Unmarshal(b, &r); err != nil {
				m.kill()
				return fmt.Errorf("reading the driver's ready file: %w", err)
			}
			m.httpAddr = r.HTTPAddress
			return nil
		}
		select {
		case <-exited:
			m.cmd = nil
			return fmt.Errorf("mock CSI driver exited during start-up (%v):\n%s", cmd.ProcessState, m.logTail(4000))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			m.kill()
			return fmt.Errorf("mock CSI driver did not become ready within %v:\n%s", startTimeout, m.logTail(4000))
		}
	}
}

// Stop ends the driver with SIGTERM (SIGKILL after a grace period), which
// removes its socket, and removes the socket's temp dir. It is a no-op when
// the driver is not running. A test's driver is stopped by t.Cleanup; Stop
// is for callers of Launch.
func (m *Mock) Stop() {
	_ = m.stop()
	m.removeSocketDir()
}

// stop ends the process; a clean stop exits 0, anything else (a panic, a
// report of the race detector, which exits 66) is a bug worth failing for.
func (m *Mock) stop() error {
	if m.cmd == nil {
		return nil
	}
	defer func() { m.cmd = nil }()
	_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-m.exited:
		if st := m.cmd.ProcessState; st != nil && !st.Success() {
			return fmt.Errorf("mock CSI driver exited with %v after SIGTERM:\n%s", st, m.logTail(8000))
		}
		return nil
	case <-time.After(stopTimeout):
		m.kill()
		return fmt.Errorf("mock CSI driver ignored SIGTERM for %v; killed it", stopTimeout)
	}
}

func (m *Mock) removeSocketDir() {
	if m.sockDir != "" {
		_ = os.RemoveAll(m.sockDir)
	}
}

// Crash kills the driver with SIGKILL: calls in flight break, its socket
// file stays behind and its in-memory backend is lost, as after a real
// crash.
func (m *Mock) Crash(t TB) {
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
// the same flags. Its state is new: snapshots created before are gone, and
// so are faults set with SetFaults.
func (m *Mock) Start(t TB) {
	t.Helper()
	if m.cmd != nil {
		t.Fatalf("mock CSI driver is already running")
	}
	if err := m.start(); err != nil {
		t.Fatalf("%v", err)
	}
}

// Restart is a stop with SIGTERM followed by Start.
func (m *Mock) Restart(t TB) {
	t.Helper()
	if err := m.stop(); err != nil {
		t.Errorf("%v", err)
	}
	m.Start(t)
}

// HTTPAddress is host:port of the running driver's HTTP API.
func (m *Mock) HTTPAddress() string { return m.httpAddr }

// The HTTP API comes twice: methods taking a context return errors, for
// callers without a test; the ones taking a TB fail the test instead.

// GetCalls returns the call counts (GET /calls).
func (m *Mock) GetCalls(ctx context.Context) (Calls, error) {
	var out struct {
		Calls Calls `json:"calls"`
	}
	err := m.do(ctx, http.MethodGet, "/calls", nil, &out)
	return out.Calls, err
}

// Calls is GetCalls for a test.
func (m *Mock) Calls(t TB) Calls {
	t.Helper()
	c, err := m.GetCalls(context.Background())
	return must(t, c, err)
}

// ResetCalls zeroes the call counts (DELETE /calls).
func (m *Mock) ResetCalls(t TB) {
	t.Helper()
	m.mustDo(t, http.MethodDelete, "/calls", nil, nil)
}

// GetCallLog returns the calls logged after seq since (0: all kept), with
// their secret keys and parameters (GET /calllog). Pass the answer's Last
// as the next since.
func (m *Mock) GetCallLog(ctx context.Context, since int64) (CallLog, error) {
	var out CallLog
	err := m.do(ctx, http.MethodGet, fmt.Sprintf("/calllog?since=%d", since), nil, &out)
	return out, err
}

// CallLog is GetCallLog for a test.
func (m *Mock) CallLog(t TB, since int64) CallLog {
	t.Helper()
	l, err := m.GetCallLog(context.Background(), since)
	return must(t, l, err)
}

// ResetCallLog empties the call log (DELETE /calllog).
func (m *Mock) ResetCallLog(t TB) {
	t.Helper()
	m.mustDo(t, http.MethodDelete, "/calllog", nil, nil)
}

// PutFaults replaces the live faults (PUT /faults) and resets their
// counters.
func (m *Mock) PutFaults(ctx context.Context, f Faults) (FaultsState, error) {
	if f.Rules == nil {
		f.Rules = []Rule{}
	}
	var out FaultsState
	err := m.do(ctx, http.MethodPut, "/faults", f, &out)
	return out, err
}

// SetFaults is PutFaults for a test.
func (m *Mock) SetFaults(t TB, f Faults) FaultsState {
	t.Helper()
	s, err := m.PutFaults(context.Background(), f)
	return must(t, s, err)
}

// FaultsState reads the live faults (GET /faults).
func (m *Mock) FaultsState(t TB) FaultsState {
	t.Helper()
	var out FaultsState
	m.mustDo(t, http.MethodGet, "/faults", nil, &out)
	return out
}

// GetSnapshots lists the backend's snapshots, built-in ones included,
// without faults and without counting a CSI call (GET /snapshots).
func (m *Mock) GetSnapshots(ctx context.Context) ([]BackendSnapshot, error) {
	var out struct {
		Snapshots []BackendSnapshot `json:"snapshots"`
	}
	err := m.do(ctx, http.MethodGet, "/snapshots", nil, &out)
	return out.Snapshots, err
}

// Snapshots is GetSnapshots for a test.
func (m *Mock) Snapshots(t TB) []BackendSnapshot {
	t.Helper()
	s, err := m.GetSnapshots(context.Background())
	return must(t, s, err)
}

// GetCreated lists the backend's snapshots except the three built-in ones.
func (m *Mock) GetCreated(ctx context.Context) ([]BackendSnapshot, error) {
	all, err := m.GetSnapshots(ctx)
	var out []BackendSnapshot
	for _, s := range all {
		if !s.Builtin {
			out = append(out, s)
		}
	}
	return out, err
}

// Created is GetCreated for a test.
func (m *Mock) Created(t TB) []BackendSnapshot {
	t.Helper()
	s, err := m.GetCreated(context.Background())
	return must(t, s, err)
}

// GetGroups lists the backend's live group snapshots, without faults and
// without counting a CSI call (GET /groups).
func (m *Mock) GetGroups(ctx context.Context) ([]BackendGroup, error) {
	var out struct {
		Groups []BackendGroup `json:"groups"`
	}
	err := m.do(ctx, http.MethodGet, "/groups", nil, &out)
	return out.Groups, err
}

// Groups is GetGroups for a test.
func (m *Mock) Groups(t TB) []BackendGroup {
	t.Helper()
	g, err := m.GetGroups(context.Background())
	return must(t, g, err)
}

// VolumeSizes returns the per-volume snapshot sizes (GET /volume-sizes).
func (m *Mock) VolumeSizes(t TB) VolumeSizes {
	t.Helper()
	out := VolumeSizes{}
	m.mustDo(t, http.MethodGet, "/volume-sizes", nil, &out)
	return out
}

// SetVolumeSizes replaces every per-volume snapshot size (PUT
// /volume-sizes): from now on every answer about a snapshot of such a
// volume (CreateSnapshot, ListSnapshots, group answers, Snapshots) reports
// that size, whenever the snapshot was cut; other volumes fall back to a
// SizeBytes rule (--snapshot-size), else 0. A nil or empty map clears them.
// The sizes survive Restart only when given in Options.VolumeSizes.
func (m *Mock) SetVolumeSizes(t TB, sizes VolumeSizes) VolumeSizes {
	t.Helper()
	if sizes == nil {
		sizes = VolumeSizes{}
	}
	out := VolumeSizes{}
	m.mustDo(t, http.MethodPut, "/volume-sizes", sizes, &out)
	return out
}

// SetVolumeSize sets the snapshot size of one volume, leaving the others
// alone (PATCH /volume-sizes); 0 removes the volume's size.
func (m *Mock) SetVolumeSize(t TB, volumeID string, sizeBytes int64) VolumeSizes {
	t.Helper()
	out := VolumeSizes{}
	m.mustDo(t, http.MethodPatch, "/volume-sizes", VolumeSizes{volumeID: sizeBytes}, &out)
	return out
}

func must[V any](t TB, v V, err error) V {
	t.Helper()
	if err != nil {
		t.Fatalf("%v", err)
	}
	return v
}

func (m *Mock) mustDo(t TB, method, path string, in, out any) {
	t.Helper()
	if err := m.do(context.Background(), method, path, in, out); err != nil {
		t.Fatalf("%v", err)
	}
}

func (m *Mock) do(ctx context.Context, method, path string, in, out any) error {
	if m.cmd == nil {
		return fmt.Errorf("%s %s: mock CSI driver is not running", method, path)
	}
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encoding %s %s: %w", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, httpTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, "http://"+m.httpAddr+path, body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%s %s: reading body: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("%s %s: decoding %q: %w", method, path, b, err)
		}
	}
	return nil
}

func (m *Mock) logTail(n int) []byte {
	b, err := os.ReadFile(m.LogPath())
	if err != nil {
		return []byte(err.Error())
	}
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
