package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/klog/v2"
)

// health collects readiness checks and leader-election watchdogs.
type health struct {
	mu       sync.Mutex
	ready    []func() bool
	watchdog []*leaderelection.HealthzAdaptor
}

func (h *health) addReady(f func() bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ready = append(h.ready, f)
}

func (h *health) addWatchdog(w *leaderelection.HealthzAdaptor) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.watchdog = append(h.watchdog, w)
}

func (h *health) isReady() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, f := range h.ready {
		if !f() {
			return false
		}
	}
	return len(h.ready) > 0
}

func (h *health) leaderOK(r *http.Request) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, w := range h.watchdog {
		if err := w.Check(r); err != nil {
			return err
		}
	}
	return nil
}

// serveHTTP serves health and metrics on addr until ctx is done.
func serveHTTP(ctx context.Context, addr, metricsPath string, profiles bool, h *health, reg *prometheus.Registry) error {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/healthz/leader-election", func(w http.ResponseWriter, r *http.Request) {
		if err := h.leaderOK(r); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !h.isReady() {
			http.Error(w, "caches not synced", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	mux.Handle(metricsPath, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	if profiles {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.FromContext(ctx).Error(err, "HTTP server stopped")
		}
	}()
	return nil
}
