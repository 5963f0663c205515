package schedule

import (
	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
