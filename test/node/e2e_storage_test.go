package node

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// e2eFocus selects Kubernetes' external storage tests that take
// snapshots: the snapshottable suites (dynamic, pre-provisioned and
// ephemeral patterns, Delete and Retain), their stress variants, the group
// snapshot suites and the provisioning tests that restore a snapshot.
// SNAPKEEPER_E2E_FOCUS overrides it.
const e2eFocus = `External.Storage.*(snapshottable|provisioning.*snapshot data source)`

// e2eDriver is the test-driver definition of the driver deployDriver
// installs (test/e2e/storage/external): classes made from the driver's
// name, small stress options.
var e2eDriver = template.Must(template.New("e2e").Parse(`StorageClass:
  FromName: true
SnapshotClass:
  FromName: true
GroupSnapshotClass:
  FromName: true
DriverInfo:
  Name: {{.Driver}}
  SupportedSizeRange: {Min: 1Mi, Max: 1Gi}
  Capabilities:
    persistence: true
    exec: true
    multipods: true
    singleNodeVolume: true
    snapshotDataSource: true
    groupSnapshot: true
    pvcDataSource: true
  VolumeSnapshotStressTestOptions: {NumPods: 2, NumSnapshots: 2}
  VolumeGroupSnapshotStressTestOptions: {NumPods: 2, NumSnapshots: 2}
`))

// TestKubernetesStorageE2E runs Kubernetes' own external storage e2e
// tests (bin/e2e.test, k8s.io/kubernetes v1.37.2) against the driver's
// pods twice: with snapkeeper (the chart, our image as the snapshotter
// sidecar) and with the community pair (snapshot-controller and
// csi-snapshotter at framework.CommunityVersion, built from their modules and packed the same
// way). Every test case's result is written to bin/node-e2e/<pair>.txt;
// ours must fail none and pass every case the community pair passes.
func TestKubernetesStorageE2E(t *testing.T) {
	results := map[string]map[string]string{}
	for _, pair := range []string{"snapkeeper", "community"} {
		t.Run(pair, func(t *testing.T) {
			var sidecar snapshotter
			if pair == "snapkeeper" {
				tag := ourImage(t)
				installChart(t, framework.ChartDir(), tag)
				sidecar = ourSnapshotter(tag)
			} else {
				installCommunity(t)
				sidecar = communitySnapshotter()
			}
			deployDriver(t, sidecar)
			results[pair] = runE2E(t, pair)
		})
	}
	ours, theirs := results["snapkeeper"], results["community"]
	if ours == nil || theirs == nil {
		return
	}
	for name, state := range theirs {
		if state == "passed" && ours[name] != "passed" {
			t.Errorf("passes with the community pair, %s with snapkeeper: %s", ours[name], name)
		}
	}
}

// runE2E runs bin/e2e.test with the driver definition and returns each
// test case's state (passed, failed, skipped, ...).
func runE2E(t *testing.T, pair string) map[string]string {
	t.Helper()
	bin, err := framework.Tool("e2e.test")
	if err != nil {
		t.Fatal(err)
	}
	kubectl, err := framework.Tool("kubectl")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 55*time.Minute)
	defer cancel()
	for _, img := range []string{"e2e-busybox.tar", "e2e-pause.tar"} {
		if err := node.ImportImage(ctx, img); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(env.Dir, "e2e-"+pair)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var def bytes.Buffer
	if err := e2eDriver.Execute(&def, map[string]string{"Driver": driverName}); err != nil {
		t.Fatal(err)
	}
	driverFile, report := filepath.Join(dir, "driver.yaml"), filepath.Join(dir, "report.json")
	if err := os.WriteFile(driverFile, def.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	focus := e2eFocus
	if f := os.Getenv("SNAPKEEPER_E2E_FOCUS"); f != "" {
		focus = f
	}
	args := []string{
		"-kubeconfig=" + env.Kubeconfig, "-kubectl-path=" + kubectl, "-storage.testdriver=" + driverFile,
		"-ginkgo.focus=" + focus, "-ginkgo.json-report=" + report, "-ginkgo.no-color", "-ginkgo.timeout=50m",
		"-report-dir=" + dir,
	}
	logFile, err := os.Create(filepath.Join(dir, "e2e.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	start := time.Now()
	runErr := cmd.Run()
	wall := time.Since(start).Round(time.Second)
	states, summary, err := readReport(report)
	if err != nil {
		t.Fatalf("e2e.test (%v): %v; log in %s", runErr, err, logFile.Name())
	}
	cmdline := "e2e.test " + strings.Join(args, " ")
	text := fmt.Sprintf("%s pair, %s, %v\n%s\n%s", pair, summary, wall, cmdline, formatStates(states))
	t.Log(text)
	out := filepath.Join(framework.RepoRoot(), "bin", "node-e2e")
	if err := os.MkdirAll(out, 0o755); err == nil {
		_ = os.WriteFile(filepath.Join(out, pair+".txt"), []byte(text), 0o644)
	}
	if pair == "snapkeeper" {
		for name, s := range states {
			if s != "passed" && !strings.HasPrefix(s, "skipped") {
				t.Errorf("%s: %s (log in %s)", s, name, logFile.Name())
			}
		}
		if !strings.Contains(summary, "passed") || runErr != nil && len(states) == 0 {
			t.Errorf("e2e.test: %v, %s", runErr, summary)
		}
	}
	return states
}

// readReport reads ginkgo's JSON report: the full name and state of each
// spec the focus selected, and a one-line count.
func readReport(file string) (map[string]string, string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, "", err
	}
	var reports []struct {
		SpecReports []struct {
			ContainerHierarchyTexts []string
			LeafNodeText            string
			LeafNodeType            string
			State                   string
			Failure                 struct{ Message string }
		}
	}
	if err := json.Unmarshal(b, &reports); err != nil {
		return nil, "", err
	}
	states := map[string]string{}
	count := map[string]int{}
	for _, r := range reports {
		for _, s := range r.SpecReports {
			// Specs outside the focus are reported skipped with no
			// message; those the suite skips at run time say why.
			if s.LeafNodeType != "It" || (s.State == "skipped" && s.Failure.Message == "") {
				continue
			}
			name := strings.Join(append(append([]string{}, s.ContainerHierarchyTexts...), s.LeafNodeText), " ")
			states[name] = s.State
			if s.State == "skipped" {
				// The suite's reason, first line: an unsupported pattern
				// or capability of the driver.
				reason, _, _ := strings.Cut(strings.TrimSpace(s.Failure.Message), "\n")
				states[name] += " (" + reason + ")"
			}
			count[s.State]++
		}
	}
	ran := len(states) - count["skipped"] - count["pending"]
	return states, fmt.Sprintf("ran %d: passed %d, failed %d, skipped %d (of %d specs)",
		ran, count["passed"], ran-count["passed"], count["skipped"], len(states)), nil
}

func formatStates(states map[string]string) string {
	names := make([]string, 0, len(states))
	for n := range states {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "%-8s %s\n", states[n], n)
	}
	return b.String()
}
