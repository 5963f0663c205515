package webhook

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

const (
	rotationClients   = 64
	rotationRotations = 3
)

// rotateCertificate replaces the webhook's certificate files (a new serving
// certificate from the same CA, as cert-manager renews, one file after the
// other) several times while 64 clients call the webhook: half through the
// API server (a dry-run class with an invalid driver), half straight to the
// webhook over a new TLS connection each, so that every one of their
// handshakes meets whichever certificate is current, mid-swap included. The served
// certificate must change at every rotation and no call may fail: every
// one must come back denied by the webhook, never "failed calling webhook"
// nor a TLS error.
func rotateCertificate(t *testing.T, env *framework.Env, w *webhookServer) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	before, err := w.fw.Scrape(ctx)
	if err != nil {
		t.Fatal(err)
	}
	load := &rotationLoad{}
	stop := load.start(ctx, env, w)
	serials, pickups := rotateTimes(t, w)
	stop()
	after, err := w.fw.Scrape(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	delta := func(result string) float64 {
		const m = "snapkeeper_webhook_certificate_reloads_total"
		return after.Sum(m, `result="`+result+`"`) - before.Sum(m, `result="`+result+`"`)
	}
	reloads := delta("success")
	t.Logf("%d clients (%d through the API server, %d straight to the webhook, a new TLS connection each): "+
		"%d certificate rotations (serials %s; each served %v after tls.crt was replaced, tls.key 500 ms after it; %v reloads counted, %v of a mismatched pair), "+
		"%d requests, %d failed; %v",
		rotationClients, rotationClients/2, rotationClients/2, rotationRotations, strings.Join(serials, " -> "), pickups,
		reloads, delta("error"), load.requests.Load(), load.failed.Load(), framework.LatencyBetween(before, after))
	for _, e := range load.firstErrors() {
		t.Errorf("request failed during rotation: %s", e)
	}
	if int(reloads) < rotationRotations {
		t.Errorf("%v certificate reloads counted, want at least %d", reloads, rotationRotations)
	}
}

// rotateTimes rotates the certificate rotationRotations times, with 2 s of
// traffic on each certificate, and returns the serials served in turn and
// how long after its first file each new certificate was served.
func rotateTimes(t *testing.T, w *webhookServer) (serials []string, pickups []time.Duration) {
	t.Helper()
	// Bounded: each rotation waits at most 30 s for the new certificate.
	for r := 0; r <= rotationRotations; r++ {
		time.Sleep(2 * time.Second)
		cur, err := w.servedSerial()
		if err != nil {
			t.Fatal(err)
		}
		serials = append(serials, cur)
		if r == rotationRotations {
			return serials, pickups
		}
		start := time.Now()
		if err := w.installHalfAtATime(t.TempDir()); err != nil {
			t.Fatal(err)
		}
		for {
			now, err := w.servedSerial()
			if err != nil {
				t.Fatal(err)
			}
			if now != cur {
				pickups = append(pickups, time.Since(start).Round(time.Millisecond))
				break
			}
			if time.Since(start) > 30*time.Second {
				t.Fatalf("rotation %d: served certificate still has serial %s after 30 s", r+1, cur)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return serials, pickups
}

// installHalfAtATime issues a new serving certificate into dir and
// installs it as a writer that is not atomic across the two files does:
// tls.crt first, tls.key half a second later (past the webhook's 200 ms
// poll), so the webhook meets a pair that does not match and must keep
// serving the old one until the key arrives.
func (w *webhookServer) installHalfAtATime(dir string) error {
	if err := w.ca.Serving(dir, "snapkeeper-webhook"); err != nil {
		return err
	}
	for i, name := range []string{"tls.crt", "tls.key"} {
		if i > 0 {
			time.Sleep(500 * time.Millisecond)
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		tmp := filepath.Join(w.certDir, "."+name+".new")
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			return err
		}
		if err := os.Rename(tmp, filepath.Join(w.certDir, name)); err != nil {
			return fmt.Errorf("install %s: %w", name, err)
		}
	}
	return nil
}

// rotationLoad counts the clients' requests and keeps the first errors.
type rotationLoad struct {
	requests, failed atomic.Int64
	mu               sync.Mutex
	errs             []string
}

// start runs the rotationClients clients until the returned stop is
// called: even ones through the API server, odd ones straight to the
// webhook.
func (l *rotationLoad) start(ctx context.Context, env *framework.Env, w *webhookServer) (stop func()) {
	clients := make([]func(n int), rotationClients)
	for i := range clients {
		clients[i] = func(n int) {
			if i%2 == 0 {
				l.count(w.probeDenied(ctx, env))
			} else {
				l.count(w.reviewDenied(ctx, fmt.Sprintf("rotation-%d-%d", i, n)))
			}
		}
	}
	return framework.Repeat(0, clients...)
}

func (l *rotationLoad) count(err error) {
	l.requests.Add(1)
	if err == nil {
		return
	}
	l.failed.Add(1)
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.errs) < 5 {
		l.errs = append(l.errs, err.Error())
	}
}

func (l *rotationLoad) firstErrors() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.errs...)
}

// probeDenied is probe, which must come back denied by the webhook.
func (w *webhookServer) probeDenied(ctx context.Context, env *framework.Env) error {
	err := w.probe(ctx, env)
	if err == nil || !strings.Contains(err.Error(), "denied the request") {
		return fmt.Errorf("API server call through the webhook did not get a verdict: %v", err)
	}
	return nil
}

// reviewDenied sends the webhook the review of a class with an invalid
// driver over a new TLS connection; it must be denied, with its UID.
func (w *webhookServer) reviewDenied(ctx context.Context, name string) error {
	r, err := framework.ReviewClass(ctx, w.client, w.addr, types.UID(name), &snapv1.VolumeSnapshotClass{ObjectMeta: metav1.ObjectMeta{Name: name},
		Driver: "not a driver!", DeletionPolicy: snapv1.VolumeSnapshotContentDelete})
	if err != nil {
		return err
	}
	if r.Allowed || string(r.UID) != name || r.Result == nil || r.Result.Code != http.StatusForbidden {
		return fmt.Errorf("review %s: allowed %v, UID %q, result %+v; want a denial", name, r.Allowed, r.UID, r.Result)
	}
	return nil
}
