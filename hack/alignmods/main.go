// Command alignmods keeps the modules that `make test` builds on one
// version of every dependency they share, so that the Go build cache
// compiles client-go, grpc, the k8s.io API types and the rest once for all
// of them instead of once per module (docs/testing.md, "Where make test
// spends its time"). A package is reused from the cache only when its whole
// dependency closure is the same, so one module with a newer golang.org/x/net
// is enough to compile client-go a second time.
//
// The versions to share are the anchors': our module, whose versions the
// previous release built by the upgrade suite shares too, and the modules
// of kube-apiserver and of the community peers (Kubernetes v1.37.2's own).
// The anchors are raised to the highest version among them; every other
// tool module is raised to it where it is lower and pinned down to it by a
// replace directive where it asks for more (a tool's build only, never
// what it ships).
//
//	go run ./hack/alignmods          # lists the shared dependencies that differ; exit 1 if any
//	go run ./hack/alignmods -w       # aligns them
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
)

// modules are the module directories `make test` builds from, with the
// `go list` arguments that name what it compiles there (the Makefile's
// build lines): ours and the tool modules under hack/tools. kube-floor (an
// older Kubernetes on purpose), release, certmanager, velero and flux (nothing built in
// `make test`) and staticcheck (a small closure of its own) stay out. Only dependencies whose packages are compiled in
// two modules or more are compared; the rest of a build list does not
// reach the build cache.
var modules = []struct {
	dir  string
	list []string
}{
	{".", []string{"-test", "./..."}},
	{"hack/tools/kube", []string{"-test", "k8s.io/kubernetes/cmd/kube-apiserver", "k8s.io/kubernetes/cmd/kube-controller-manager", "k8s.io/kubernetes/cmd/kubectl", "k8s.io/kubernetes/cmd/kubelet", "k8s.io/kubernetes/cmd/kube-scheduler", "k8s.io/kubernetes/cmd/kube-proxy", "./etcd", "./mockcsi/..."}},
	{"hack/tools/peers", []string{"github.com/kubernetes-csi/external-snapshotter/v8/cmd/snapshot-controller", "github.com/kubernetes-csi/external-snapshotter/v8/cmd/csi-snapshotter"}},
	{"hack/tools/provisioner", []string{"github.com/kubernetes-csi/external-provisioner/v6/cmd/csi-provisioner"}},
	{"hack/tools/promtool", []string{"-tags", "remove_all_sd", "github.com/prometheus/prometheus/cmd/promtool", "./promql-series"}},
	{"hack/tools/helm", []string{"helm.sh/helm/v3/cmd/helm"}},
	{"hack/tools/controller-gen", []string{"sigs.k8s.io/controller-tools/cmd/controller-gen", "./crdfix"}},
}

// anchors are the first three modules.
const anchors = 3

// keepNewer are the dependencies a tool module needs newer than the
// anchors' (by path prefix): pinning them down breaks its build, so they
// stay unshared.
var keepNewer = map[string][]string{
	// Prometheus 3.16 uses semantic conventions that OpenTelemetry v1.44
	// does not have, and client_golang's newest query API.
	"hack/tools/promtool": {"go.opentelemetry.io/", "github.com/prometheus/"},
}

