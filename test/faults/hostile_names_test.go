package faults

import (
	"context"
	"fmt"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

// TestHostileNames takes a snapshot whose every name sits at its length
// limit: a VolumeSnapshot of 253 characters in a namespace of 63, of a
// claim of 253, in a class of 253, with --extra-create-metadata passing the
// names to the driver. Nothing we derive from them (the content's name, the
// CSI name, events, the distributed-snapshotting label) may overflow: the
// snapshot becomes ready, gets its events, and is deleted with nothing left.
// With distributed snapshotting, a volume on a Node whose name (253
// characters) cannot be a label value ends in a status error instead of a
// content the API server refuses on every retry.
func TestHostileNames(t *testing.T) {
	rng := newRand(t)
	s := framework.NewScenario(t, framework.ScenarioOptions{DriverPrefix: "hostile",
		ControllerArgs: []string{"--extra-create-metadata", "--enable-distributed-snapshotting"}})
	w := newWorld(s)
	ctx := context.Background()
	env := s.Env
	s.PVC(t, "good")
	if err := w.create(ctx, "good", "good"); err != nil {
		t.Fatal(err)
	}

	tag := fmt.Sprintf("%04x", rng.IntN(0xffff))
	ns := longName("hostile-"+tag+"-", 63)
	if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	class := longName("class-"+tag+"-", 253)
	env.CreateSnapshotClass(t, framework.SnapshotClass(class, s.Drv.Name, snapv1.VolumeSnapshotContentDelete, false))
	t.Cleanup(func() { _ = env.Snap.SnapshotV1().VolumeSnapshotClasses().Delete(ctx, class, metav1.DeleteOptions{}) })
	claim := longName("claim-", 253)
	boundClaim(t, s, ns, claim, "pv-hostile-"+tag, nil)
	name := longName("snap-", 253)
	vs := env.CreateSnapshot(t, framework.DynamicSnapshot(ns, name, claim, &class))
	contentName := snapshot.ContentNameFor(vs.UID)

	// Distributed snapshotting: a volume pinned to a Node of 253 characters.
	key := "hostile.snapkeeper.io/rack"
	node := longName("node-"+tag+"-", 253)
	if _, err := env.Kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node,
		Labels: map[string]string{key: "rack-" + tag}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Kube.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{}) })
	boundClaim(t, s, s.NS, "pinned", "pv-pinned-"+tag, &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
			Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{"rack-" + tag}}}}}}})
	s.Snapshot(t, "pinned", "pinned", &s.Class)

	start := time.Now()
	ready := env.WaitSnapshotReady(t, ns, name, time.Minute)
	t.Logf("snapshot of %d characters in a namespace of %d, claim of %d, class of %d: ready after %v (content %s, restoreSize %v)",
		len(name), len(ns), len(claim), len(class), time.Since(start).Round(time.Millisecond), contentName, ready.Status.RestoreSize)
	expectReadyEvent(t, env, ns, name)
	msg := expectSnapshotError(t, env, s.NS, "pinned", 30*time.Second, "cannot be the value of label "+snapshot.LabelManagedBy, "at most 63 characters")
	expectWarning(t, env, s.NS, "pinned", snapshot.ReasonSnapshotContentCreationFailed)
	t.Logf("pinned to a Node of %d characters: %q", len(node), msg)
	writes := expectSettled(t, env, time.Minute, objRef{ns, name}, objRef{"", contentName}, objRef{s.NS, "pinned"})
	t.Logf("settled: %s", settledSummary(writes))
	if got := s.Drv.CallLog(t, 0); !calledWithMetadata(got, name, ns) {
		t.Errorf("no CreateSnapshot carried the 253-character name as extra metadata")
	}

	s.DeleteSnapshot(t, "pinned")
	s.WaitSnapshotGone(t, "pinned")
	if err := env.Snap.SnapshotV1().VolumeSnapshots(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitSnapshotGone(t, ns, name, time.Minute)
	env.WaitContentGone(t, contentName, time.Minute)
	w.checkInvariants(t, time.Minute)
}

// expectReadyEvent waits for the SnapshotReady event of a snapshot whose
// name leaves no room for the recorder's usual "<name>.<hex>" event name.
func expectReadyEvent(t *testing.T, env *framework.Env, ns, name string) {
	t.Helper()
	framework.Eventually(t, 30*time.Second, "SnapshotReady event of "+shorten(name), func() (bool, error) {
		evs, err := env.Kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.InvolvedObject.Name == name && e.Reason == snapshot.ReasonSnapshotReady {
				t.Logf("event %q (%d characters) about it: %s", shorten(e.Name), len(e.Name), e.Reason)
				return true, nil
			}
		}
		return false, fmt.Errorf("%d events in the namespace", len(evs.Items))
	})
}

// calledWithMetadata reports whether a CreateSnapshot got the snapshot's
// name and namespace as extra metadata.
func calledWithMetadata(log framework.CallLog, name, ns string) bool {
	for _, e := range log.Entries {
		if e.Method == "CreateSnapshot" && e.Parameters[snapshot.MetaSnapshotName] == name && e.Parameters[snapshot.MetaSnapshotNamespace] == ns {
			return true
		}
	}
	return false
}
