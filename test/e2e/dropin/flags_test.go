package dropin

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// communityFlag is one flag from a binary's -h output: its name and the
// value type Go's flag package prints ("" for a boolean).
type communityFlag struct{ name, typ string }

// flagLine is a flag's first line in Go's flag usage: two spaces, a dash,
// the name, then the value type unless it is a boolean.
var flagLine = regexp.MustCompile(`^  --?([A-Za-z0-9][A-Za-z0-9_.-]*)(?: (\S+))?(?:\t.*)?$`)

// helpFlags runs bin -h and parses every flag it lists.
func helpFlags(t *testing.T, bin string) []communityFlag {
	t.Helper()
	out, _ := exec.Command(bin, "-h").CombinedOutput() // -h exits 0 or 2 depending on the flag package
	var flags []communityFlag
	for _, line := range strings.Split(string(out), "\n") {
		if m := flagLine.FindStringSubmatch(line); m != nil {
			flags = append(flags, communityFlag{name: m[1], typ: m[2]})
		}
	}
	if len(flags) < 10 {
		t.Fatalf("%s -h lists only %d flags; output:\n%s", bin, len(flags), out)
	}
	return flags
}

// Every flag of the community snapshot-controller and csi-snapshotter is
// one of ours: an unknown flag would make the swapped image crash-loop.
func TestEveryCommunityFlagIsOneOfOurs(t *testing.T) {
	ours := map[string]bool{}
	for _, f := range helpFlags(t, controllerBin(t)) {
		ours[f.name] = true
	}
	for _, peer := range []string{"snapshot-controller", "csi-snapshotter"} {
		bin, err := framework.Tool(peer)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range helpFlags(t, bin) {
			if !ours[f.name] {
				t.Errorf("%s has --%s, which our controller lacks", peer, f.name)
			}
		}
	}
}

// testValue is a valid value for a community flag on this machine. Flags
// are given as --name=value, booleans as --name=true, so each one is
// parsed with a value, not just looked up.
func testValue(f communityFlag, fixed map[string]string) (string, bool) {
	if v, ok := fixed[f.name]; ok {
		return v, true
	}
	switch f.typ {
	case "":
		return "true", true
	case "int":
		return "3", true
	case "float":
		return "20", true
	case "duration":
		return "90s", true
	}
	return "", false
}

