package framework

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Component is one of our binaries running against the control plane, with
// its HTTP endpoint (health and metrics).
type Component struct {
	Name     string
	HTTPAddr string
	Proc     *Process
}

// StartController builds and starts snapkeeper-controller with the admin
// kubeconfig, a free --http-endpoint and args, and waits until /readyz says
// its caches are synced. t.Cleanup stops it.
func (e *Env) StartController(t T, args ...string) *Component {
	t.Helper()
	c, err := e.StartComponent(e.TempDir(t, "controller"), "controller", "./cmd/controller", args...)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() { c.Proc.Stop(10 * time.Second) })
	return c
}

// StartComponent starts one of our commands (pkg path) with logs in dir.
func (e *Env) StartComponent(dir, name, pkg string, args ...string) (*Component, error) {
	bin, err := OwnBinary(pkg)
	if err != nil {
		return nil, err
	}
	addr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	full := append([]string{"--kubeconfig=" + e.Kubeconfig, "--http-endpoint=" + addr}, args...)
	proc, err := StartProcess(dir, name, bin, full)
	if err != nil {
		return nil, err
	}
	c := &Component{Name: name, HTTPAddr: addr, Proc: proc}
	if err := c.WaitReady(60 * time.Second); err != nil {
		proc.Stop(5 * time.Second)
		return nil, err
	}
	return c, nil
}

// WaitReady polls /readyz until it answers 200.
func (c *Component) WaitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		resp, err := http.Get("http://" + c.HTTPAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if c.Proc.Exited() || time.Now().After(deadline) {
			return fmt.Errorf("%s not ready:\n%s", c.Name, c.Proc.Tail(3000))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Metric sums the samples of a metric whose label set contains every given
// "key=\"value\"" fragment, from the component's /metrics (0 when none
// matches).
func (c *Component) Metric(ctx context.Context, name string, labels ...string) (float64, error) {
	sum, _, err := c.MetricSeries(ctx, name, labels...)
	return sum, err
}

// MetricSeries is Metric, and whether any series matched.
func (c *Component) MetricSeries(ctx context.Context, name string, labels ...string) (sum float64, found bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.HTTPAddr+"/metrics", nil)
	if err != nil {
		return 0, false, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, false, err
	}
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		match := true
		for _, l := range labels {
			if !strings.Contains(line, l) {
				match = false
			}
		}
		if !match {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err == nil {
			sum += v
			found = true
		}
	}
	return sum, found, nil
}

// Kill SIGKILLs the component (no graceful stop: its Leases are not
// released) and waits until it is gone.
func (c *Component) Kill(t T) {
	t.Helper()
	c.Proc.Signal(syscall.SIGKILL)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Proc.Wait(ctx); err == context.DeadlineExceeded {
		t.Fatalf("%s survived SIGKILL", c.Name)
	}
}
