package schedule

import (
	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/pkg/apis/snapkeeper/v1alpha1"
)

// itemOf is how retention sees one scheduled object.
func itemOf(m metav1.Object, ready, failed bool, created *metav1.Time, protected bool) Item {
	t, ok := ScheduledTime(m.GetAnnotations())
	if !ok {
		// An adopted snapshot: the driver's cut time, else creation.
		t = m.GetCreationTimestamp().Time
		if created != nil {
			t = created.Time
		}
	}
	return Item{
		Name:      m.GetName(),
		Time:      t,
		Ready:     ready,
		Failed:    failed,
		Protected: protected,
		Deleting:  m.GetDeletionTimestamp() != nil,
	}
}

// SnapshotItems are scheduled VolumeSnapshots as retention sees them;
// restoring reports whether a claim that is not bound yet restores from the
// snapshot namespace/name (nil: none does).
func SnapshotItems(list []*snapv1.VolumeSnapshot, restoring func(namespace, name string) bool) []Item {
	items := make([]Item, 0, len(list))
	for _, vs := range list {
		var ready, failed bool
		var created *metav1.Time
		if st := vs.Status; st != nil {
			ready = st.ReadyToUse != nil && *st.ReadyToUse
			failed = !ready && st.Error != nil
			created = st.CreationTime
		}
		protected := restoring != nil && restoring(vs.Namespace, vs.Name)
		items = append(items, itemOf(vs, ready, failed, created, protected))
	}
	return items
}

// GroupItems are scheduled VolumeGroupSnapshots as retention sees them. A
// group is never protected itself: claims restore from its members.
func GroupItems(list []*groupv1.VolumeGroupSnapshot) []Item {
	items := make([]Item, 0, len(list))
	for _, g := range list {
		var ready, failed bool
		var created *metav1.Time
		if st := g.Status; st != nil {
			ready = st.ReadyToUse != nil && *st.ReadyToUse
			failed = !ready && st.Error != nil
			created = st.CreationTime
		}
		items = append(items, itemOf(g, ready, failed, created, false))
	}
	return items
}

// RestoreSources are the "namespace/name" keys of the VolumeSnapshots a
// claim restores from while it is not bound yet (its dataSource or
// dataSourceRef, the latter possibly in another namespace): retention never
// deletes those. A bound claim has copied its data and holds none.
func RestoreSources(pvc *corev1.PersistentVolumeClaim) []string {
	if pvc.Status.Phase == corev1.ClaimBound {
		return nil
	}
	var keys []string
	if ds := pvc.Spec.DataSource; ds != nil && isSnapshotRef(ds.APIGroup, ds.Kind) {
		keys = append(keys, pvc.Namespace+"/"+ds.Name)
	}
	if ref := pvc.Spec.DataSourceRef; ref != nil && isSnapshotRef(ref.APIGroup, ref.Kind) {
		ns := pvc.Namespace
		if ref.Namespace != nil && *ref.Namespace != "" {
			ns = *ref.Namespace
		}
		keys = append(keys, ns+"/"+ref.Name)
	}
	return keys
}

func isSnapshotRef(group *string, kind string) bool {
	return group != nil && *group == snapv1.GroupName && kind == "VolumeSnapshot"
}

// RetentionRule is one rule a RetentionPolicy sets, as the spec names it.
type RetentionRule struct {
	Name string
	// Count is set for the count rules, MaxAge for maxAge.
	Count  int32
	MaxAge string
}

// RetentionRules are the rules r sets, in the spec's order.
func RetentionRules(r v1alpha1.RetentionPolicy) []RetentionRule {
	var out []RetentionRule
	for _, c := range []struct {
		name string
		n    *int32
	}{{"keepLast", r.KeepLast}, {"hourly", r.Hourly}, {"daily", r.Daily}, {"weekly", r.Weekly}, {"monthly", r.Monthly}, {"yearly", r.Yearly}} {
		if c.n != nil {
			out = append(out, RetentionRule{Name: c.name, Count: *c.n})
		}
	}
	if r.MaxAge != nil {
		out = append(out, RetentionRule{Name: "maxAge", MaxAge: *r.MaxAge})
	}
	return out
}
