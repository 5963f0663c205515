package framework

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/pkg/admission"
)

// StubWebhook is an admission endpoint on loopback that serves the
// certificate in a directory through the webhook's own reloader, allows
// every object except those labelled deny=true, and counts the reviews it
// answered: a stand-in for tests of how the API server reaches and trusts
// a webhook, not of what the webhook decides.
type StubWebhook struct {
	Addr    string // 127.0.0.1:port (HTTPS)
	reviews atomic.Int64
}

// StubWebhookDenial is the message of the stub's denials.
const StubWebhookDenial = "denied by the stub webhook"

// StartStubWebhook serves dir's tls.crt and tls.key (reloaded every 100 ms)
// on a free loopback port; t.Cleanup stops it.
func StartStubWebhook(t T, dir string) *StubWebhook {
	t.Helper()
	reloader := admission.NewCertReloader(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), 100*time.Millisecond, nil)
	if err := reloader.Load(); err != nil {
		t.Fatalf("%v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go reloader.Run(ctx)
	w := &StubWebhook{}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		t.Fatalf("%v", err)
	}
	w.Addr = l.Addr().String()
	srv := &http.Server{
		Handler:           http.HandlerFunc(w.serve),
		TLSConfig:         &tls.Config{GetCertificate: reloader.GetCertificate, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 5 * time.Second,
	}
	go func() { _ = srv.ServeTLS(l, "", "") }()
	t.Cleanup(func() { cancel(); srv.Close() })
	return w
}

// Reviews is the number of reviews the stub has answered.
func (w *StubWebhook) Reviews() int64 { return w.reviews.Load() }

func (w *StubWebhook) serve(rw http.ResponseWriter, r *http.Request) {
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&review); err != nil || review.Request == nil {
		http.Error(rw, "bad review", http.StatusBadRequest)
		return
	}
	w.reviews.Add(1)
	var obj metav1.PartialObjectMetadata
	_ = json.Unmarshal(review.Request.Object.Raw, &obj)
	resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: obj.Labels["deny"] != "true"}
	if !resp.Allowed {
		resp.Result = &metav1.Status{Message: StubWebhookDenial}
	}
	review.Response, review.Request = resp, nil
	rw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(rw).Encode(&review)
}
