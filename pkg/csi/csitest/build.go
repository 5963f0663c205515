package csitest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Environment variables that steer Binary.
const (
	// EnvBinary names a prebuilt mock driver binary to use as is.
	EnvBinary = "SNAPKEEPER_MOCK_CSI_DRIVER"
	// EnvRequire=1 turns "cannot build the mock driver" from a skip into a
	// failure (CI sets it so that a broken tools module cannot hide tests).
	EnvRequire = "SNAPKEEPER_REQUIRE_MOCK_CSI"
)

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// Binary returns the path of the mock CSI driver (BinaryPath). When it
// cannot be built, the test is skipped with the reason (or fails, with
// SNAPKEEPER_REQUIRE_MOCK_CSI=1).
func Binary(t TB) string {
	t.Helper()
	p, err := binary(t.Logf)
	if err != nil {
		if os.Getenv(EnvRequire) == "1" {
			t.Fatalf("mock CSI driver unavailable: %v", err)
		}
		t.Skipf("skipping: the mock CSI driver cannot be built (set %s=1 to fail instead): %v", EnvRequire, err)
	}
	return p
}

// BinaryPath returns the path of the mock CSI driver: $SNAPKEEPER_MOCK_CSI_DRIVER
// as is, else bin/mock-csi-driver, built from hack/tools/kube (once per
// process) when it is missing or older than its sources.
func BinaryPath() (string, error) {
	return binary(func(format string, args ...any) { fmt.Fprintf(os.Stderr, "csitest: "+format+"\n", args...) })
}

func binary(logf func(format string, args ...any)) (string, error) {
	if p := os.Getenv(EnvBinary); p != "" {
		return p, nil
	}
	buildOnce.Do(func() { buildPath, buildErr = ensureBuilt(logf) })
	return buildPath, buildErr
}

func ensureBuilt(logf func(format string, args ...any)) (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	tools := filepath.Join(root, "hack", "tools", "kube")
	binDir := filepath.Join(root, "bin")
	bin := filepath.Join(binDir, "mock-csi-driver")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return "", err
	}
	// Several test packages may get here at once: one builds, the others
	// wait and then find the binary fresh.
	unlock, err := lockFile(filepath.Join(binDir, ".mock-csi-driver.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()

	fresh, err := upToDate(bin, tools)
	if err != nil {
		return "", err
	}
	if fresh {
		return bin, nil
	}
	tmp := bin + ".tmp." + strconv.Itoa(os.Getpid())
	cmd := exec.Command("go", "build", "-o", tmp, "./mockcsi")
	cmd.Dir = tools
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		_ = os.Remove(tmp)
		if _, statErr := os.Stat(bin); statErr == nil {
			logf("rebuilding %s failed, using the existing binary: %v\n%s", bin, err, out)
			return bin, nil
		}
		return "", fmt.Errorf("go build ./mockcsi in %s: %v\n%s", tools, err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", err
	}
	logf("built %s in %v", bin, time.Since(start).Round(time.Millisecond))
	return bin, nil
}

// upToDate reports whether bin exists and is newer than the mock's sources
// and the tools module's go.mod/go.sum.
func upToDate(bin, tools string) (bool, error) {
	bi, err := os.Stat(bin)
	if os.IsNotExist(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	srcs, err := filepath.Glob(filepath.Join(tools, "mockcsi", "*.go"))
	if err != nil {
		return false, err
	}
	srcs = append(srcs, filepath.Join(tools, "go.mod"), filepath.Join(tools, "go.sum"))
	for _, s := range srcs {
		si, err := os.Stat(s)
		if err != nil {
			return false, err
		}
		if si.ModTime().After(bi.ModTime()) {
			return false, nil
		}
	}
	return true, nil
}

func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