func keptNewer(dir, path string) bool {
	for _, p := range keepNewer[dir] {
		if strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}

// dep is one dependency as a module builds it: the version in effect (a
// replacement's when replaced) and whether a replace directive set it.
type dep struct {
	version  string
	replaced bool
}

func main() {
	write := flag.Bool("w", false, "align every differing dependency")
	flag.Parse()
	for round := 1; ; round++ {
		graphs := make([]map[string]dep, len(modules))
		for i, m := range modules {
			g, err := graph(m.dir, m.list)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
			graphs[i] = g
		}
		edits := plan(graphs)
		n := 0
		for _, e := range edits {
			n += len(e)
		}
		if n == 0 {
			fmt.Printf("alignmods: %d modules agree on every shared dependency\n", len(modules))
			return
		}
		if !*write {
			for i, m := range modules {
				for _, e := range edits[i] {
					fmt.Printf("%s: %s\n", m.dir, e)
				}
			}
			fmt.Println("alignmods: shared dependencies differ; run `go run ./hack/alignmods -w`")
			os.Exit(1)
		}
		if round > 10 {
			fmt.Fprintln(os.Stderr, "alignmods: still differing after 10 rounds")
			os.Exit(2)
		}
		for i, m := range modules {
			if len(edits[i]) == 0 {
				continue
			}
			// Raised minimums, not `go get path@version`: one raise may
			// need another above the highest version in use, which
			// minimal version selection (tidy) then picks.
			args := []string{"mod", "edit"}
			for _, e := range edits[i] {
				args = append(args, e.flag())
			}
			if err := run(m.dir, args...); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
			if err := run(m.dir, "mod", "tidy"); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
		}
	}
}

// edit is one change to a module's go.mod.
type edit struct {
	path, from, to string
	pin            bool // a replace directive down to the anchors' version
}

func (e edit) flag() string {
	if e.pin {
		return "-replace=" + e.path + "=" + e.path + "@" + e.to
	}
	return "-require=" + e.path + "@" + e.to
}

func (e edit) String() string {
	how := "raise"
	if e.pin {
		how = "pin (replace)"
	}
	return fmt.Sprintf("%s %s: %s -> %s", how, e.path, e.from, e.to)
}

// plan returns, per module, the edits that bring every dependency it
// shares with another module to one version: the anchors' highest for a
// dependency an anchor compiles, else the highest in use. Anchors are only
// raised, and keep their own replace directives (Kubernetes' staging
// modules); other modules are raised or pinned down.
func plan(graphs []map[string]dep) [][]edit {
	want, users, anchored := map[string]string{}, map[string]int{}, map[string]bool{}
	for i, g := range graphs {
		for p, d := range g {
			users[p]++
			if i < anchors {
				anchored[p] = true
			} else if anchored[p] {
				continue
			}
			if h, ok := want[p]; !ok || compare(d.version, h) > 0 {
				want[p] = d.version
			}
		}
	}
	edits := make([][]edit, len(graphs))
	for i, g := range graphs {
		for p, d := range g {
			w := want[p]
			switch {
			case users[p] < 2 || d.version == w || (compare(d.version, w) > 0 && keptNewer(modules[i].dir, p)):
			case i < anchors && d.replaced:
				fmt.Fprintf(os.Stderr, "alignmods: %s replaces %s with %s, the others use %s\n", modules[i].dir, p, d.version, w)
			case compare(d.version, w) < 0 && !d.replaced:
				edits[i] = append(edits[i], edit{path: p, from: d.version, to: w})
			default:
				edits[i] = append(edits[i], edit{path: p, from: d.version, to: w, pin: true})
			}
		}
		sort.Slice(edits[i], func(a, b int) bool { return edits[i][a].path < edits[i][b].path })
	}
	return edits
}

// graph lists the modules whose packages module dir compiles for the
// packages `go list list...` names.
func graph(dir string, list []string) (map[string]dep, error) {
	args := append([]string{"list", "-deps", "-f", "{{with .Module}}{{.Path}} {{.Version}}{{with .Replace}} {{.Version}}{{end}}{{end}}"}, list...)
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s: go %s: %w", dir, strings.Join(args, " "), err)
	}
	g := map[string]dep{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch len(f) {
		case 2:
			g[f[0]] = dep{version: f[1]}
		case 3:
			g[f[0]] = dep{version: f[2], replaced: true}
		} // the main module and std have no version
	}
	return g, sc.Err()
}

func run(dir string, args ...string) error {
	fmt.Printf("(cd %s && go %s)\n", dir, strings.Join(args, " "))
	cmd := exec.Command("go", args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, os.Stdout, os.Stderr
	return cmd.Run()
}

// compare orders two semantic versions ("v1.2.3", "v1.2.3-pre.1",
// "v0.0.0-20260721132016-d427ff9ee9ad", "v2.0.0+incompatible") as
// semver.org does: build metadata ignored, a prerelease before its release,
// prerelease identifiers numeric before alphanumeric.
func compare(a, b string) int {
	a, b = strings.TrimPrefix(a, "v"), strings.TrimPrefix(b, "v")
	a, _, _ = strings.Cut(a, "+")
	b, _, _ = strings.Cut(b, "+")
	ac, apre, aok := strings.Cut(a, "-")
	bc, bpre, bok := strings.Cut(b, "-")
	if c := compareIDs(strings.Split(ac, "."), strings.Split(bc, "."), true); c != 0 {
		return c
	}
	switch {
	case !aok && !bok:
		return 0
	case !aok:
		return 1
	case !bok:
		return -1
	}
	return compareIDs(strings.Split(apre, "."), strings.Split(bpre, "."), false)
}

// compareIDs compares dot-separated identifiers one by one; numeric ones
// by value and before alphanumeric ones, a shorter list first when one is
// a prefix of the other.
func compareIDs(a, b []string, numeric bool) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		an, aerr := strconv.ParseUint(a[i], 10, 64)
		bn, berr := strconv.ParseUint(b[i], 10, 64)
		switch {
		case aerr == nil && berr == nil:
			if an != bn {
				if an < bn {
					return -1
				}
				return 1
			}
		case aerr == nil && !numeric:
			return -1
		case berr == nil && !numeric:
			return 1
		default:
			if c := strings.Compare(a[i], b[i]); c != 0 {
				return c
			}
		}
	}
	switch {
	case len(a) < len(b):
		return -1
	case len(a) > len(b):
		return 1
	}
	return 0
}
