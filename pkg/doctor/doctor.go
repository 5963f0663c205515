// Package doctor explains stuck snapshots: given the snapshot objects of a
// cluster, their claims, volumes, classes, CSI side Leases and events, it
// returns one Finding (object, reason, fix) for every VolumeSnapshot,
// VolumeSnapshotContent, VolumeGroupSnapshot and VolumeGroupSnapshotContent
// that is not ready or is stuck deleting, and one for each reason a
// SnapshotSchedule does not cut (schedule.go). It reads nothing itself:
// cmd/snapctl/doctor.go gathers the objects. docs/troubleshooting.md
// describes every situation it knows about snapshots, docs/snapctl.md
// those about schedules.
package doctor

import (
	"fmt"
	"sort"
	"time"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/snapkeeper/snapkeeper/pkg/apis/snapkeeper/v1alpha1"
)

// Situations: the Code of a Finding. Each has a section in
// docs/troubleshooting.md.
const (
	NoCSISide          = "no-csi-side"
	NoDefaultClass     = "no-default-class"
	TwoDefaultClasses  = "two-default-classes"
	ClassNotFound      = "class-not-found"
	PVCMissing         = "pvc-missing"
	PVCUnbound         = "pvc-unbound"
	VolumeNotCSI       = "volume-not-csi"
	ContentMisbound    = "content-misbound"
	ContentMissing     = "content-missing"
	DeletionHeld       = "deletion-held"
	SecretMissing      = "secret-missing"
	DriverError        = "driver-error"
	SnapshotError      = "snapshot-error"
	WaitingForCSISide  = "waiting"
	GroupClassNotFound = "group-class-not-found"
	GroupsNotServed    = "groups-not-served"
)

// The Codes of SnapshotSchedule findings; docs/snapctl.md ("snapctl doctor
// and schedules") describes each.
const (
	ScheduleInvalid     = "schedule-invalid"
	ScheduleSuspended   = "schedule-suspended"
	ScheduleClass       = "schedule-class"
	NoClaimsSelected    = "no-claims-selected"
	ClaimsUnbound       = "claims-unbound"
	ClaimsBehind        = "claims-behind"
	ClaimsFailing       = "claims-failing"
	MissedRuns          = "missed-runs"
	ScheduleNotReady    = "schedule-not-ready"
	SchedulesNotRunning = "schedules-not-running"
)

// Input is everything the analysis looks at. Secrets holds, by
// "namespace/name", whether a Secret some object names exists; a name
// absent from it is unknown and never reported. LeasesKnown is false when
// the Leases could not be read: nothing is then said about CSI sides.
type Input struct {
	Snapshots     []snapv1.VolumeSnapshot
	Contents      []snapv1.VolumeSnapshotContent
	Classes       []snapv1.VolumeSnapshotClass
	Groups        []groupv1.VolumeGroupSnapshot
	GroupContents []groupv1.VolumeGroupSnapshotContent
	GroupClasses  []groupv1.VolumeGroupSnapshotClass
	PVCs          []corev1.PersistentVolumeClaim
	PVs           []corev1.PersistentVolume
	Leases        []coordinationv1.Lease
	LeasesKnown   bool
	Events        []corev1.Event
	Secrets       map[string]bool
	// Schedules are snapkeeper.io SnapshotSchedules; the schedule
	// component's events (MissedRuns) come in Events.
	Schedules []v1alpha1.SnapshotSchedule
	Now       time.Time
}

// Finding is one stuck object: what it is, why it is stuck and what to do.
type Finding struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	Code      string `json:"code"`
	Reason    string `json:"reason"`
	Fix       string `json:"fix"`
	// scope is the namespace of the snapshot a content belongs to, for
	// Filter.
	scope string
}

// Object is "Kind namespace/name" (or "Kind name" for cluster objects).
func (f Finding) Object() string {
	if f.Namespace == "" {
		return f.Kind + " " + f.Name
	}
	return f.Kind + " " + f.Namespace + "/" + f.Name
}

// String is the finding's one line.
func (f Finding) String() string {
	return fmt.Sprintf("%s [%s] %s; fix: %s", f.Object(), f.Code, f.Reason, f.Fix)
}

// Analyze returns the findings of in, sorted by object.
func Analyze(in Input) []Finding {
	w := newWorld(in)
	var out []Finding
	for i := range in.Snapshots {
		if f, ok := w.snapshot(&in.Snapshots[i]); ok {
			out = append(out, f)
		}
	}
	for i := range in.Contents {
		if f, ok := w.content(&in.Contents[i]); ok {
			out = append(out, f)
		}
	}
	for i := range in.Groups {
		if f, ok := w.group(&in.Groups[i]); ok {
			out = append(out, f)
		}
	}
	for i := range in.GroupContents {
		if f, ok := w.groupContent(&in.GroupContents[i]); ok {
			out = append(out, f)
		}
	}
	for i := range in.Schedules {
		out = append(out, w.schedule(&in.Schedules[i])...)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return kindOrder[out[i].Kind] < kindOrder[out[j].Kind]
		}
		return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name
	})
	return out
}

var kindOrder = map[string]int{"VolumeSnapshot": 0, "VolumeSnapshotContent": 1, "VolumeGroupSnapshot": 2, "VolumeGroupSnapshotContent": 3, kindSchedule: 4}

// Filter keeps the findings of namespace ns ("" for all; contents count in
// the namespace of their snapshot) and, when name is given, of objects with
// that name.
func Filter(fs []Finding, ns, name string) []Finding {
	var out []Finding
	for _, f := range fs {
		if ns != "" && f.Namespace != ns && f.scope != ns {
			continue
		}
		if name != "" && f.Name != name {
			continue
		}
		out = append(out, f)
	}
	return out
}
