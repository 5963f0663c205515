package framework

import (
	"context"
	"fmt"
	"sort"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/snapkeeper/snapkeeper/pkg/apis/snapkeeper/v1alpha1"
	"github.com/snapkeeper/snapkeeper/pkg/schedclient"
	"github.com/snapkeeper/snapkeeper/pkg/schedule"
)

// Schedules is a client of the plane's SnapshotSchedules.
func (e *Env) Schedules(t T) *schedclient.Client {
	t.Helper()
	c, err := schedclient.NewForConfig(e.Config)
	if err != nil {
		t.Fatalf("schedule client: %v", err)
	}
	return c
}

// EveryMinute is a schedule that fires every minute over the claims of ns
// labelled app=<app>.
func EveryMinute(ns, name, app string, retention v1alpha1.RetentionPolicy) *v1alpha1.SnapshotSchedule {
	return &v1alpha1.SnapshotSchedule{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.SnapshotScheduleSpec{
			Schedule:      "* * * * *",
			ClaimSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
			Retention:     retention,
		},
	}
}

// ProvisionLabelled provisions bound claims of p in ns, labelled app=<app>.
func (e *Env) ProvisionLabelled(t T, p *Provisioner, ns, app string, names ...string) {
	t.Helper()
	for _, name := range names {
		e.ProvisionPVC(t, p, ns, name, ClaimOptions{})
		patch := fmt.Sprintf(`{"metadata":{"labels":{"app":%q}}}`, app)
		if _, err := e.Kube.CoreV1().PersistentVolumeClaims(ns).Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatalf("label claim %s/%s: %v", ns, name, err)
		}
	}
}

// ScheduledSnapshots are the snapshots of ns that schedule name cut, by
// claim, each list in name order (which is time order for one claim).
func (e *Env) ScheduledSnapshots(t T, ns, name string) map[string][]snapv1.VolumeSnapshot {
	t.Helper()
	list, err := e.Snap.SnapshotV1().VolumeSnapshots(ns).List(context.Background(), metav1.ListOptions{LabelSelector: schedule.LabelSchedule + "=" + name})
	if err != nil {
		t.Fatalf("list the snapshots of schedule %s/%s: %v", ns, name, err)
	}
	out := map[string][]snapv1.VolumeSnapshot{}
	for _, vs := range list.Items {
		claim := ""
		if vs.Spec.Source.PersistentVolumeClaimName != nil {
			claim = *vs.Spec.Source.PersistentVolumeClaimName
		}
		out[claim] = append(out[claim], vs)
	}
	for _, l := range out {
		sort.Slice(l, func(i, j int) bool { return l[i].Name < l[j].Name })
	}
	return out
}

// SnapshotNames are the names of l.
func SnapshotNames(l []snapv1.VolumeSnapshot) []string {
	out := make([]string, 0, len(l))
	for _, vs := range l {
		out = append(out, vs.Name)
	}
	return out
}

// IsReady reports whether vs is ready to use.
func IsReady(vs *snapv1.VolumeSnapshot) bool {
	return vs.Status != nil && vs.Status.ReadyToUse != nil && *vs.Status.ReadyToUse
}
