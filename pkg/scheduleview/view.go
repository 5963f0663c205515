// Package scheduleview shows what a SnapshotSchedule will do: its next
// scheduled times, and a dry run of its retention now, per claim series
// (or the group series), with the reasons each snapshot is kept or would be
// deleted. The decisions are pkg/schedule's, called as the schedule
// component (pkg/sync/scheduler) calls them, so the dry run says what the
// next sync deletes. Nothing here reads a clock or a server:
// cmd/snapctl/schedules.go gathers the objects.
package scheduleview

import (
	"fmt"
	"sort"
	"strings"
	"time"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/snapkeeper/snapkeeper/pkg/apis/snapkeeper/v1alpha1"
	"github.com/snapkeeper/snapkeeper/pkg/schedule"
)

// Input is the objects a view looks at: those of the schedules'
// namespaces (more do no harm).
type Input struct {
	Snapshots []snapv1.VolumeSnapshot
	Groups    []groupv1.VolumeGroupSnapshot
	// GroupsServed: the group snapshot CRDs are installed. Without them a
	// group schedule cuts nothing.
	GroupsServed bool
	PVCs         []corev1.PersistentVolumeClaim
}

// View is one schedule's plan. The JSON field names are stable: fields
// are only ever added.
type View struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Schedule  string `json:"schedule"`
	// TimeZone is spec.timeZone, "UTC" when absent.
	TimeZone  string `json:"timeZone"`
	Suspended bool   `json:"suspended"`
	Group     bool   `json:"group"`
	// Retention lists the rules set, as the spec writes them.
	Retention string `json:"retention"`
	// Error is why the spec does not parse: then nothing runs and
	// nothing is deleted, and Next and Series are empty.
	Error string `json:"error,omitempty"`
	// Note is anything else that stops runs (group snapshots not served).
	Note   string   `json:"note,omitempty"`
	Next   []Run    `json:"next"`
	Series []Series `json:"series"`
}

// Run is a scheduled time in the schedule's zone and in UTC.
type Run struct {
	Local time.Time `json:"local"`
	UTC   time.Time `json:"utc"`
}

// Series is retention's decision over one claim's snapshots (the
// schedule's group snapshots in group mode, named after the schedule).
type Series struct {
	Name   string     `json:"name"`
	Keep   []Snapshot `json:"keep"`
	Delete []Snapshot `json:"delete"`
	// Deleting counts the snapshots already being deleted, which
	// retention no longer looks at.
	Deleting int `json:"deleting,omitempty"`
}

// Snapshot is one snapshot of a series: its time (the scheduled time, or
// the cut time of an adopted one) in the schedule's zone, and why it is
// kept (one reason per rule) or would be deleted (one reason).
type Snapshot struct {
	Name    string    `json:"name"`
	Time    time.Time `json:"time"`
	State   string    `json:"state"` // ready, failed or pending
	Reasons []string  `json:"reasons"`
}

// Build is the view of s at now with its next runs (at most runs of them).
func Build(s *v1alpha1.SnapshotSchedule, in Input, now time.Time, runs int) View {
	v := View{Namespace: s.Namespace, Name: s.Name, Schedule: s.Spec.Schedule, TimeZone: "UTC",
		Suspended: s.Spec.Suspend != nil && *s.Spec.Suspend, Group: s.Spec.GroupSnapshot != nil,
		Retention: Retention(s.Spec.Retention), Next: []Run{}, Series: []Series{}}
	tz := ""
	if s.Spec.TimeZone != nil && *s.Spec.TimeZone != "" {
		tz = *s.Spec.TimeZone
		v.TimeZone = tz
	}
	spec, err := schedule.Parse(s.Spec.Schedule, tz)
	if err != nil {
		v.Error = err.Error()
		return v
	}
	policy, err := schedule.PolicyFrom(s.Spec.Retention)
	if err != nil {
		v.Error = err.Error()
		return v
	}
	loc := spec.Location()
	if v.Group && !in.GroupsServed {
		// As the controller: no runs and no pruning until it serves them.
		v.Note = "group snapshots are not served by this cluster (no VolumeGroupSnapshot CRD): nothing is cut or deleted; install the group snapshot CRDs"
		return v
	}
	if !v.Suspended {
		for _, t := range spec.NextTimes(now, runs) {
			v.Next = append(v.Next, Run{Local: t.In(loc), UTC: t.UTC()})
		}
	}
	if v.Group {
		groups := GroupsOf(s, in.Groups)
		v.Series = append(v.Series, series(s.Name, schedule.GroupItems(groups), policy, now, loc))
		return v
	}
	all := ClaimSeries(s, in.Snapshots)
	restoring := Restoring(in.PVCs)
	claims := make([]string, 0, len(all))
	for c := range all {
		claims = append(claims, c)
	}
	sort.Strings(claims)
	for _, c := range claims {
		v.Series = append(v.Series, series(c, schedule.SnapshotItems(all[c], restoring), policy, now, loc))
	}
	return v
}

