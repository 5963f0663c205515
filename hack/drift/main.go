// Command drift compares what a community external-snapshotter release can
// change under us with what this repository holds: the feature gates and the
// flags the release's two binaries declare in their own source, the CRDs of
// its client module and its RBAC manifests. The release is the one
// hack/tools/peers/go.mod names, which every suite runs against.
//
// Each difference that hack/drift/known.yaml does not list is printed on one
// line (what, the release's value, ours, the file to change) and the exit
// status is 1; so is a known entry that no longer matches anything, so the
// list cannot outlive its reasons. Without a difference it prints one summary
// line. Errors (a file that cannot be read or parsed) exit with 2.
//
//	go run ./hack/drift
//	go run ./hack/drift -upstream DIR -client DIR -repo DIR
//
// docs/testing.md ("When the community releases") says when to run it.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

const (
	upstreamModule = "github.com/kubernetes-csi/external-snapshotter/v8"
	clientModule   = "github.com/kubernetes-csi/external-snapshotter/client/v8"
	peersDir       = "hack/tools/peers"
	knownFile      = "hack/drift/known.yaml"
)

// diff is one way in which the release and we differ.
type diff struct {
	What     string // the gate, flag, CRD path or RBAC rule
	Upstream string // the release's value ("absent" when it has none)
	Ours     string
	File     string // the file of ours to change, relative to the repository
}

// Key identifies the difference in known.yaml. It carries both values, so a
// release that changes a known difference again fails the check.
func (d diff) Key() string {
	return fmt.Sprintf("%s: upstream %s, ours %s", d.What, d.Upstream, d.Ours)
}

type knownEntry struct {
	Key    string `json:"key"`
	Reason string `json:"reason"`
}

type config struct {
	Repo     string // our repository
	Upstream string // the release's source tree
	Client   string // its client module (CRDs)
	Known    string // known differences; default Repo/hack/drift/known.yaml
	Version  string // the release, for the summary; may be empty
}

func main() {
	var cfg config
	flag.StringVar(&cfg.Repo, "repo", ".", "Our repository.")
	flag.StringVar(&cfg.Upstream, "upstream", "", "Source tree of the community release; default: the "+upstreamModule+" of "+peersDir+"/go.mod (downloaded when missing).")
	flag.StringVar(&cfg.Client, "client", "", "Tree of its client module; default: the "+clientModule+" of "+peersDir+"/go.mod.")
	flag.Parse()
	code, err := run(os.Stdout, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "drift:", err)
		os.Exit(2)
	}
	os.Exit(code)
}

// run prints the differences to w and returns the exit status.
func run(w io.Writer, cfg config) (int, error) {
	var diffs []diff
	if cfg.Upstream == "" || cfg.Client == "" {
		mods, err := peerModules(cfg.Repo)
		if err != nil {
			return 0, err
		}
		up, cl := mods[upstreamModule], mods[clientModule]
		if cfg.Upstream == "" {
			cfg.Upstream, cfg.Version = up.Dir, up.Version
		}
		if cfg.Client == "" {
			cfg.Client = cl.Dir
			// Our types, clientset and CRDs come from the client module of
			// our go.mod; the release builds with its own tree's client
			// (its go.mod replaces the module with ./client), which is the
			// version the peers module selects.
			ours, err := requiredVersion(filepath.Join(cfg.Repo, "go.mod"), clientModule)
			if err != nil {
				return 0, err
			}
			if ours != cl.Version {
				diffs = append(diffs, diff{What: "module " + clientModule, Upstream: cl.Version, Ours: ours, File: "go.mod"})
			}
		}
	}
	if cfg.Known == "" {
		cfg.Known = filepath.Join(cfg.Repo, knownFile)
	}
	known, err := readKnown(cfg.Known)
	if err != nil {
		return 0, err
	}

	var counts []string
	for _, c := range []struct {
		name    string
		compare func(config) ([]diff, int, error)
	}{
		{"feature gates", compareGates},
		{"flags", compareFlags},
		{"CRDs", compareCRDs},
		{"RBAC resources", compareRBAC},
	} {
		ds, n, err := c.compare(cfg)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", c.name, err)
		}
		diffs = append(diffs, ds...)
		counts = append(counts, fmt.Sprintf("%d %s", n, c.name))
	}

	used := map[string]bool{}
	failed := false
	for _, d := range diffs {
		if _, ok := known[d.Key()]; ok {
			used[d.Key()] = true
			continue
		}
		failed = true
		fmt.Fprintf(w, "drift: %s (change %s)\n", d.Key(), d.File)
	}
	var stale []string
	for k := range known {
		if !used[k] {
			stale = append(stale, k)
		}
	}
	slices.Sort(stale)
	for _, k := range stale {
		failed = true
		fmt.Fprintf(w, "drift: stale entry in %s, nothing differs this way any more: %s\n", knownFile, k)
	}
	if failed {
		return 1, nil
	}
	release := cfg.Version
	if release == "" {
		release = cfg.Upstream
	}
	fmt.Fprintf(w, "drift: external-snapshotter %s: %s compared; no difference beyond the %d in %s\n",
		release, strings.Join(counts, ", "), len(known), knownFile)
	return 0, nil
}

type module struct{ Path, Version, Dir, Error string }

// peerModules finds (and downloads when needed) the release and its client
// module as the peers module selects them.
func peerModules(repo string) (map[string]module, error) {
	cmd := exec.Command("go", "mod", "download", "-json", upstreamModule, clientModule)
	cmd.Dir = filepath.Join(repo, peersDir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go mod download in %s: %w: %s", peersDir, err, stderr.String())
	}
	mods := map[string]module{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var m module
		if err := dec.Decode(&m); err != nil {
			return nil, err
		}
		if m.Error != "" || m.Dir == "" {
			return nil, fmt.Errorf("go mod download %s: %s", m.Path, m.Error)
		}
		mods[m.Path] = m
	}
	for _, p := range []string{upstreamModule, clientModule} {
		if _, ok := mods[p]; !ok {
			return nil, fmt.Errorf("%s/go.mod does not require %s", peersDir, p)
		}
	}
	return mods, nil
}

// requiredVersion reads the version of path from a go.mod's require lines.
func requiredVersion(goMod, path string) (string, error) {
	b, err := os.ReadFile(goMod)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require "))
		if len(f) >= 2 && f[0] == path {
			return f[1], nil
		}
	}
	return "", fmt.Errorf("%s does not require %s", goMod, path)
}

func readKnown(path string) (map[string]knownEntry, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var entries []knownEntry
	if err := yaml.UnmarshalStrict(b, &entries); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := map[string]knownEntry{}
	var errs []error
	for _, e := range entries {
		if e.Key == "" || e.Reason == "" {
			errs = append(errs, fmt.Errorf("%s: entry %q needs a key and a reason", path, e.Key))
		}
		if _, dup := out[e.Key]; dup {
			errs = append(errs, fmt.Errorf("%s: %q is listed twice", path, e.Key))
		}
		out[e.Key] = e
	}
	return out, errors.Join(errs...)
}
