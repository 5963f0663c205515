package webhook

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// rotateCertificate replaces the webhook's certificate files (a new serving
// certificate from the same CA, as cert-manager renews) while the API
// server keeps calling the webhook. The served certificate must change and
// no call may fail: every probe must come back denied by the webhook, never
// "failed calling webhook".
func rotateCertificate(t *testing.T, env *framework.Env, w *webhookServer) {
	before, err := w.servedSerial()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	probe := func() {
		t.Helper()
		err := w.probe(ctx, env)
		if err == nil || !strings.Contains(err.Error(), "denied the request") {
			t.Fatalf("API server call through the webhook did not get a verdict: %v", err)
		}
	}
	for range 5 {
		probe()
	}
	if err := w.ca.Serving(w.certDir, "snapkeeper-webhook"); err != nil {
		t.Fatal(err)
	}
	var after string
	calls := 0
	// Bounded: at most 30 s of probes.
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		probe()
		calls++
		if after, err = w.servedSerial(); err != nil {
			t.Fatal(err)
		}
		if after != before && calls >= 5 {
			break
		}
	}
	if after == before {
		t.Fatalf("served certificate still has serial %s after %d calls", before, calls)
	}
	for range 5 {
		probe()
	}
	t.Logf("certificate serial %s -> %s; %d calls during rotation, none failed", before, after, calls)
}
