package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/snapkeeper/snapkeeper/pkg/schedule"
	"github.com/snapkeeper/snapkeeper/pkg/snapscheduler"
)

// oldSchedule is a snapscheduler SnapshotSchedule of namespace shop.
func oldSchedule(name string, spec map[string]any) map[string]any {
	return map[string]any{"apiVersion": "snapscheduler.backube/v1", "kind": "SnapshotSchedule",
		"metadata": map[string]any{"name": name, "namespace": "shop"}, "spec": spec}
}

// oldSnapshot is a VolumeSnapshot snapscheduler cut for schedule of claim.
func oldSnapshot(name, schedule string, extra map[string]string) snapv1.VolumeSnapshot {
	labels := map[string]string{snapscheduler.LabelSchedule: schedule}
	for k, v := range extra {
		labels[k] = v
	}
	return snapv1.VolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", Labels: labels}}
}

// snapschedulerAPI serves namespace shop with the schedules hourly and
// forever (no retention) and the snapshots snapscheduler cut for them.
func snapschedulerAPI() *clusterAPI {
	return &clusterAPI{lists: map[string][]any{
		"/apis/snapscheduler.backube/v1/namespaces/shop/snapshotschedules": {
			oldSchedule("hourly", map[string]any{"schedule": "TZ=Europe/Berlin 0 * * * *", "claimSelector": map[string]any{}, "retention": map[string]any{"maxCount": 24}}),
			oldSchedule("forever", map[string]any{"schedule": "@daily", "claimSelector": map[string]any{}}),
		},
		"/apis/snapshot.storage.k8s.io/v1/namespaces/shop/volumesnapshots": {
			oldSnapshot("data-hourly-202601020900", "hourly", nil),
			oldSnapshot("data-hourly-202601021000", "hourly", map[string]string{schedule.LabelSchedule: "hourly"}),
			oldSnapshot("logs-hourly-202601021000", "hourly", map[string]string{schedule.LabelSchedule: "other"}),
			oldSnapshot("data-forever-202601020000", "forever", nil),
		},
	}}
}

func TestConvertFromTheClusterAndAdopt(t *testing.T) {
	for _, dryRun := range []bool{false, true} {
		api := snapschedulerAPI()
		args := []string{"convert-snapscheduler", "--adopt", "--kubeconfig", serve(t, api, "shop")}
		if dryRun {
			args = append(args, "--dry-run")
		}
		var out, errOut bytes.Buffer
		code := run("snapctl", args, &out, &errOut)
		// forever is refused: exit 1, and only hourly's snapshots are adopted.
		if code != 1 {
			t.Fatalf("dry run %v: exit %d, stderr %q", dryRun, code, errOut.String())
		}
		docs := strings.Split(out.String(), "\n---\n")
		// By namespace and name: forever, then hourly.
		if len(docs) != 3 || !strings.Contains(docs[2], "timeZone: Europe/Berlin") || !strings.Contains(docs[1], "# NOT converted: snapscheduler SnapshotSchedule shop/forever") {
			t.Errorf("output\n%s", out.String())
		}
		var converted map[string]any
		if err := yaml.Unmarshal([]byte(docs[2]), &converted); err != nil || converted["kind"] != "SnapshotSchedule" {
			t.Errorf("document %v, %v", converted, err)
		}
		verb, patches := "labelled", []string{`/apis/snapshot.storage.k8s.io/v1/namespaces/shop/volumesnapshots/data-hourly-202601020900 {"metadata":{"labels":{"snapkeeper.io/schedule":"hourly"}}}`}
		if dryRun {
			verb, patches = "would label", nil
		}
		for _, line := range []string{
			"snapctl convert-snapscheduler: shop/forever not converted: it has no retention",
			verb + " VolumeSnapshot shop/data-hourly-202601020900 snapkeeper.io/schedule=hourly\n",
			`skipped VolumeSnapshot shop/logs-hourly-202601021000: it belongs to snapkeeper schedule "other" already`,
			"adopt: " + verb + " 1 snapshots, 1 labelled already, 0 failed\n",
		} {
			if !strings.Contains(errOut.String(), line) {
				t.Errorf("dry run %v: stderr lacks %q:\n%s", dryRun, line, errOut.String())
			}
		}
		if !slices.Equal(api.patches, patches) {
			t.Errorf("dry run %v: patches %q, want %q", dryRun, api.patches, patches)
		}
		if !slices.Contains(api.gets, "/apis/snapshot.storage.k8s.io/v1/namespaces/shop/volumesnapshots?labelSelector=snapscheduler.backube%2Fschedule%3Dhourly") {
			t.Errorf("gets %q", api.gets)
		}
	}
}

func TestConvertFromStdinNeedsNoCluster(t *testing.T) {
	prev := stdin
	t.Cleanup(func() { stdin = prev })
	stdin = strings.NewReader(`apiVersion: snapscheduler.backube/v1
kind: SnapshotSchedule
metadata: {name: nightly}
spec:
  schedule: "30 2 * * *"
  disabled: true
  claimSelector: {matchLabels: {backup: nightly}}
  retention: {expires: 168h}
  snapshotTemplate: {labels: {team: shop}, snapshotClassName: csi-fast}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: other}
`)
	var out, errOut bytes.Buffer
	code := run("snapctl", []string{"convert-snapscheduler", "-n", "shop", "--kubeconfig", "/nonexistent", "-"}, &out, &errOut)
	if code != 0 || errOut.String() != "1 objects of other kinds ignored\n" {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
	want := `---
# From snapscheduler SnapshotSchedule shop/nightly.
# - disabled: true is suspend: true; retention still deletes while suspended
# - retention.expires 168h is maxAge 168h: it never deletes a claim's newest ready snapshot, however
#   old (snapscheduler deleted every expired one)
apiVersion: snapkeeper.io/v1alpha1
kind: SnapshotSchedule
metadata:
  name: nightly
  namespace: shop
spec:
  claimSelector:
    matchLabels:
      backup: nightly
  retention:
    maxAge: 168h
  schedule: 30 2 * * *
  snapshotTemplate:
    labels:
      team: shop
    volumeSnapshotClassName: csi-fast
  suspend: true
`
	if _, body, _ := strings.Cut(out.String(), "\n---\n"); "---\n"+body != want {
		t.Errorf("output\n%s\nwant after the header\n%s", out.String(), want)
	}
}

func TestConvertErrors(t *testing.T) {
	kubeconfig := serve(t, &clusterAPI{}, "shop")
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"--kubeconfig", kubeconfig}, 2, "the cluster does not serve snapscheduler.backube/v1 snapshotschedules (snapscheduler's CRD is not installed)"},
		{[]string{"-o", "json"}, 2, "-o must be yaml"},
		{[]string{"--dry-run", "f.yaml"}, 2, "--dry-run goes with --adopt"},
		{[]string{"-A", "f.yaml"}, 2, "-A reads the cluster"},
		{[]string{"-A", "-n", "x"}, 2, "-n and -A exclude each other"},
		{[]string{"missing.yaml"}, 2, "missing.yaml"},
	} {
		var out, errOut bytes.Buffer
		code := run("kubectl snapkeeper", append([]string{"convert-snapscheduler"}, c.args...), &out, &errOut)
		if code != c.code || !strings.Contains(errOut.String(), c.says) || strings.Contains(errOut.String(), "snapctl") {
			t.Errorf("%v: exit %d, stderr %q; want %d, %q", c.args, code, errOut.String(), c.code, c.says)
		}
	}
}
