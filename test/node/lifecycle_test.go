package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// loadSnapshots is how many snapshots the lifecycle test keeps in flight.
const loadSnapshots = 200

// disturbance is what happens to the installation while a batch of
// snapshots is applied.
type disturbance struct {
	what string
	do   func(ctx context.Context) error
}

// TestLifecycleUnderLoad applies 200 snapshots of a claim with data in
// four batches with kubectl while the installation is disturbed as a
// cluster disturbs it: a webhook pod deleted (failurePolicy as shipped),
// the binder's leader pod deleted, the node's kubelet restarted.
func TestLifecycleUnderLoad(t *testing.T) {
	tag := ourImage(t)
	installChart(t, framework.ChartDir(), tag)
	podsReady(t)
	dataDir := deployDriver(t, ourSnapshotter(tag))
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	underLoad(t, ctx, dataDir, []disturbance{
		{"a webhook pod deleted", func(ctx context.Context) error {
			return deletePod(ctx, t, "app.kubernetes.io/component=webhook", false)
		}},
		{"the binder's leader pod deleted", func(ctx context.Context) error { return deletePod(ctx, t, "", true) }},
		{"the kubelet restarted", node.RestartKubelet},
		{"nothing", func(context.Context) error { return nil }},
	})
}

// TestUpgradeUnderLoad installs the previous release (hack/previous-release:
// its chart and its image, `make node-images`) as its users did, then
// applies 200 snapshots in four batches while the installation is
// upgraded to this tree with helm upgrade, the binder's leader container
// is OOM-killed by its memory limit, and helm rollback returns to the
// previous release. The CSI side in the driver's pod is this tree's
// throughout.
func TestUpgradeUnderLoad(t *testing.T) {
	tag := ourImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	previous, err := importImage(ctx, "previous")
	if err != nil {
		t.Fatal(err)
	}
	previousChart, err := framework.Tool("node-images/previous/src/charts/snapkeeper")
	if err != nil {
		t.Fatal(err)
	}
	installChart(t, previousChart, previous)
	h := framework.NewHelm(t, env.Kubeconfig)
	helm := func(ctx context.Context, args ...string) error {
		start := time.Now()
		out, err := h.Run(ctx, append(args, "--namespace", namespace, "--wait", "--timeout", "5m")...)
		if err != nil {
			return fmt.Errorf("helm %s: %v\n%s\n%s", args[0], err, out, podReport(t))
		}
		t.Logf("helm %s --wait: %v", args[0], time.Since(start).Round(time.Millisecond))
		return nil
	}
	podsReady(t)
	t.Logf("the previous release %s installed", previous)
	dataDir := deployDriver(t, ourSnapshotter(tag))
	underLoad(t, ctx, dataDir, []disturbance{
		{"nothing (the previous release serving)", func(context.Context) error { return nil }},
		{"helm upgrade to this tree", func(ctx context.Context) error {
			return helm(ctx, "upgrade", release, framework.ChartDir(), "--set", "image.tag="+tag)
		}},
		{"the binder's leader container OOM-killed", func(ctx context.Context) error { return oomKillLeader(ctx, t) }},
		{"helm rollback to the previous release", func(ctx context.Context) error { return helm(ctx, "rollback", release, "1") }},
	})
	pods, err := env.Kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + release})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		for _, c := range p.Spec.Containers {
			if !strings.HasSuffix(c.Image, ":"+previous) {
				t.Errorf("after the rollback pod %s runs %s, not the previous release's image", p.Name, c.Image)
			}
		}
	}
}