// Our controller started with a command line made of every flag of a
// community binary, each with a valid value, runs: it does not exit with a
// flag error, becomes ready, and runs the component the command line was
// written for.
func TestCommunityCommandLinesStartOurController(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	drv := env.StartCSIDriver(t, framework.CSIDriverOptions{})
	shared := map[string]string{
		"kubeconfig":                     env.Kubeconfig,
		"feature-gates":                  "CSIVolumeGroupSnapshot=true",
		"v":                              "5",
		"vmodule":                        "leader=5",
		"logging-format":                 "json",
		"log-flush-frequency":            "2s",
		"log-json-split-stream":          "true",
		"log-json-info-buffer-size":      "64Ki",
		"log-text-split-stream":          "true",
		"log-text-info-buffer-size":      "1Ki",
		"leader-election":                "true",
		"leader-election-namespace":      ns,
		"leader-election-lease-duration": "15s",
		"leader-election-renew-deadline": "10s",
		"leader-election-retry-period":   "2s",
		"leader-election-labels":         "snapkeeper.io/test:dropin,tier:storage",
		"metrics-path":                   "/metrics",
		"resync-period":                  "15m",
		"retry-interval-start":           "1s",
		"retry-interval-max":             "5m",
		"version":                        "false",
	}
	cases := []struct {
		peer, component, lease string
		fixed                  map[string]string
	}{
		{peer: "snapshot-controller", component: "binder", lease: "snapshot-controller-leader", fixed: map[string]string{
			"retry-crd-interval-max": "30s",
		}},
		{peer: "csi-snapshotter", component: "csi", lease: "external-snapshotter-leader-" + strings.ReplaceAll(drv.Name, ".", "-"), fixed: map[string]string{
			// Per-node sidecars elect no leader; this one does, to use the labels.
			"node-deployment":                "false",
			"csi-address":                    "unix://" + drv.Socket,
			"timeout":                        "30s",
			"snapshot-name-prefix":           "snap",
			"snapshot-name-uuid-length":      "16",
			"groupsnapshot-name-prefix":      "gsnap",
			"groupsnapshot-name-uuid-length": "16",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.peer, func(t *testing.T) {
			bin, err := framework.Tool(tc.peer)
			if err != nil {
				t.Fatal(err)
			}
			addr, err := framework.FreeAddr()
			if err != nil {
				t.Fatal(err)
			}
			fixed := map[string]string{"http-endpoint": addr, "metrics-address": addr}
			for k, v := range shared {
				fixed[k] = v
			}
			for k, v := range tc.fixed {
				fixed[k] = v
			}
			var args []string
			for _, f := range helpFlags(t, bin) {
				v, ok := testValue(f, fixed)
				if !ok {
					t.Errorf("no test value for --%s (%s) of %s: add one", f.name, f.typ, tc.peer)
					continue
				}
				args = append(args, fmt.Sprintf("--%s=%s", f.name, v))
			}
			sort.Strings(args)
			p := startOwn(t, env, tc.peer, args)
			c := &framework.Component{Name: tc.peer, HTTPAddr: addr, Proc: p}
			if err := c.WaitReady(time.Minute); err != nil {
				t.Fatalf("our controller with the %s command line: %v", tc.peer, err)
			}
			want := fmt.Sprintf(`"components":%q`, tc.component)
			framework.Eventually(t, 10*time.Second, "the start log line", func() (bool, error) {
				return strings.Contains(p.Tail(1<<20), want), nil
			})
			if p.Exited() {
				t.Fatalf("exited:\n%s", p.Tail(4000))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if _, err := c.Metric(ctx, "snapkeeper_api_writes_total"); err != nil {
				t.Errorf("metrics: %v", err)
			}
			// Our Lease, held under our mark, with the labels of the community
			// form of --leader-election-labels where the command line has it.
			framework.Eventually(t, 30*time.Second, "our Lease "+tc.lease, func() (bool, error) {
				l, err := env.Kube.CoordinationV1().Leases(ns).Get(ctx, tc.lease, metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				holder := ""
				if l.Spec.HolderIdentity != nil {
					holder = *l.Spec.HolderIdentity
				}
				labelled := !slices.Contains(args, "--leader-election-labels="+shared["leader-election-labels"]) ||
					l.Labels["snapkeeper.io/test"] == "dropin" && l.Labels["tier"] == "storage"
				return labelled && strings.Contains(holder, "_snapkeeper_"), fmt.Errorf("labels %v, holder %q", l.Labels, holder)
			})
		})
	}
}

// The flags our tables name exist in the community binaries, so a renamed
// community flag does not leave a stale entry behind unnoticed.
func TestCommunityFlagListsAreParsed(t *testing.T) {
	bin, err := framework.Tool("csi-snapshotter")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range helpFlags(t, bin) {
		names = append(names, f.name)
	}
	for _, want := range []string{"automaxprocs", "csi-address", "leader-election-labels", "log-json-split-stream", "v", "timeout"} {
		if !slices.Contains(names, want) {
			t.Errorf("csi-snapshotter -h does not list --%s: %v", want, names)
		}
	}
}

// gateLine is one gate in the usage of --feature-gates.
var gateLine = regexp.MustCompile(`^\s+([A-Za-z0-9]+)=true\|false \([A-Z]+ - default=(true|false)\)`)

// Every feature gate a community binary accepts is accepted by ours: a
// deployment that sets any of them must not make the swapped image
// crash-loop. All of them at once, each at its community default.
func TestEveryCommunityFeatureGateIsAccepted(t *testing.T) {
	env := framework.Shared(t)
	gates := map[string]string{}
	for _, peer := range []string{"snapshot-controller", "csi-snapshotter"} {
		bin, err := framework.Tool(peer)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := exec.Command(bin, "-h").CombinedOutput()
		n := 0
		for _, line := range strings.Split(string(out), "\n") {
			if m := gateLine.FindStringSubmatch(line); m != nil {
				gates[m[1]] = m[2]
				n++
			}
		}
		if n < 3 {
			t.Fatalf("%s -h lists only %d feature gates; output:\n%s", peer, n, out)
		}
	}
	var list []string
	for g, def := range gates {
		list = append(list, g+"="+def)
	}
	sort.Strings(list)
	c, err := env.StartComponent(env.TempDir(t, "gates"), "controller", "./cmd/controller",
		"--components=binder", "--feature-gates="+strings.Join(list, ","))
	if err != nil {
		t.Fatalf("our controller refused the community's feature gates %v: %v", list, err)
	}
	c.Proc.Stop(5 * time.Second)
}
