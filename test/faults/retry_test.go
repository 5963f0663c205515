package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/pkg/cachelag"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

// privateScenario is a Scenario on a control plane of its own (for faults
// that would break the package's shared one, like killing the API
// server), without a controller. The control plane stops with the test;
// its directory stays when the test failed.
func privateScenario(t *testing.T, faults []framework.FaultRule) *framework.Scenario {
	t.Helper()
	env, err := framework.Start(context.Background())
	if err != nil {
		t.Fatalf("private control plane: %v", err)
	}
	t.Cleanup(func() {
		env.Stop()
		if t.Failed() || os.Getenv("SNAPKEEPER_KEEP_TMP") != "" {
			t.Logf("logs kept in %s", env.Dir)
		} else {
			os.RemoveAll(env.Dir)
		}
	})
	s := &framework.Scenario{Env: env, NS: env.Namespace(t)}
	o := framework.CSIDriverOptions{DriverName: framework.DriverName("faults")}
	if len(faults) > 0 {
		o.Faults = &framework.Faults{Rules: faults}
	}
	s.Drv = env.StartCSIDriver(t, o)
	s.Class = "class-" + s.NS
	env.CreateSnapshotClass(t, framework.SnapshotClass(s.Class, s.Drv.Name, snapv1.VolumeSnapshotContentDelete, false))
	s.Args = []string{"--components=binder,csi", "--csi-address=" + s.Drv.Socket}
	return s
}

// transient tells errors of an API server that is away (connection
// refused or reset, timeouts including a TLS handshake that a restarting
// server on a loaded machine did not finish, 5xx) from the answers of one
// that is up.
func transient(err error) bool {
	if apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsServiceUnavailable(err) ||
		apierrors.IsInternalError(err) || apierrors.IsTooManyRequests(err) {
		return true
	}
	msg := err.Error()
	for _, s := range []string{"connection refused", "connection reset", "EOF", "http2:", "i/o timeout", "context deadline exceeded", "broken pipe", "timed out", "handshake timeout"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// createRetry is world.create that retries while the API server is away;
// a create that went through before its reply was lost is found again.
func (w *world) createRetry(ctx context.Context, name, pvc string) error {
	for {
		err := w.create(ctx, name, pvc)
		if err == nil {
			return nil
		}
		if apierrors.IsAlreadyExists(err) {
			vs, gerr := w.s.Env.Snap.SnapshotV1().VolumeSnapshots(w.s.NS).Get(ctx, name, metav1.GetOptions{})
			if gerr == nil {
				w.created(name, vs.UID)
				return nil
			}
			err = gerr
		}
		if !transient(err) || ctx.Err() != nil {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// removeRetry is world.remove that retries while the API server is away.
func (w *world) removeRetry(ctx context.Context, name string) error {
	for {
		err := w.remove(ctx, name)
		if err == nil || !transient(err) || ctx.Err() != nil {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// runRetrying starts the workload with createRetry and removeRetry: a
// workload that goes on through API server restarts. Each delete holds
// gate for reading, so the test can hold deletes back for a while.
func (wl *workload) runRetrying(ctx context.Context, w *world, rng *rand.Rand, claims []string, gate *sync.RWMutex) <-chan error {
	wl.Create = w.createRetry
	wl.Remove = func(ctx context.Context, name string) error {
		gate.RLock()
		defer gate.RUnlock()
		return w.removeRetry(ctx, name)
	}
	return wl.start(ctx, w, rng, claims)
}

// probeReady creates VolumeSnapshot name (kept: the invariants expect it
// ready) and returns how long it took to become ready.
func (w *world) probeReady(t *testing.T, name, pvc string, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := w.createRetry(ctx, name, pvc); err != nil {
		t.Fatalf("probe %s: %v", name, err)
	}
	w.s.WaitReady(t, name, timeout)
	return time.Since(start)
}

// stillRunning fails the test unless p runs with pid.
func stillRunning(t *testing.T, p *framework.Process, pid int) {
	t.Helper()
	if p.Exited() || p.Pid() != pid {
		t.Errorf("%s restarted or exited (pid %d, was %d, exited %v):\n%s", p.Name, p.Pid(), pid, p.Exited(), p.Tail(3000))
	}
}

// noPhantoms fails the test when a controller's cache-lag tracker
// (pkg/cachelag) still remembers writes once everything is done and its
// marks have expired (cachelag.MarkTTL): an entry its informer will never
// clear, like a content the binder created and deleted while its watch was
// down, which contentOf (pkg/sync/binder) returned for ever before the
// marks expired.
func noPhantoms(t *testing.T, c *framework.Component) {
	t.Helper()
	err := framework.Poll(cachelag.MarkTTL+15*time.Second, "cache-lag trackers empty", func() (bool, error) {
		n, err := c.Metric(context.Background(), "snapkeeper_cache_lag_entries")
		return err == nil && n == 0, fmt.Errorf("snapkeeper_cache_lag_entries %v (err %v)", n, err)
	})
	if err != nil {
		t.Errorf("%s: %v", c.Name, err)
	}
}
