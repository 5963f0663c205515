// Package framework runs the real parts our end-to-end tests need: etcd and
// kube-apiserver on loopback ports with the snapshot CRDs, the mock CSI
// driver on a unix socket, and our own binaries. A test package uses it in a
// few lines:
//
//	func TestMain(m *testing.M) { framework.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		env := framework.Shared(t)          // one control plane per package
//		ns := env.Namespace(t)
//		drv := env.StartCSIDriver(t, framework.CSIDriverOptions{})
//		env.StartController(t, "--csi-address="+drv.Socket)
//		env.CreateBoundPVC(t, ns, "data", framework.PVCOptions{Driver: drv.Name})
//	}
//
// or, for a test of the controller next to a driver of its own (scenario.go):
//
//	s := framework.NewScenario(t, framework.ScenarioOptions{})
//	s.PVC(t, "data")
//	s.Snapshot(t, "snap", "data", &s.Class)
//	s.WaitReady(t, "snap", 30*time.Second)
//	s.DeleteAndExpectNothingLeft(t, "snap", contentName)
//
// Everything a test starts is stopped by t.Cleanup; the shared control plane
// is stopped when the package's tests end, and every child process gets
// SIGKILL if the test binary dies, so nothing outlives `go test`.
package framework

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/snapkeeper/snapkeeper/pkg/csi/csitest"
)

// Env is a running control plane with clients for it.
type Env struct {
	*ControlPlane
	Kube    kubernetes.Interface
	Snap    snapclient.Interface
	Dynamic dynamic.Interface
}

var (
	sharedMu      sync.Mutex
	sharedEnv     *Env
	sharedErr     error
	sharedOptions ControlPlaneOptions
	// prodEnv is the package's production-shaped plane (SharedProduction),
	// started on first use next to the shared one.
	prodEnv *Env
	prodErr error
)

// Main runs the package's tests and then stops the shared control plane.
func Main(m *testing.M) { MainWith(m, ControlPlaneOptions{}) }

// MainWith is Main for a package whose shared plane differs from the
// default, such as the cluster-like plane ({Cluster: true}) of
// test/e2e/cluster.
func MainWith(m *testing.M, o ControlPlaneOptions) {
	sharedMu.Lock()
	sharedOptions = o
	sharedMu.Unlock()
	code := m.Run()
	sharedMu.Lock()
	for _, env := range []*Env{sharedEnv, prodEnv} {
		if env == nil {
			continue
		}
		env.Stop()
		if code == 0 && os.Getenv("SNAPKEEPER_KEEP_TMP") == "" {
			os.RemoveAll(env.Dir)
		} else {
			fmt.Fprintf(os.Stderr, "framework: logs kept in %s\n", env.Dir)
		}
	}
	sharedMu.Unlock()
	removeBuildDir()
	os.Exit(code)
}

// Shared returns the package's control plane, starting it on first use.
func Shared(t T) *Env {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if sharedEnv == nil && sharedErr == nil {
		o := sharedOptions
		o.Cluster = o.Cluster || clusterFromEnv()
		sharedEnv, sharedErr = StartWith(context.Background(), o)
	}
	if sharedErr != nil {
		t.Fatalf("control plane: %v", sharedErr)
	}
	return sharedEnv
}

// SharedProduction returns the package's production-shaped plane
// (ControlPlaneOptions.Production), starting it on first use.
func SharedProduction(t T) *Env {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if prodEnv == nil && prodErr == nil {
		prodEnv, prodErr = StartWith(context.Background(), ControlPlaneOptions{Production: true})
	}
	if prodErr != nil {
		t.Fatalf("production control plane: %v", prodErr)
	}
	return prodEnv
}

// Start starts a control plane with the CRDs installed in a new temp dir.
// Callers other than Shared must Stop it.
func Start(ctx context.Context) (*Env, error) {
	return StartWith(ctx, ControlPlaneOptions{})
}

// StartWith is Start with control-plane options (the benchmark's
// production-like API server).
func StartWith(ctx context.Context, o ControlPlaneOptions) (*Env, error) {
	dir, err := os.MkdirTemp("", "snapkeeper-e2e-")
	if err != nil {
		return nil, err
	}
	cp, err := StartControlPlaneWith(ctx, dir, o)
	if err != nil {
		return nil, err
	}
	env, err := NewEnv(cp)
	if err != nil {
		cp.Stop()
		return nil, err
	}
	if err := InstallCRDs(ctx, env.Dynamic, CRDDir()); err != nil {
		cp.Stop()
		return nil, err
	}
	if o.Cluster {
		if err := cp.StartControllerManager(ctx); err != nil {
			cp.Stop()
			return nil, err
		}
	}
	return env, nil
}

// NewEnv builds the clients of a running control plane.
func NewEnv(cp *ControlPlane) (*Env, error) {
	kube, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return nil, err
	}
	snap, err := snapclient.NewForConfig(cp.Config)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		return nil, err
	}
	return &Env{ControlPlane: cp, Kube: kube, Snap: snap, Dynamic: dyn}, nil
}

var nonName = regexp.MustCompile(`[^a-z0-9-]+`)

// Namespace creates a fresh namespace named after the test. No namespace
// controller runs, so namespaces are never deleted; names are unique.
func (e *Env) Namespace(t T) string {
	t.Helper()
	base := strings.Trim(nonName.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(base) > 40 {
		base = base[:40]
	}
	name := names.next(strings.Trim(base, "-"), "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := e.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	return name
}

// TempDir is a per-test directory inside the control plane's directory, so
// logs of failed runs stay together.
func (e *Env) TempDir(t T, name string) string {
	t.Helper()
	d, err := os.MkdirTemp(e.Dir, strings.ReplaceAll(name, "/", "_")+"-")
	if err != nil {
		t.Fatalf("%v", err)
	}
	return d
}

// Eventually polls cond every 50ms until it returns true, failing the test
// after timeout.
func Eventually(t T, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	if err := Poll(timeout, what, cond); err != nil {
		t.Fatalf("%v", err)
	}
}

// Poll is Eventually for callers that report instead of failing the test:
// the error names what and cond's last error.
func Poll(timeout time.Duration, what string, cond func() (bool, error)) error {
	return PollContext(context.Background(), timeout, what, func() error {
		ok, err := cond()
		if ok {
			return nil
		}
		if err == nil {
			err = errNotYet
		}
		return err
	})
}

// errNotYet is the last error of a cond that answered false without one;
// it prints as Poll's timeout always printed it.
var errNotYet = errors.New("<nil>")

// PollContext calls cond every 50ms until it returns nil, failing after
// timeout with cond's last error, or at once when ctx ends (`make run` on
// Ctrl-C).
func PollContext(ctx context.Context, timeout time.Duration, what string, cond func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s (last error: %v)", timeout, what, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// T is the part of testing.TB the framework needs; the embedded csitest.TB
// is what the mock CSI driver's harness needs.
type T interface {
	csitest.TB
	Name() string
}

// ContainsAll reports whether s contains every one of parts.
func ContainsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// Must calls read within 30 s and returns what it read; an error fails
// the test.
func Must[V any](t T, read func(context.Context) (V, error)) V {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v, err := read(ctx)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return v
}
