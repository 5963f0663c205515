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
	"encoding/json"
	"errors"
	"fmt"
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
