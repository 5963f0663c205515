package doctor

import (
	"time"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/snapkeeper/snapkeeper/pkg/scheduleview"
	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/validation"
)

// world indexes an Input by the keys the checks look objects up by.
type world struct {
	in            Input
	snapshots     map[string]*snapv1.VolumeSnapshot // ns/name
	contents      map[string]*snapv1.VolumeSnapshotContent
	classes       map[string]*snapv1.VolumeSnapshotClass
	groupClasses  map[string]*groupv1.VolumeGroupSnapshotClass
	groupContents map[string]*groupv1.VolumeGroupSnapshotContent
	pvcs          map[string]*corev1.PersistentVolumeClaim // ns/name
	pvs           map[string]*corev1.PersistentVolume
	// freshUntil: driver lease key -> the latest time a CSI side Lease of
	// the driver counts as alive.
	freshUntil map[string]time.Time
	// static is the objects as pkg/validation looks them up, for the
	// schedules' class rules; built on first use.
	static *validation.StaticLookup
	// restoring reports a snapshot an unbound claim restores from, as
	// the schedule component's retention sees it.
	restoring func(namespace, name string) bool
}

func key(ns, name string) string { return ns + "/" + name }

func newWorld(in Input) *world {
	if in.Now.IsZero() {
		in.Now = time.Now()
	}
	w := &world{in: in, snapshots: map[string]*snapv1.VolumeSnapshot{}, contents: map[string]*snapv1.VolumeSnapshotContent{},
		classes: map[string]*snapv1.VolumeSnapshotClass{}, groupClasses: map[string]*groupv1.VolumeGroupSnapshotClass{},
		groupContents: map[string]*groupv1.VolumeGroupSnapshotContent{}, pvcs: map[string]*corev1.PersistentVolumeClaim{},
		pvs: map[string]*corev1.PersistentVolume{}, freshUntil: map[string]time.Time{},
		restoring: scheduleview.Restoring(in.PVCs)}
	for i := range in.Snapshots {
		vs := &in.Snapshots[i]
		w.snapshots[key(vs.Namespace, vs.Name)] = vs
	}
	for i := range in.Contents {
		w.contents[in.Contents[i].Name] = &in.Contents[i]
	}
	for i := range in.Classes {
		w.classes[in.Classes[i].Name] = &in.Classes[i]
	}
	for i := range in.GroupClasses {
		w.groupClasses[in.GroupClasses[i].Name] = &in.GroupClasses[i]
	}
	for i := range in.GroupContents {
		w.groupContents[in.GroupContents[i].Name] = &in.GroupContents[i]
	}
	for i := range in.PVCs {
		w.pvcs[key(in.PVCs[i].Namespace, in.PVCs[i].Name)] = &in.PVCs[i]
	}
	for i := range in.PVs {
		w.pvs[in.PVs[i].Name] = &in.PVs[i]
	}
	for i := range in.Leases {
		l := &in.Leases[i]
		k, ok := snapshot.LeaseDriverKey(l)
		if !ok {
			continue
		}
		if t, ok := snapshot.LeaseFreshUntil(l); ok && t.After(w.freshUntil[k]) {
			w.freshUntil[k] = t
		}
	}
	return w
}

// lookup is the doctor's objects as a validation.Lookup.
func (w *world) lookup() *validation.StaticLookup {
	if w.static == nil {
		w.static = &validation.StaticLookup{Classes: ptrs(w.in.Classes), GroupClasses: ptrs(w.in.GroupClasses),
			PVCs: ptrs(w.in.PVCs), PVs: ptrs(w.in.PVs)}
	}
	return w.static
}

func ptrs[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}

// csiSideDown reports whether no CSI side holds a fresh Lease for driver;
// false when the Leases are unknown.
func (w *world) csiSideDown(driver string) bool {
	if !w.in.LeasesKnown || driver == "" {
		return false
	}
	return !w.in.Now.Before(w.freshUntil[snapshot.DriverLeaseKey(driver)])
}

// defaultClasses are the default VolumeSnapshotClasses of driver.
func (w *world) defaultClasses(driver string) []string {
	var out []string
	for _, c := range w.in.Classes {
		if c.Driver == driver && snapshot.IsDefaultClass(c.Annotations) {
			out = append(out, c.Name)
		}
	}
	return out
}

// lastWarning is the message of the newest Warning event of an object.
func (w *world) lastWarning(kind, ns, name string) string {
	var msg string
	var at time.Time
	for _, e := range w.in.Events {
		o := e.InvolvedObject
		if e.Type != corev1.EventTypeWarning || o.Kind != kind || o.Namespace != ns || o.Name != name {
			continue
		}
		t := e.LastTimestamp.Time
		if t.IsZero() {
			t = e.EventTime.Time
		}
		if msg == "" || t.After(at) {
			msg, at = e.Reason+": "+e.Message, t
		}
	}
	return msg
}

// restoringClaims are the claims of ns that restore from snapshot name and
// are not bound yet.
func (w *world) restoringClaims(ns, name string) []string {
	var out []string
	for _, pvc := range w.in.PVCs {
		if pvc.Namespace != ns || pvc.Status.Phase == corev1.ClaimBound {
			continue
		}
		if restoresFrom(&pvc, name) {
			out = append(out, pvc.Name)
		}
	}
	return out
}

func restoresFrom(pvc *corev1.PersistentVolumeClaim, name string) bool {
	if ds := pvc.Spec.DataSource; ds != nil && ds.Kind == snapshot.KindSnapshot && ds.Name == name &&
		ds.APIGroup != nil && *ds.APIGroup == snapshot.GroupName {
		return true
	}
	ref := pvc.Spec.DataSourceRef
	return ref != nil && ref.Kind == snapshot.KindSnapshot && ref.Name == name && ref.APIGroup != nil &&
		*ref.APIGroup == snapshot.GroupName && (ref.Namespace == nil || *ref.Namespace == pvc.Namespace)
}

func errorOf(st *snapv1.VolumeSnapshotStatus) string {
	if st == nil || st.Error == nil || st.Error.Message == nil {
		return ""
	}
	return *st.Error.Message
}

func contentErrorOf(st *snapv1.VolumeSnapshotContentStatus) string {
	if st == nil || st.Error == nil || st.Error.Message == nil {
		return ""
	}
	return *st.Error.Message
}

func ready(b *bool) bool { return b != nil && *b }
