package node

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// TestSidecarImageSwapCutsGroups is what a driver chart does to adopt our
// image: its pod runs the community csi-snapshotter
// (framework.CommunityVersion) next to the community snapshot-controller,
// both with their deploy manifests' arguments and no --feature-gates (group
// snapshots are on by default since v8.7.0), and a VolumeGroupSnapshot is
// cut and deleted; then only the sidecar's image is replaced by ours,
// arguments unchanged, and a VolumeGroupSnapshot is cut and deleted by our
// CSI side. Each phase has claims of its own: the image change restarts the
// whole pod, and the mock driver starts with an empty data directory (a
// real driver keeps its volumes), so the first phase's volumes are gone.
func TestSidecarImageSwapCutsGroups(t *testing.T) {
	tag := ourImage(t)
	installCommunity(t)
	dataDir := deployDriver(t, communitySnapshotter())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	groupClass := &groupv1.VolumeGroupSnapshotClass{ObjectMeta: metav1.ObjectMeta{Name: "node-csi-group"},
		Driver: driverName, DeletionPolicy: snapv1.VolumeSnapshotContentDelete}
	if _, err := env.Snap.GroupsnapshotV1().VolumeGroupSnapshotClasses().Create(ctx, groupClass, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Snap.GroupsnapshotV1().VolumeGroupSnapshotClasses().Delete(context.Background(), groupClass.Name, metav1.DeleteOptions{})
	})
	ns := env.Namespace(t)

	groupPhase(t, ctx, ns, "before-swap", groupClass.Name, dataDir)

	// The swap: the sidecar's image only, as `kubectl set image` does.
	ours := ourSnapshotter(tag).Image
	if _, stderr, err := env.Kubectl(ctx, nil, "set", "image", "-n", "csi-driver", "daemonset/csi-driver", "csi-snapshotter="+ours); err != nil {
		t.Fatalf("set image: %v\n%s", err, stderr)
	}
	if _, stderr, err := env.Kubectl(ctx, nil, "rollout", "status", "-n", "csi-driver", "daemonset/csi-driver", "--timeout=3m"); err != nil {
		t.Fatalf("rollout: %v\n%s\n%s", err, stderr, driverLogs(t))
	}
	ds, err := env.Kube.AppsV1().DaemonSets("csi-driver").Get(ctx, "csi-driver", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range ds.Spec.Template.Spec.Containers {
		if c.Name != "csi-snapshotter" {
			continue
		}
		if c.Image != ours || !slices.Equal(c.Args, sidecarArgs) || slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--feature-gates") }) {
			t.Fatalf("sidecar after the swap: image %s args %q, want %s with %q", c.Image, c.Args, ours, sidecarArgs)
		}
	}
	// Registered again with the kubelet by the restarted driver container.
	err = framework.Poll(2*time.Minute, "our sidecar running", func() (bool, error) {
		logs, _, err := env.Kubectl(ctx, nil, "logs", "-n", "csi-driver", "daemonset/csi-driver", "-c", "csi-snapshotter")
		return err == nil && strings.Contains(logs, "Starting snapkeeper controller"), err
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, driverLogs(t))
	}

	groupPhase(t, ctx, ns, "after-swap", groupClass.Name, dataDir)
}

// groupPhase creates two claims labelled app=<name>, cuts VolumeGroupSnapshot
// name of them, waits until it is ready with a member per claim, deletes it
// and waits until no group content and no backend snapshot is left.
func groupPhase(t *testing.T, ctx context.Context, ns, name, class, dataDir string) {
	t.Helper()
	for i := range 2 {
		claimName := fmt.Sprintf("%s-%d", name, i)
		claim(t, ctx, ns, claimName, nil)
		env.LabelClaim(t, ns, claimName, map[string]string{"app": name})
	}
	start := time.Now()
	g := &groupv1.VolumeGroupSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: groupv1.VolumeGroupSnapshotSpec{VolumeGroupSnapshotClassName: &class,
			Source: groupv1.VolumeGroupSnapshotSource{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}}},
	}
	if _, err := env.Snap.GroupsnapshotV1().VolumeGroupSnapshots(ns).Create(ctx, g, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := framework.Poll(2*time.Minute, "group "+name+" ready", func() (bool, error) {
		got, err := env.Snap.GroupsnapshotV1().VolumeGroupSnapshots(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || got.Status == nil || got.Status.ReadyToUse == nil || !*got.Status.ReadyToUse {
			return false, err
		}
		members, err := env.Snap.SnapshotV1().VolumeSnapshots(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		n := 0
		for _, m := range members.Items {
			for _, o := range m.OwnerReferences {
				if o.Kind == "VolumeGroupSnapshot" && o.Name == name {
					n++
				}
			}
		}
		return n == 2, fmt.Errorf("%d members", n)
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, driverLogs(t))
	}
	t.Logf("group %s ready %v after create", name, time.Since(start).Round(time.Millisecond))
	if err := env.Snap.GroupsnapshotV1().VolumeGroupSnapshots(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = framework.Poll(2*time.Minute, "group "+name+" and its contents gone", func() (bool, error) {
		gs, err := env.Snap.GroupsnapshotV1().VolumeGroupSnapshotContents().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		left := entries(filepath.Join(dataDir, "snapshots"))
		return len(gs.Items) == 0 && len(left) == 0, fmt.Errorf("%d group contents, backend snapshots %v", len(gs.Items), left)
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, driverLogs(t))
	}
}