func series(name string, items []schedule.Item, p schedule.Policy, now time.Time, loc *time.Location) Series {
	d := schedule.Decide(items, p, now, loc)
	se := Series{Name: name, Keep: make([]Snapshot, 0, len(d.Keep)), Delete: make([]Snapshot, 0, len(d.Delete))}
	for _, k := range d.Keep {
		se.Keep = append(se.Keep, snapshotOf(k.Item, loc, k.Reasons))
	}
	for _, del := range d.Delete {
		se.Delete = append(se.Delete, snapshotOf(del.Item, loc, []string{del.Reason}))
	}
	for _, it := range items {
		if it.Deleting {
			se.Deleting++
		}
	}
	return se
}

func snapshotOf(it schedule.Item, loc *time.Location, reasons []string) Snapshot {
	state := "pending"
	switch {
	case it.Ready:
		state = "ready"
	case it.Failed:
		state = "failed"
	}
	return Snapshot{Name: it.Name, Time: it.Time.In(loc), State: state, Reasons: append([]string{}, reasons...)}
}

// ClaimSeries is the schedule's VolumeSnapshots (its namespace, its
// snapkeeper.io/schedule label) by the claim they were cut of, as the
// controller's retention counts them: one without a claim source is in no
// series and never deleted.
func ClaimSeries(s *v1alpha1.SnapshotSchedule, snapshots []snapv1.VolumeSnapshot) map[string][]*snapv1.VolumeSnapshot {
	out := map[string][]*snapv1.VolumeSnapshot{}
	for i := range snapshots {
		vs := &snapshots[i]
		if vs.Namespace != s.Namespace || vs.Labels[schedule.LabelSchedule] != s.Name {
			continue
		}
		if c := vs.Spec.Source.PersistentVolumeClaimName; c != nil {
			out[*c] = append(out[*c], vs)
		}
	}
	return out
}

// GroupsOf is the schedule's VolumeGroupSnapshots.
func GroupsOf(s *v1alpha1.SnapshotSchedule, groups []groupv1.VolumeGroupSnapshot) []*groupv1.VolumeGroupSnapshot {
	var out []*groupv1.VolumeGroupSnapshot
	for i := range groups {
		g := &groups[i]
		if g.Namespace == s.Namespace && g.Labels[schedule.LabelSchedule] == s.Name {
			out = append(out, g)
		}
	}
	return out
}

// Restoring reports, as the controller's restore-source index does,
// whether a claim that is not bound yet restores from the VolumeSnapshot
// namespace/name: retention never deletes that one.
func Restoring(pvcs []corev1.PersistentVolumeClaim) func(namespace, name string) bool {
	sources := map[string]bool{}
	for i := range pvcs {
		for _, key := range schedule.RestoreSources(&pvcs[i]) {
			sources[key] = true
		}
	}
	return func(namespace, name string) bool { return sources[namespace+"/"+name] }
}

// Retention lists the rules a policy sets, in the spec's order, as
// "keepLast: 24, daily: 7, maxAge: 30d"; "none" when none is.
func Retention(r v1alpha1.RetentionPolicy) string {
	var parts []string
	for _, rule := range schedule.RetentionRules(r) {
		if rule.Name == "maxAge" {
			parts = append(parts, "maxAge: "+rule.MaxAge)
			continue
		}
		parts = append(parts, fmt.Sprintf("%s: %d", rule.Name, rule.Count))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
