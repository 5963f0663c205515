package controller

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

// With distributed snapshotting the binder labels each content with its
// volume's node, and only the CSI side deployed on that node cuts it.
func TestDistributedSnapshotting(t *testing.T) {
	s := newSetup(t, setupOpts{defaultClass: true, noController: true})
	ctx := context.Background()
	s.env.StartController(t, "--components=binder", "--enable-distributed-snapshotting")
	bin, err := framework.OwnBinary("./cmd/controller")
	if err != nil {
		t.Fatal(err)
	}
	startNode := func(node string) {
		p, err := framework.StartProcess(s.env.TempDir(t, "csi-"+node), "csi-"+node, bin,
			[]string{"--kubeconfig=" + s.env.Kubeconfig, "--csi-address=" + s.drv.Socket, "--node-deployment"},
			"NODE_NAME="+node)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Stop(5 * time.Second) })
	}
	startNode("node-b") // not the volume's node: must not touch the content

	s.env.CreateBoundPVC(t, s.ns, "data", framework.PVCOptions{Driver: s.drv.Name, Node: "node-a"})
	vs := s.snapshot(t, "snap", "data", nil)
	name := snapshot.ContentNameFor(vs.UID)
	framework.Eventually(t, 20*time.Second, "content labelled for node-a", func() (bool, error) {
		c, err := s.env.Snap.SnapshotV1().VolumeSnapshotContents().Get(ctx, name, metav1.GetOptions{})
		return err == nil && c.Labels[snapshot.LabelManagedBy] == "node-a", err
	})
	time.Sleep(2 * time.Second)
	if backend, _ := s.drv.Snapshots(ctx); len(backend) != 0 {
		t.Fatalf("the CSI side of node-b cut a snapshot of node-a's volume: %+v", backend)
	}
	startNode("node-a")
	s.waitReady(t, "snap", 30*time.Second)
	s.deleteSnapshot(t, "snap")
	s.waitContentGone(t, name)
	s.backendMatchesContents(t)
}
