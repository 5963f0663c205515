package groups

import (
	"context"
	"strings"
	"testing"
	"time"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

// TestGroupWebhook: the webhook, registered over TLS, refuses group
// manifests that could never work, each with the field, the rule and the
// fix, and accepts a group that can.
func TestGroupWebhook(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, framework.ScenarioOptions{})
	w.Env.StartWebhook(t)
	groups := w.Env.Snap.GroupsnapshotV1().VolumeGroupSnapshots(w.NS)
	create := func(name string, sel *metav1.LabelSelector, class *string) error {
		_, err := groups.Create(ctx, &groupv1.VolumeGroupSnapshot{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.NS},
			Spec: groupv1.VolumeGroupSnapshotSpec{VolumeGroupSnapshotClassName: class,
				Source: groupv1.VolumeGroupSnapshotSource{Selector: sel}},
		}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	denied := func(what string, err error, want ...string) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s: accepted", what)
		}
		for _, s := range want {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: denial %q does not say %q", what, err, s)
			}
		}
	}
	app := func(v string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"app": v}}
	}

	w.pvc(t, "a", map[string]string{"app": "ok", "mixed": "yes"})
	w.pvc(t, "b", map[string]string{"app": "ok"})
	if err := create("ok", app("ok"), nil); err != nil {
		t.Fatalf("a group of two bound claims of one driver refused: %v", err)
	}

	// Claims of two drivers.
	other := framework.DriverName("other")
	w.Env.CreateBoundPVC(t, w.NS, "elsewhere", framework.PVCOptions{Driver: other})
	w.label(t, "elsewhere", map[string]string{"mixed": "yes"})
	denied("two drivers", create("mixed", &metav1.LabelSelector{MatchLabels: map[string]string{"mixed": "yes"}}, nil),
		"spec.source.selector", other, w.Drv.Name, "one driver")

	// An unbound claim.
	storageClass := ""
	pending := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "pending", Namespace: w.NS, Labels: map[string]string{"app": "unbound"}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &storageClass,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	framework.MustCreate(t, w.Env.Kube.CoreV1().PersistentVolumeClaims(w.NS).Create, pending)
	denied("unbound claim", create("unbound", app("unbound"), nil), "spec.source.selector", `"pending"`, "not bound")

	// A class of another driver than the claims'.
	otherClass := "other-" + w.NS
	if _, err := w.Env.Snap.GroupsnapshotV1().VolumeGroupSnapshotClasses().Create(ctx,
		framework.GroupSnapshotClass(otherClass, other, snapv1.VolumeSnapshotContentDelete, false), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	denied("class of another driver", create("wrong-class", app("ok"), &otherClass),
		"spec.volumeGroupSnapshotClassName", other, w.Drv.Name)

	// A second default group class for the driver.
	_, err := w.Env.Snap.GroupsnapshotV1().VolumeGroupSnapshotClasses().Create(ctx,
		framework.GroupSnapshotClass("second-default-"+w.NS, w.Drv.Name, snapv1.VolumeSnapshotContentDelete, true), metav1.CreateOptions{})
	denied("second default group class", err, snapshot.AnnGroupDefaultClass, w.GroupClass)

	// The source of a group is fixed.
	_, err = groups.Create(ctx, &groupv1.VolumeGroupSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: "fixed", Namespace: w.NS},
		Spec:       groupv1.VolumeGroupSnapshotSpec{Source: groupv1.VolumeGroupSnapshotSource{Selector: app("ok")}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.WaitGroupReady(t, "fixed", time.Minute)
	real := w.GetGroup(t, "fixed")
	real.Spec.Source.Selector = app("other")
	_, err = groups.Update(ctx, real, metav1.UpdateOptions{})
	denied("changed source", err, "spec.source") // the CRD or the webhook
	w.DeleteGroup(t, "fixed")
	w.WaitGroupGone(t, "fixed")
	w.NoLeak(t)
}

func (w *world) label(t *testing.T, claim string, labels map[string]string) {
	t.Helper()
	w.Env.LabelClaim(t, w.NS, claim, labels)
}