// underLoad applies loadSnapshots snapshots of a claim with data, in one
// batch per disturbance, each batch applied while its disturbance runs.
// At the end every snapshot is ready and bound to a content whose backend
// snapshot exists, one backend snapshot per content; deleting them all
// leaves the backend empty.
func underLoad(t *testing.T, ctx context.Context, dataDir string, steps []disturbance) {
	t.Helper()
	ns := env.Namespace(t)
	claim(t, ctx, ns, "data", nil)
	podWithClaim(t, ctx, ns, "writer", "data", []string{"/podtool", "write", "/data/file", "load"})
	start := time.Now()
	per := loadSnapshots / len(steps)
	retries := 0
	for b, d := range steps {
		disturbed := make(chan error, 1)
		go func() { disturbed <- d.do(ctx) }()
		var manifest strings.Builder
		for i := b * per; i < (b+1)*per; i++ {
			fmt.Fprintf(&manifest, "apiVersion: snapshot.storage.k8s.io/v1\nkind: VolumeSnapshot\nmetadata:\n  name: load-%03d\n  namespace: %s\nspec:\n  volumeSnapshotClassName: node-csi\n  source:\n    persistentVolumeClaimName: data\n---\n", i, ns)
		}
		// A request that reached a webhook pod on its way out is refused
		// (failurePolicy Fail); kubectl apply again is what a user or a
		// GitOps tool does, and it must then go through.
		var stderr string
		var err error
		for attempt := 0; attempt < 10; attempt++ {
			_, stderr, err = env.Kubectl(ctx, strings.NewReader(manifest.String()), "apply", "-f", "-")
			if err == nil {
				break
			}
			retries++
			t.Logf("batch %d (%s): kubectl apply failed, again: %s", b, d.what, firstLine(stderr))
			time.Sleep(2 * time.Second)
		}
		if err != nil {
			t.Fatalf("batch %d (%s): kubectl apply: %v\n%s", b, d.what, err, stderr)
		}
		if err := <-disturbed; err != nil {
			t.Fatalf("batch %d: %s: %v", b, d.what, err)
		}
		t.Logf("batch %d of %d snapshots applied during %s, %v after the first", b, per, d.what, time.Since(start).Round(time.Second))
	}

	var handles map[string]bool
	err := framework.Poll(5*time.Minute, fmt.Sprintf("%d snapshots ready", loadSnapshots), func() (bool, error) {
		list, err := env.Snap.SnapshotV1().VolumeSnapshots(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		handles = map[string]bool{}
		ready := 0
		for _, vs := range list.Items {
			if readySnapshot(&vs) {
				ready++
			}
		}
		if ready < loadSnapshots {
			return false, fmt.Errorf("%d of %d ready", ready, loadSnapshots)
		}
		contents, err := env.Snap.SnapshotV1().VolumeSnapshotContents().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range contents.Items {
			if c.Spec.VolumeSnapshotRef.Namespace == ns && c.Status != nil && c.Status.SnapshotHandle != nil {
				handles[*c.Status.SnapshotHandle] = true
			}
		}
		return len(handles) == loadSnapshots, fmt.Errorf("%d contents with a handle", len(handles))
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, driverLogs(t))
	}
	t.Logf("%d snapshots ready and bound %v after the first batch (%d kubectl apply retries)", loadSnapshots, time.Since(start).Round(time.Second), retries)
	backend := entries(filepath.Join(dataDir, "snapshots"))
	if len(backend) != loadSnapshots {
		t.Errorf("the backend holds %d snapshots for %d contents", len(backend), loadSnapshots)
	}
	for h := range handles {
		if _, err := os.Stat(filepath.Join(dataDir, "snapshots", h)); err != nil {
			t.Errorf("content handle %s has no backend snapshot: %v", h, err)
		}
	}

	start = time.Now()
	if _, stderr, err := env.Kubectl(ctx, nil, "delete", "volumesnapshots", "--all", "-n", ns, "--wait=false"); err != nil {
		t.Fatalf("delete the snapshots: %v\n%s", err, stderr)
	}
	err = framework.Poll(5*time.Minute, "every snapshot, content and backend snapshot deleted", func() (bool, error) {
		snaps, err := env.Snap.SnapshotV1().VolumeSnapshots(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		contents, err := env.Snap.SnapshotV1().VolumeSnapshotContents().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		left := entries(filepath.Join(dataDir, "snapshots"))
		return len(snaps.Items)+len(contents.Items)+len(left) == 0,
			fmt.Errorf("%d snapshots, %d contents, %d backend snapshots left", len(snaps.Items), len(contents.Items), len(left))
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, driverLogs(t))
	}
	t.Logf("every snapshot, content and backend snapshot gone %v after the delete", time.Since(start).Round(time.Second))
}

// oomKillLeader has the kernel OOM-kill the binder's leader container
// (framework Node.OOMKill) and waits until the kubelet has restarted it
// with OOMKilled as the reason and it is Ready again.
func oomKillLeader(ctx context.Context, t *testing.T) error {
	name, err := leaderPod(ctx, time.Minute)
	if err != nil {
		return err
	}
	pod, err := env.Kube.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	var before corev1.ContainerStatus
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == "controller" {
			before = cs
		}
	}
	if before.ContainerID == "" {
		return fmt.Errorf("pod %s has no running controller container", name)
	}
	limit, err := node.OOMKill(ctx, before.ContainerID)
	if err != nil {
		return err
	}
	var reason string
	err = framework.Poll(3*time.Minute, "the OOM-killed container restarted and Ready", func() (bool, error) {
		pod, err := env.Kube.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cs := range pod.Status.ContainerStatuses {
			if cs.Name == "controller" && cs.RestartCount > before.RestartCount && cs.LastTerminationState.Terminated != nil {
				reason = cs.LastTerminationState.Terminated.Reason
				return cs.Ready, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return err
	}
	if reason != "OOMKilled" {
		return fmt.Errorf("pod %s's controller container ended with reason %q, not OOMKilled", name, reason)
	}
	t.Logf("pod %s: container controller OOM-killed at its %d MiB limit, restarted by the kubelet (reason %s) and Ready", name, limit>>20, reason)
	return nil
}

func readySnapshot(vs *snapv1.VolumeSnapshot) bool {
	return vs.Status != nil && vs.Status.ReadyToUse != nil && *vs.Status.ReadyToUse && vs.Status.BoundVolumeSnapshotContentName != nil
}

// deletePod deletes a pod of the release: the binder's Lease holder when
// leader, else the first pod matching selector.
func deletePod(ctx context.Context, t *testing.T, selector string, leader bool) error {
	name := ""
	if leader {
		var err error
		if name, err = leaderPod(ctx, time.Minute); err != nil {
			return err
		}
	} else {
		pods, err := env.Kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil || len(pods.Items) == 0 {
			return fmt.Errorf("no pod %s: %v", selector, err)
		}
		name = pods.Items[0].Name
	}
	if err := env.Kube.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return err
	}
	t.Logf("deleted pod %s", name)
	return nil
}

// leaderPod is the running pod of the release that holds the binder's
// Lease; after a rollout the Lease may still name a pod that is gone, until
// a new one takes it.
func leaderPod(ctx context.Context, timeout time.Duration) (string, error) {
	name := ""
	err := framework.Poll(timeout, "the binder's Lease held by a running pod", func() (bool, error) {
		lease, err := env.Kube.CoordinationV1().Leases(namespace).Get(ctx, "snapshot-controller-leader", metav1.GetOptions{})
		if err != nil || lease.Spec.HolderIdentity == nil {
			return false, err
		}
		name, _, _ = strings.Cut(*lease.Spec.HolderIdentity, "_")
		pod, err := env.Kube.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && pod.DeletionTimestamp == nil && pod.Status.Phase == corev1.PodRunning, err
	})
	return name, err
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return l
}
