package admission

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/klog/v2"
)

// Server timeouts. The API server gives a webhook 10 s by default (30 s at
// most), so nothing legitimate needs longer; the limits stop slow or idle
// clients from holding connections.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 15 * time.Second
	writeTimeout      = 30 * time.Second
	idleTimeout       = 90 * time.Second
	shutdownTimeout   = 10 * time.Second
)

// ReadyCheck is one condition of /readyz; nil means satisfied.
type ReadyCheck func() error

// NewRouter routes the validating endpoints (one per resource and the
// generic /validate), /healthz, /readyz and /metrics.
func NewRouter(h *Handler, gatherer prometheus.Gatherer, ready map[string]ReadyCheck) *mux.Router {
	r := mux.NewRouter()
	r.Handle("/validate", h.Endpoint(""))
	for _, res := range Resources() {
		r.Handle("/validate/"+res, h.Endpoint(res))
	}
	r.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	}).Methods(http.MethodGet, http.MethodHead)
	r.HandleFunc("/readyz", readyz(ready)).Methods(http.MethodGet, http.MethodHead)
	r.Handle("/metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{})).Methods(http.MethodGet)
	return r
}

// readyz answers 200 when every check passes, else 503 naming the failures:
// the webhook must not receive traffic before its caches are synced (it
// would miss the default class and the snapshots it checks against) or
// before it has a certificate.
func readyz(checks map[string]ReadyCheck) http.HandlerFunc {
	names := make([]string, 0, len(checks))
	for n := range checks {
		names = append(names, n)
	}
	sort.Strings(names)
	return func(w http.ResponseWriter, _ *http.Request) {
		var failed []string
		for _, n := range names {
			if err := checks[n](); err != nil {
				failed = append(failed, fmt.Sprintf("%s: %v", n, err))
			}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if len(failed) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("not ready\n" + strings.Join(failed, "\n") + "\n"))
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	}
}

// NewServer returns an HTTPS-only server (TLS 1.2 or later) whose
// certificate comes from certs at every handshake.
func NewServer(handler http.Handler, certs *CertReloader) *http.Server {
	return &http.Server{
		Handler: handler,
		TLSConfig: &tls.Config{
			MinVersion:     tls.VersionTLS12,
			GetCertificate: certs.GetCertificate,
		},
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    1 << 16,
		// Handshake errors from scanners and probes are noise at the
		// default level.
		ErrorLog: log.New(klogWriter{}, "", 0),
	}
}

// Serve serves TLS on ln until ctx ends, then shuts down gracefully,
// letting requests in flight finish.
func Serve(ctx context.Context, srv *http.Server, ln net.Listener) error {
	errCh := make(chan error, 1)
	go func() { errCh <- srv.ServeTLS(ln, "", "") }()
	select {
	case err := <-errCh:
		return fmt.Errorf("serving on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutting down: %w", err)
	}
	if err := <-errCh; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

type klogWriter struct{}

func (klogWriter) Write(p []byte) (int, error) {
	klog.V(2).InfoS("HTTP server", "msg", strings.TrimSpace(string(p)))
	return len(p), nil
}
