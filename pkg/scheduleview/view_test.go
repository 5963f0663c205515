package scheduleview

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/snapkeeper/snapkeeper/pkg/apis/snapkeeper/v1alpha1"
	"github.com/snapkeeper/snapkeeper/pkg/schedule"
)

const ns = "shop"

// now is 10:30 UTC, 11:30 in Europe/Berlin (CET).
var now = time.Date(2026, 1, 2, 10, 30, 0, 0, time.UTC)

func sched(mods ...func(*v1alpha1.SnapshotSchedule)) *v1alpha1.SnapshotSchedule {
	s := &v1alpha1.SnapshotSchedule{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns},
		Spec: v1alpha1.SnapshotScheduleSpec{Schedule: "0 * * * *", TimeZone: ptr.To("Europe/Berlin"),
			Retention: v1alpha1.RetentionPolicy{KeepLast: ptr.To(int32(2))}}}
	for _, m := range mods {
		m(s)
	}
	return s
}

// snap is a snapshot of the schedule db of claim cut hoursAgo hours before
// now's hour.
func snap(claim string, hoursAgo int, mods ...func(*snapv1.VolumeSnapshot)) snapv1.VolumeSnapshot {
	t := now.Truncate(time.Hour).Add(-time.Duration(hoursAgo) * time.Hour)
	vs := snapv1.VolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Name: schedule.SnapshotName("db", claim, t), Namespace: ns,
		Labels: schedule.Labels(nil, "db", claim), Annotations: schedule.Annotations(nil, t)},
		Spec:   snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{PersistentVolumeClaimName: ptr.To(claim)}},
		Status: &snapv1.VolumeSnapshotStatus{ReadyToUse: ptr.To(true)}}
	for _, m := range mods {
		m(&vs)
	}
	return vs
}

func failed(vs *snapv1.VolumeSnapshot) {
	vs.Status = &snapv1.VolumeSnapshotStatus{ReadyToUse: ptr.To(false), Error: &snapv1.VolumeSnapshotError{Message: ptr.To("quota")}}
}

// restoreFrom is an unbound claim restoring from the snapshot named name.
func restoreFrom(name string) corev1.PersistentVolumeClaim {
	return corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "restore", Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{DataSourceRef: &corev1.TypedObjectReference{APIGroup: ptr.To(snapv1.GroupName), Kind: "VolumeSnapshot", Name: name}}}
}

// short is a view as "series: keep name/reasons ...; delete name/reason".
func short(v View) []string {
	var out []string
	for _, se := range v.Series {
		var parts []string
		for _, k := range se.Keep {
			parts = append(parts, "keep "+k.Name[len("db-"):]+"/"+strings.Join(k.Reasons, "+"))
		}
		for _, d := range se.Delete {
			parts = append(parts, "delete "+d.Name[len("db-"):]+"/"+d.Reasons[0])
		}
		out = append(out, se.Name+": "+strings.Join(parts, "; "))
	}
	return out
}

