package main

import (
	"context"
	"net"
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestProfilesOnlyWithEnablePprof checks that /debug/pprof/ is served on
// the HTTP endpoint with --enable-pprof and not without it.
func TestProfilesOnlyWithEnablePprof(t *testing.T) {
	for _, on := range []bool{false, true} {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		ctx, cancel := context.WithCancel(context.Background())
		if err := serveHTTP(ctx, addr, "/metrics", on, &health{}, prometheus.NewRegistry()); err != nil {
			cancel()
			t.Fatal(err)
		}
		want := http.StatusNotFound
		if on {
			want = http.StatusOK
		}
		for _, path := range []string{"/debug/pprof/", "/debug/pprof/cmdline"} {
			resp, err := http.Get("http://" + addr + path)
			if err != nil {
				cancel()
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("--enable-pprof=%v: GET %s answered %d, want %d", on, path, resp.StatusCode, want)
			}
		}
		cancel()
	}
}
