package startup

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// TestServesGroupsOnceTheirCRDsAppear starts the controller with group
// snapshots on (the default since v8.7.0: no --feature-gates) but only the
// snapshot CRDs installed: it runs without groups and says so in a warning,
// as the community binaries do; once the group CRDs are installed it exits
// with a message saying why (the community's binaries go on without groups
// until restarted by hand), and the restart (the kubelet's, here the
// test's) serves VolumeGroupSnapshots.
func TestServesGroupsOnceTheirCRDsAppear(t *testing.T) {
	env := bareControlPlane(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	snapOnly := t.TempDir()
	files, err := filepath.Glob(filepath.Join(framework.CRDDir(), "snapshot.storage.k8s.io_*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("snapshot CRDs: %v %v", files, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(snapOnly, filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := framework.InstallCRDs(ctx, env.Dynamic, snapOnly); err != nil {
		t.Fatal(err)
	}
	args := []string{"--components=binder", "--group-crd-check-interval=500ms"}
	p := startRaw(t, env, args...)
	framework.Eventually(t, 30*time.Second, "binder started without groups", func() (bool, error) {
		log := p.Tail(20000)
		return strings.Contains(log, "Binder started") && strings.Contains(log, "Checking for the volume group snapshot CRDs"), nil
	})
	if !warned(p.Tail(20000), "are not served: running without volume group snapshots") {
		t.Fatalf("the controller does not warn why groups are off:\n%s", p.Tail(20000))
	}

	if err := framework.InstallCRDs(ctx, env.Dynamic, framework.CRDDir()); err != nil {
		t.Fatal(err)
	}
	waitCtx, waitCancel := context.WithTimeout(ctx, 30*time.Second)
	defer waitCancel()
	if err := p.Wait(waitCtx); err == nil || waitCtx.Err() != nil {
		t.Fatalf("controller did not exit with an error once the group CRDs were served (err %v):\n%s", err, p.Tail(4000))
	}
	if log := p.Tail(4000); !strings.Contains(log, "are served now; exiting so that the restarted controller serves VolumeGroupSnapshots") {
		t.Fatalf("no clear exit message:\n%s", log)
	}

	// The restart serves groups: a group without a class gets a status
	// error from the binder.
	p = startRaw(t, env, args...)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "groups-later"}}
	framework.MustCreate(t, env.Kube.CoreV1().Namespaces().Create, ns)
	g := &groupv1.VolumeGroupSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: "g", Namespace: ns.Name},
		Spec: groupv1.VolumeGroupSnapshotSpec{Source: groupv1.VolumeGroupSnapshotSource{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}},
	}
	framework.MustCreate(t, env.Snap.GroupsnapshotV1().VolumeGroupSnapshots(ns.Name).Create, g)
	framework.Eventually(t, 30*time.Second, "the restarted binder handles the group", func() (bool, error) {
		got, err := env.Snap.GroupsnapshotV1().VolumeGroupSnapshots(ns.Name).Get(ctx, "g", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return got.Status != nil && got.Status.Error != nil && got.Status.Error.Message != nil, nil
	})
	if strings.Contains(p.Tail(20000), "CRDs are not served") {
		t.Fatalf("the restarted controller still runs without groups:\n%s", p.Tail(4000))
	}
}

// warned reports whether log has a warning line (klog's "W" severity)
// holding text.
func warned(log, text string) bool {
	for _, line := range strings.Split(log, "\n") {
		if strings.HasPrefix(line, "W") && strings.Contains(line, text) {
			return true
		}
	}
	return false
}