func TestBuild(t *testing.T) {
	for _, tc := range []struct {
		name   string
		s      *v1alpha1.SnapshotSchedule
		in     Input
		next   []string // local times
		series []string
		error  string
		note   string
	}{
		{name: "next runs in the zone, no snapshots yet", s: sched(), next: []string{"12:00 CET", "13:00 CET", "14:00 CET"}},
		{name: "suspended: no runs, retention still applies", s: sched(func(s *v1alpha1.SnapshotSchedule) { s.Spec.Suspend = ptr.To(true) }),
			in:     Input{Snapshots: []snapv1.VolumeSnapshot{snap("data", 0), snap("data", 1), snap("data", 2)}},
			series: []string{"data: keep data-202601021000/newest ready+keepLast 1/2; keep data-202601020900/keepLast 2/2; delete data-202601020800/beyond retention"}},
		{name: "per claim: failed superseded, protected kept, other schedules ignored", s: sched(),
			in: Input{Snapshots: []snapv1.VolumeSnapshot{
				snap("data", 0, failed), snap("data", 1), snap("data", 2), snap("data", 3),
				snap("logs", 0), snap("logs", 5, failed),
				snap("data", 4, func(vs *snapv1.VolumeSnapshot) { vs.Labels[schedule.LabelSchedule] = "other" }),
				snap("data", 6, func(vs *snapv1.VolumeSnapshot) { vs.Namespace = "elsewhere" }),
			}, PVCs: []corev1.PersistentVolumeClaim{restoreFrom("db-data-202601020700")}},
			next: []string{"12:00 CET", "13:00 CET", "14:00 CET"},
			series: []string{
				"data: keep data-202601021000/not ready yet; keep data-202601020900/newest ready+keepLast 1/2; keep data-202601020800/keepLast 2/2; keep data-202601020700/restoring a claim",
				"logs: keep logs-202601021000/newest ready+keepLast 1/2; delete logs-202601020500/not ready, and a newer snapshot is ready",
			}},
		{name: "adopted snapshot counts by its cut time", s: sched(func(s *v1alpha1.SnapshotSchedule) {
			s.Spec.Retention = v1alpha1.RetentionPolicy{MaxAge: ptr.To("90m")}
		}), in: Input{Snapshots: []snapv1.VolumeSnapshot{snap("data", 0), snap("data", 1, func(vs *snapv1.VolumeSnapshot) {
			vs.Annotations = nil
			vs.Status.CreationTime = &metav1.Time{Time: now.Add(-3 * time.Hour)}
		})}}, next: []string{"12:00 CET", "13:00 CET", "14:00 CET"},
			series: []string{"data: keep data-202601021000/newest ready+within maxAge 1h30m0s; delete data-202601020900/older than maxAge 1h30m0s"}},
		{name: "invalid spec", s: sched(func(s *v1alpha1.SnapshotSchedule) { s.Spec.Schedule = "TZ=UTC 0 * * * *" }), error: "spec.timeZone"},
		{name: "no retention", s: sched(func(s *v1alpha1.SnapshotSchedule) { s.Spec.Retention = v1alpha1.RetentionPolicy{} }), error: "set at least one"},
		{name: "group mode without group CRDs", s: sched(func(s *v1alpha1.SnapshotSchedule) { s.Spec.GroupSnapshot = &v1alpha1.GroupSnapshotTemplate{} }),
			note: "not served"},
		{name: "group mode", s: sched(func(s *v1alpha1.SnapshotSchedule) { s.Spec.GroupSnapshot = &v1alpha1.GroupSnapshotTemplate{} }),
			in:     Input{GroupsServed: true, Groups: []groupv1.VolumeGroupSnapshot{group(0), group(1), group(2)}},
			next:   []string{"12:00 CET", "13:00 CET", "14:00 CET"},
			series: []string{"db: keep 202601021000/newest ready+keepLast 1/2; keep 202601020900/keepLast 2/2; delete 202601020800/beyond retention"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := Build(tc.s, tc.in, now, 3)
			var next []string
			for _, r := range v.Next {
				next = append(next, r.Local.Format("15:04 MST"))
				if !r.UTC.Equal(r.Local) || r.UTC.Location() != time.UTC {
					t.Errorf("run %v / %v", r.Local, r.UTC)
				}
			}
			if strings.Join(next, ", ") != strings.Join(tc.next, ", ") {
				t.Errorf("next = %q, want %q", next, tc.next)
			}
			if got := short(v); strings.Join(got, "\n") != strings.Join(tc.series, "\n") {
				t.Errorf("series\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.series, "\n"))
			}
			if !strings.Contains(v.Error, tc.error) || (tc.error == "") != (v.Error == "") {
				t.Errorf("error %q, want one with %q", v.Error, tc.error)
			}
			if !strings.Contains(v.Note, tc.note) || (tc.note == "") != (v.Note == "") {
				t.Errorf("note %q, want one with %q", v.Note, tc.note)
			}
		})
	}
}

func group(hoursAgo int) groupv1.VolumeGroupSnapshot {
	t := now.Truncate(time.Hour).Add(-time.Duration(hoursAgo) * time.Hour)
	return groupv1.VolumeGroupSnapshot{ObjectMeta: metav1.ObjectMeta{Name: schedule.GroupName("db", t), Namespace: ns,
		Labels: schedule.Labels(nil, "db", ""), Annotations: schedule.Annotations(nil, t)},
		Status: &groupv1.VolumeGroupSnapshotStatus{ReadyToUse: ptr.To(true)}}
}

func TestWrite(t *testing.T) {
	views := []View{
		Build(sched(), Input{Snapshots: []snapv1.VolumeSnapshot{snap("data", 0), snap("data", 1), snap("data", 2, failed)}}, now, 2),
		Build(sched(func(s *v1alpha1.SnapshotSchedule) { s.Name, s.Spec.Suspend = "paused", ptr.To(true) }), Input{}, now, 2),
		Build(sched(func(s *v1alpha1.SnapshotSchedule) { s.Name, s.Spec.Schedule = "bad", "@every 1h" }), Input{}, now, 2),
	}
	var b bytes.Buffer
	if err := Write(&b, views); err != nil {
		t.Fatal(err)
	}
	want := `SnapshotSchedule shop/db: "0 * * * *" in Europe/Berlin, retention keepLast: 2
  next: 2026-01-02 12:00 CET (2026-01-02 11:00 UTC)
  next: 2026-01-02 13:00 CET (2026-01-02 12:00 UTC)
  claim data: keeps 2, would delete 1
    keep    db-data-202601021000  2026-01-02 11:00 CET  ready   newest ready, keepLast 1/2
    keep    db-data-202601020900  2026-01-02 10:00 CET  ready   keepLast 2/2
    delete  db-data-202601020800  2026-01-02 09:00 CET  failed  not ready, and a newer snapshot is ready
SnapshotSchedule shop/paused: "0 * * * *" in Europe/Berlin, retention keepLast: 2
  next: none, suspended (spec.suspend); retention still applies
  no snapshots of this schedule yet
SnapshotSchedule shop/bad: "@every 1h" in Europe/Berlin, retention keepLast: 2
  invalid spec: invalid schedule: "@every 1h": @every is not supported; write five fields (e.g. "*/30 * * * *") or @hourly, @daily, @weekly, @monthly, @yearly
  nothing is cut or deleted until the spec is fixed
3 schedules (1 invalid), 2 snapshots kept, 1 would be deleted now (dry run: nothing was deleted)
`
	if b.String() != want {
		t.Errorf("output\n%s\nwant\n%s", b.String(), want)
	}
	// JSON: the arrays are never null, times carry their zone's offset.
	out, err := json.Marshal(views[1])
	if err != nil {
		t.Fatal(err)
	}
	if s := string(out); !strings.Contains(s, `"next":[]`) || !strings.Contains(s, `"series":[]`) || !strings.Contains(s, `"suspended":true`) {
		t.Errorf("json %s", s)
	}
	out, _ = json.Marshal(views[0].Next[0])
	if string(out) != `{"local":"2026-01-02T12:00:00+01:00","utc":"2026-01-02T11:00:00Z"}` {
		t.Errorf("run json %s", out)
	}
}

func TestRetention(t *testing.T) {
	r := v1alpha1.RetentionPolicy{KeepLast: ptr.To(int32(24)), Daily: ptr.To(int32(7)), MaxAge: ptr.To("30d")}
	if got := Retention(r); got != "keepLast: 24, daily: 7, maxAge: 30d" {
		t.Errorf("Retention = %q", got)
	}
	if got := Retention(v1alpha1.RetentionPolicy{}); got != "none" {
		t.Errorf("empty = %q", got)
	}
}
