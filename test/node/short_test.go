package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/pkg/schedule"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

// TestNodeShort is the node form `make test` runs (make test-node-short):
// what only a real node shows, once each, in a few minutes.
//   - The chart installed with helm (certificates auto) into a namespace
//     with Pod Security "restricted": every pod Ready by its probes, a
//     leader elected, examples/invalid/ denied by the webhook reached
//     through its Service.
//   - A driver pod with our image as its csi-snapshotter sidecar: data a
//     pod wrote is snapshotted, restored into a new claim and read back by
//     another pod.
//   - A SnapshotSchedule applied with kubectl cuts a ready snapshot of
//     that claim through the chart's schedule component (its own RBAC).
//   - Everything deleted leaves nothing on the driver; TestMain then tears
//     the node down and checks that the host holds nothing of it.
func TestNodeShort(t *testing.T) {
	tag := ourImage(t)
	start := time.Now()
	installChart(t, framework.ChartDir(), tag)
	t.Logf("helm install --wait: %v", time.Since(start).Round(time.Millisecond))
	podsReady(t)
	leaderElected(t, time.Minute)
	invalidExamplesRejected(t)

	dataDir := deployDriver(t, ourSnapshotter(tag))
	ns := env.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	text := writeThroughPod(t, ctx, ns, "data", map[string]string{"backup": "short"})
	applySchedule(t, ctx, ns, "short", "backup: short")
	scheduled := time.Now()
	// The schedule's first run is at the next minute: the snapshot and
	// restore below run meanwhile.
	snapshotAndRestore(t, ctx, ns, "data", dataDir, text)

	err := framework.Poll(3*time.Minute, "a ready scheduled snapshot and the schedule Ready", func() (bool, error) {
		list, err := env.Snap.SnapshotV1().VolumeSnapshots(ns).List(ctx, metav1.ListOptions{LabelSelector: schedule.LabelSchedule + "=short"})
		if err != nil {
			return false, err
		}
		readyOnes := 0
		for i := range list.Items {
			if readySnapshot(&list.Items[i]) {
				readyOnes++
			}
		}
		if readyOnes == 0 {
			return false, fmt.Errorf("%d scheduled snapshots, none ready", len(list.Items))
		}
		out, _, err := env.Kubectl(ctx, nil, "get", "snapshotschedule", "-n", ns, "short", "-o",
			`jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		if err != nil || out != "True" {
			return false, fmt.Errorf("schedule Ready %q (%v)", out, err)
		}
		return true, nil
	})
	if err != nil {
		out, _, _ := env.Kubectl(ctx, nil, "describe", "snapshotschedule", "-n", ns, "short")
		t.Fatalf("%v\n%s\n%s", err, out, podReport(t))
	}
	t.Logf("scheduled snapshot ready %v after the schedule was applied", time.Since(scheduled).Round(time.Second))

	if _, stderr, err := env.Kubectl(ctx, nil, "delete", "snapshotschedule", "-n", ns, "short"); err != nil {
		t.Fatalf("kubectl delete the schedule: %v\n%s", err, stderr)
	}
	removeAllThroughPods(t, ctx, ns, dataDir)
}
