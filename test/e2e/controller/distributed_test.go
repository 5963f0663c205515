package controller

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

// With distributed snapshotting the binder labels each content with the
// Node that matches its volume's node affinity (here on a driver topology
// key, not kubernetes.io/hostname), and only the CSI side deployed on that
// node cuts it.
func TestDistributedSnapshotting(t *testing.T) {
	s := newWorld(t, framework.ScenarioOptions{DefaultClass: true, NoController: true})
	ctx := context.Background()
	const topologyKey = "topology.mock.example.com/node"
	for node, value := range map[string]string{"node-a": "a-rack", "node-b": "b-rack"} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: map[string]string{topologyKey: value}}}
		if _, err := s.Env.Kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	s.Env.StartController(t, "--components=binder", "--enable-distributed-snapshotting")
	bin, err := framework.OwnBinary("./cmd/controller")
	if err != nil {
		t.Fatal(err)
	}
	startNode := func(node string) {
		p, err := framework.StartProcess(s.Env.TempDir(t, "csi-"+node), "csi-"+node, bin,
			[]string{"--kubeconfig=" + s.Env.Kubeconfig, "--csi-address=" + s.Drv.Socket, "--node-deployment"},
			"NODE_NAME="+node)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Stop(5 * time.Second) })
	}
	startNode("node-b") // not the volume's node: must not touch the content

	s.Env.CreateBoundPVC(t, s.NS, "data", framework.PVCOptions{Driver: s.Drv.Name, Node: "a-rack", TopologyKey: topologyKey})
	vs := s.Snapshot(t, "snap", "data", nil)
	name := snapshot.ContentNameFor(vs.UID)
	framework.Eventually(t, 20*time.Second, "content labelled for node-a", func() (bool, error) {
		c, err := s.Env.Snap.SnapshotV1().VolumeSnapshotContents().Get(ctx, name, metav1.GetOptions{})
		return err == nil && c.Labels[snapshot.LabelManagedBy] == "node-a", err
	})
	// node-b's CSI side has the content's event by now; give it a moment
	// to (wrongly) act, then check the driver saw no CreateSnapshot.
	time.Sleep(2 * time.Second)
	for _, b := range s.Drv.Snapshots(t) {
		if !b.Builtin {
			t.Fatalf("the CSI side of node-b cut a snapshot of node-a's volume: %+v", b)
		}
	}
	startNode("node-a")
	s.WaitReady(t, "snap", 30*time.Second)
	s.DeleteSnapshot(t, "snap")
	s.WaitContentGone(t, name)
	s.BackendMatchesContents(t)
}
