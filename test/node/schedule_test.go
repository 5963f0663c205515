package node

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/pkg/schedule"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

// TestScheduleThroughPods: the chart's controller pods (Pod Security
// restricted, the schedule component on by default) run a SnapshotSchedule
// applied with kubectl: every minute, keepLast 1, over a claim a pod wrote
// to. After two runs the claim keeps one ready scheduled snapshot, the
// older one is gone down to the driver's data, and a claim restored from
// the kept one reads what the pod wrote.
func TestScheduleThroughPods(t *testing.T) {
	tag := ourImage(t)
	installChart(t, framework.ChartDir(), tag)
	dataDir := deployDriver(t, ourSnapshotter(tag))
	ns := env.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	text := writeThroughPod(t, ctx, ns, "data", map[string]string{"backup": "minutely"})
	applySchedule(t, ctx, ns, "minutely", "backup: minutely")
	start := time.Now()
	seen := map[string]bool{}
	var kept snapv1.VolumeSnapshot
	err := framework.Poll(4*time.Minute, "two runs, one ready snapshot kept", func() (bool, error) {
		list, err := env.Snap.SnapshotV1().VolumeSnapshots(ns).List(ctx, metav1.ListOptions{LabelSelector: schedule.LabelSchedule + "=minutely"})
		if err != nil {
			return false, err
		}
		for _, vs := range list.Items {
			seen[vs.Name] = true
		}
		if len(seen) < 2 || len(list.Items) != 1 || !readySnapshot(&list.Items[0]) {
			return false, fmt.Errorf("seen %d, now %d", len(seen), len(list.Items))
		}
		kept = list.Items[0]
		return true, nil
	})
	if err != nil {
		out, _, _ := env.Kubectl(ctx, nil, "describe", "snapshotschedule", "-n", ns, "minutely")
		t.Fatalf("%v\n%s\n%s", err, out, podReport(t))
	}
	t.Logf("scheduled snapshots %v; %s kept, %v after the schedule was applied", keys(seen), kept.Name, time.Since(start).Round(time.Second))
	err = framework.Poll(2*time.Minute, "one backend snapshot", func() (bool, error) {
		left := entries(filepath.Join(dataDir, "snapshots"))
		return len(left) == 1, fmt.Errorf("backend snapshots %v", left)
	})
	if err != nil {
		t.Error(err)
	}

	claim(t, ctx, ns, "restored", &corev1.TypedLocalObjectReference{APIGroup: ptrTo(snapv1.GroupName), Kind: "VolumeSnapshot", Name: kept.Name})
	podWithClaim(t, ctx, ns, "reader", "restored", []string{"/podtool", "serve"})
	got, stderr, err := env.Kubectl(ctx, nil, "exec", "-n", ns, "reader", "--", "/podtool", "cat", "/data/file")
	if err != nil {
		t.Fatalf("read the restored data: %v\n%s", err, stderr)
	}
	if got != text {
		t.Errorf("restored claim holds %q, want %q", got, text)
	}
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// applySchedule applies with kubectl a SnapshotSchedule name that cuts a
// snapshot of class node-csi of every claim labelled selector ("key:
// value") each minute and keeps the last one.
func applySchedule(t *testing.T, ctx context.Context, ns, name, selector string) {
	t.Helper()
	manifest := fmt.Sprintf(`apiVersion: snapkeeper.io/v1alpha1
kind: SnapshotSchedule
metadata:
  name: %s
  namespace: %s
spec:
  schedule: "* * * * *"
  claimSelector:
    matchLabels:
      %s
  snapshotTemplate:
    volumeSnapshotClassName: node-csi
  retention:
    keepLast: 1
`, name, ns, selector)
	if _, stderr, err := env.Kubectl(ctx, strings.NewReader(manifest), "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply the schedule: %v\n%s", err, stderr)
	}
}
