package framework

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Helm runs bin/helm against one API server with config, cache and data
// directories of its own, so nothing of the user's Helm setup is read or
// written.
type Helm struct {
	Bin        string
	Home       string
	Kubeconfig string // empty: commands that need no cluster (package, template)
}

// NewHelm returns a Helm bound to kubeconfig; t.Cleanup removes its home.
func NewHelm(t T, kubeconfig string) *Helm {
	t.Helper()
	h, err := newHelm(kubeconfig)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() { os.RemoveAll(h.Home) })
	return h
}

// newHelm returns a Helm bound to kubeconfig with a new home, which the
// caller removes.
func newHelm(kubeconfig string) (*Helm, error) {
	bin, err := Tool("helm")
	if err != nil {
		return nil, err
	}
	home, err := os.MkdirTemp("", "snapkeeper-helm-")
	if err != nil {
		return nil, err
	}
	return &Helm{Bin: bin, Home: home, Kubeconfig: kubeconfig}, nil
}

// Run runs helm with args (and --kubeconfig when set); the error carries
// the command line and helm's stderr.
func (h *Helm) Run(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if h.Kubeconfig != "" {
		args = append(args, "--kubeconfig", h.Kubeconfig)
	}
	cmd := exec.CommandContext(ctx, h.Bin, args...)
	cmd.Env = append(os.Environ(),
		"HELM_CONFIG_HOME="+filepath.Join(h.Home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(h.Home, "cache"),
		"HELM_DATA_HOME="+filepath.Join(h.Home, "data"),
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String() + stderr.String(), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// Must is Run that fails the test on an error.
func (h *Helm) Must(t T, args ...string) string {
	t.Helper()
	out, err := h.Run(context.Background(), args...)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return out
}

// ChartDir is the chart's directory, charts/snapkeeper.
func ChartDir() string { return filepath.Join(RepoRoot(), "charts", "snapkeeper") }

// Template renders charts/snapkeeper as release "snapkeeper" in namespace
// "snapkeeper" for kubeVersion (Helm's default when empty), with extra helm
// arguments (--set ...), and fails the test on an error.
func (h *Helm) Template(t T, kubeVersion string, args ...string) []byte {
	t.Helper()
	return []byte(h.Must(t, templateArgs(kubeVersion, args)...))
}

func templateArgs(kubeVersion string, args []string) []string {
	all := []string{"template", "snapkeeper", ChartDir(), "--namespace", "snapkeeper"}
	if kubeVersion != "" {
		all = append(all, "--kube-version", kubeVersion)
	}
	return append(all, args...)
}

// Package packages the chart in dir with version and appVersion set, as
// `make chart` does, into outDir and returns the archive's path.
func (h *Helm) Package(ctx context.Context, dir, version, appVersion, outDir string) (string, error) {
	out, err := h.Run(ctx, "package", dir, "--version", version, "--app-version", appVersion, "-d", outDir)
	if err != nil {
		return "", err
	}
	// "Successfully packaged chart and saved it to: /path/name-1.2.3.tgz"
	_, path, ok := strings.Cut(strings.TrimSpace(out), "saved it to: ")
	if !ok {
		return "", fmt.Errorf("helm package printed no archive path: %q", out)
	}
	return path, nil
}
