package admission

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/snapkeeper/snapkeeper/pkg/validation"
	. "github.com/snapkeeper/snapkeeper/pkg/validation/validationtest"
)

var testOptions = validation.Options{}

// startTestServer serves the router on a real TLS listener on 127.0.0.1:0
// until ctx ends, and returns its address.
func startTestServer(t *testing.T, ctx context.Context, certs *CertReloader, h *Handler, ready ...ReadyCheck) string {
	t.Helper()
	checks := map[string]ReadyCheck{"certificate": certs.Ready}
	for i, r := range ready {
		checks[fmt.Sprintf("check%d", i)] = r
	}
	return startRouter(t, ctx, certs, NewRouter(h, prometheus.NewRegistry(), checks))
}

func startRouter(t testing.TB, ctx context.Context, certs *CertReloader, router http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(router, certs)
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, srv, ln) }()
	t.Cleanup(func() {
		if ctx.Err() == nil {
			t.Error("test server still running at cleanup: cancel its context first")
		}
		if err := <-done; err != nil {
			t.Errorf("server: %v", err)
		}
	})
	return ln.Addr().String()
}

// tlsClient opens a new connection per request, so each request sees the
// certificate served at that moment.
func tlsClient(pool *x509.CertPool) *http.Client {
	return &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
			DisableKeepAlives: true,
		},
	}
}

// postClass sends a valid review and returns the serial of the served
// certificate.
func postClass(client *http.Client, addr string) (int64, error) {
	body, err := json.Marshal(&admissionv1.AdmissionReview{
		TypeMeta: reviewTypeMeta(),
		Request: &admissionv1.AdmissionRequest{
			UID:       testUID,
			Kind:      gvkOf("volumesnapshotclasses"),
			Resource:  gvrOf("volumesnapshotclasses"),
			Operation: admissionv1.Create,
			Object:    rawNoT(NewClass("fast")),
		},
	})
	if err != nil {
		return 0, err
	}
	resp, err := client.Post("https://"+addr+"/validate/volumesnapshotclasses", "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var out admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK || out.Response == nil || !out.Response.Allowed || out.Response.UID != testUID {
		return 0, fmt.Errorf("status %d, response %+v", resp.StatusCode, out.Response)
	}
	return resp.TLS.PeerCertificates[0].SerialNumber.Int64(), nil
}

func TestServerEndpoints(t *testing.T) {
	ca := newTestCA(t)
	certs, _, _ := loadedReloader(t, ca, 7, time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	reg := prometheus.NewRegistry()
	h := NewHandler(newTestHandler(t, testOptions).lookups, testOptions, 0, NewMetrics(reg))
	var synced atomic.Bool
	addr := startRouter(t, ctx, certs, NewRouter(h, reg, map[string]ReadyCheck{
		"certificate": certs.Ready,
		"informers": func() error {
			if !synced.Load() {
				return errors.New("informer caches not synced yet")
			}
			return nil
		},
	}))
	client := tlsClient(ca.pool)
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := client.Get("https://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	if code, body := get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d %s", code, body)
	}
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "informers: informer caches not synced yet") {
		t.Errorf("/readyz before sync: %d %q, want 503 naming the informers", code, body)
	}
	synced.Store(true)
	if code, body := get("/readyz"); code != http.StatusOK {
		t.Errorf("/readyz after sync: %d %q", code, body)
	}
	if code, _ := get("/validate/pods"); code != http.StatusNotFound {
		t.Errorf("/validate/pods: %d, want 404", code)
	}
	if _, err := postClass(client, addr); err != nil {
		t.Fatal(err)
	}
	code, body := get("/metrics")
	for _, want := range []string{
		`snapkeeper_webhook_requests_total{operation="CREATE",resource="volumesnapshotclasses",verdict="allowed"} 1`,
		`snapkeeper_webhook_request_duration_seconds_count{resource="volumesnapshotclasses"} 1`,
	} {
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("/metrics (%d) lacks %q:\n%s", code, want, body)
		}
	}

	old := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: ca.pool, MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11, //nolint:gosec // the point of the test
	}}}
	if resp, err := old.Get("https://" + addr + "/healthz"); err == nil {
		resp.Body.Close()
		t.Error("a TLS 1.1 client was served; want TLS 1.2 at least")
	}
	cancel()
}

func TestReadyzWithoutCertificate(t *testing.T) {
	certs := NewCertReloader("/nonexistent/tls.crt", "/nonexistent/tls.key", time.Hour, nil)
	rec := readyzRecorder(t, map[string]ReadyCheck{"certificate": certs.Ready})
	if rec.code != http.StatusServiceUnavailable || !strings.Contains(rec.body, "no serving certificate loaded") {
		t.Errorf("got %d %q", rec.code, rec.body)
	}
}

func reviewTypeMeta() metav1.TypeMeta { return metav1.TypeMeta{APIVersion: reviewV1, Kind: reviewKind} }

func gvkOf(resource string) metav1.GroupVersionKind {
	info := resources[resource]
	return metav1.GroupVersionKind{Group: info.gvr.Group, Version: info.gvr.Version, Kind: info.kind}
}

func gvrOf(resource string) metav1.GroupVersionResource {
	info := resources[resource]
	return metav1.GroupVersionResource{Group: info.gvr.Group, Version: info.gvr.Version, Resource: resource}
}

// rawNoT encodes obj for use off the test goroutine; the types used here
// always encode.
func rawNoT(obj any) runtime.RawExtension {
	b, _ := json.Marshal(obj)
	return runtime.RawExtension{Raw: b}
}

type recorded struct {
	code int
	body string
}

func readyzRecorder(t *testing.T, checks map[string]ReadyCheck) recorded {
	t.Helper()
	rec := httptest.NewRecorder()
	readyz(checks)(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	return recorded{rec.Code, rec.Body.String()}
}
