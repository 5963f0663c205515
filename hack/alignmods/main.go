// Command alignmods keeps the modules that `make test` builds on one
// version of every dependency they share, so that the Go build cache
// compiles client-go, grpc, the k8s.io API types and the rest once for all
// of them instead of once per module (docs/testing.md, "Where make test
// spends its time"). A package is reused from the cache only when its whole
// dependency closure is the same, so one module with a newer golang.org/x/net
// is enough to compile client-go a second time.
//
//	go run ./hack/alignmods          # lists the shared dependencies that differ; exit 1 if any
//	go run ./hack/alignmods -w       # raises each to the highest version any module uses
//
// Versions only go up: raising one module's requirement can raise others
// (minimal version selection), so -w repeats until nothing differs.
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
// older Kubernetes on purpose), release and certmanager (nothing built in
// `make test`) stay out. Only dependencies whose packages are compiled in
// two modules or more are compared; the rest of a build list does not
// reach the build cache.
var modules = []struct {
	dir  string
	list []string
}{
	{".", []string{"-test", "./..."}},
	{"hack/tools/kube", []string{"-test", "k8s.io/kubernetes/cmd/kube-apiserver", "k8s.io/kubernetes/cmd/kube-controller-manager", "k8s.io/kubernetes/cmd/kubectl", "./etcd", "./mockcsi/..."}},
	{"hack/tools/peers", []string{"github.com/kubernetes-csi/external-snapshotter/v8/cmd/snapshot-controller", "github.com/kubernetes-csi/external-snapshotter/v8/cmd/csi-snapshotter"}},
	{"hack/tools/provisioner", []string{"github.com/kubernetes-csi/external-provisioner/v6/cmd/csi-provisioner"}},
	{"hack/tools/promtool", []string{"-tags", "remove_all_sd", "github.com/prometheus/prometheus/cmd/promtool", "./promql-series"}},
	{"hack/tools/helm", []string{"helm.sh/helm/v3/cmd/helm"}},
	{"hack/tools/controller-gen", []string{"sigs.k8s.io/controller-tools/cmd/controller-gen", "./crdfix"}},
}

func main() {
	write := flag.Bool("w", false, "raise every differing dependency to the highest version in use")
	flag.Parse()
	for round := 1; ; round++ {
		graphs := map[string]map[string]string{}
		for _, m := range modules {
			g, err := graph(m.dir, m.list)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
			graphs[m.dir] = g
		}
		ups := upgrades(graphs)
		if len(ups) == 0 {
			fmt.Printf("alignmods: %d modules agree on every shared dependency\n", len(modules))
			return
		}
		if !*write {
			for _, m := range modules {
				for _, u := range ups[m.dir] {
					fmt.Printf("%s: %s\n", m.dir, u)
				}
			}
			fmt.Println("alignmods: shared dependencies differ; run `go run ./hack/alignmods -w`")
			os.Exit(1)
		}
		if round > 10 {
			fmt.Fprintln(os.Stderr, "alignmods: still differing after 10 rounds")
			os.Exit(2)
		}
		for _, m := range modules {
			if len(ups[m.dir]) == 0 {
				continue
			}
			// Raised minimums, not `go get path@version`: one raise may
			// need another above the highest version in use, which
			// minimal version selection (tidy) then picks.
			args := []string{"mod", "edit"}
			for _, u := range ups[m.dir] {
				args = append(args, "-require="+strings.Fields(u)[0]+"@"+strings.Fields(u)[3])
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

// upgrades returns, per module, "path version -> highest" for every
// dependency compiled in two modules or more that another module uses at a
// higher version. A module that replaces a path keeps its version (its
// replacement is on purpose).
func upgrades(graphs map[string]map[string]string) map[string][]string {
	highest, users := map[string]string{}, map[string]int{}
	for _, g := range graphs {
		for p, v := range g {
			users[p]++
			v = strings.TrimSuffix(v, " =>")
			if h, ok := highest[p]; !ok || compare(v, h) > 0 {
				highest[p] = v
			}
		}
	}
	out := map[string][]string{}
	for m, g := range graphs {
		for p, v := range g {
			if h := highest[p]; users[p] > 1 && !strings.HasSuffix(v, "=>") && compare(v, h) < 0 {
				out[m] = append(out[m], fmt.Sprintf("%s %s -> %s", p, v, h))
			}
		}
		sort.Strings(out[m])
	}
	return out
}

// graph lists the modules whose packages module dir compiles for the
// packages `go list list...` names: path -> version. A replaced path's
// version ends in " =>".
func graph(dir string, list []string) (map[string]string, error) {
	args := append([]string{"list", "-deps", "-f", "{{with .Module}}{{.Path}} {{.Version}}{{with .Replace}} =>{{end}}{{end}}"}, list...)
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s: go %s: %w", dir, strings.Join(args, " "), err)
	}
	g := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 { // the main module and std have no version
			continue
		}
		g[f[0]] = strings.Join(f[1:], " ")
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
