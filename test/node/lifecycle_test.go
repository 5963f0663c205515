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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// loadSnapshots is how many snapshots the lifecycle test keeps in flight.
const loadSnapshots = 200

// TestLifecycleUnderLoad applies 200 snapshots of a claim with data in
// four batches with kubectl while the installation is disturbed as a
// cluster disturbs it: a webhook pod deleted just before a batch is
// applied (failurePolicy as shipped), the binder's leader pod deleted, the
// node's kubelet restarted. At the end
// every snapshot is ready and bound to a content whose backend snapshot
// exists, one backend snapshot per content; deleting them all leaves the
// backend empty.
func TestLifecycleUnderLoad(t *testing.T) {
	tag := ourImage(t)
	installChart(t, tag)
	podsReady(t)
	dataDir := deployDriver(t, ourSnapshotter(tag))
	ns := env.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	claim(t, ctx, ns, "data", nil)
	podWithClaim(t, ctx, ns, "writer", "data", []string{"/podtool", "write", "/data/file", "load"})

	disturb := []struct {
		what string
		do   func(t *testing.T)
	}{
		{"a webhook pod deleted", func(t *testing.T) { deletePod(t, ctx, "app.kubernetes.io/component=webhook", false) }},
		{"the binder's leader pod deleted", func(t *testing.T) { deletePod(t, ctx, "", true) }},
		{"the kubelet restarted", func(t *testing.T) {
			if err := node.RestartKubelet(ctx); err != nil {
				t.Fatal(err)
			}
		}},
		{"nothing", func(*testing.T) {}},
	}
	start := time.Now()
	per := loadSnapshots / len(disturb)
	retries := 0
	for b, d := range disturb {
		d.do(t)
		var manifest strings.Builder
		for i := b * per; i < (b+1)*per; i++ {
			fmt.Fprintf(&manifest, "apiVersion: snapshot.storage.k8s.io/v1\nkind: VolumeSnapshot\nmetadata:\n  name: load-%03d\n  namespace: %s\nspec:\n  volumeSnapshotClassName: node-csi\n  source:\n    persistentVolumeClaimName: data\n---\n", i, ns)
		}
		// A request that reached a webhook pod on its way out is refused
		// (failurePolicy Fail); kubectl apply again is what a user or a
		// GitOps tool does, and it must then go through.
		var stderr string
		var err error
		for attempt := 0; attempt < 5; attempt++ {
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
		t.Logf("batch %d of %d snapshots applied after %s", b, per, d.what)
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

func readySnapshot(vs *snapv1.VolumeSnapshot) bool {
	return vs.Status != nil && vs.Status.ReadyToUse != nil && *vs.Status.ReadyToUse && vs.Status.BoundVolumeSnapshotContentName != nil
}

// deletePod deletes a pod of the release: the binder's Lease holder when
// leader, else the first pod matching selector.
func deletePod(t *testing.T, ctx context.Context, selector string, leader bool) {
	t.Helper()
	name := ""
	if leader {
		lease, err := env.Kube.CoordinationV1().Leases(namespace).Get(ctx, "snapshot-controller-leader", metav1.GetOptions{})
		if err != nil || lease.Spec.HolderIdentity == nil {
			t.Fatalf("the binder's Lease: %v", err)
		}
		name, _, _ = strings.Cut(*lease.Spec.HolderIdentity, "_")
	} else {
		pods, err := env.Kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil || len(pods.Items) == 0 {
			t.Fatalf("no pod %s: %v", selector, err)
		}
		name = pods.Items[0].Name
	}
	if err := env.Kube.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("deleted pod %s", name)
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return l
}
