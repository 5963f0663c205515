package doctor

import (
	"strings"
	"testing"
	"time"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/snapkeeper/snapkeeper/pkg/apis/snapkeeper/v1alpha1"
	"github.com/snapkeeper/snapkeeper/pkg/schedule"
	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/sync/scheduler"
)

// hourly is a schedule of the claims labelled backup=hourly that ran at
// 03:00 and waits for 04:00 (now is 03:04:05), Ready.
func hourly(mods ...func(*v1alpha1.SnapshotSchedule)) v1alpha1.SnapshotSchedule {
	s := v1alpha1.SnapshotSchedule{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns, CreationTimestamp: metav1.NewTime(now.Add(-48 * time.Hour))},
		Spec: v1alpha1.SnapshotScheduleSpec{Schedule: "0 * * * *", ClaimSelector: metav1.LabelSelector{MatchLabels: map[string]string{"backup": "hourly"}},
			Retention: v1alpha1.RetentionPolicy{KeepLast: ptr.To(int32(3))}},
		Status: v1alpha1.SnapshotScheduleStatus{LastScheduleTime: &metav1.Time{Time: now.Truncate(time.Hour)},
			NextScheduleTime: &metav1.Time{Time: now.Truncate(time.Hour).Add(time.Hour)},
			Conditions:       []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Scheduled"}}}}
	for _, m := range mods {
		m(&s)
	}
	return s
}

// scheduled is a ready snapshot the schedule db cut of claim data
// hoursAgo hours before 03:00.
func scheduled(hoursAgo int, mods ...func(*snapv1.VolumeSnapshot)) snapv1.VolumeSnapshot {
	t := now.Truncate(time.Hour).Add(-time.Duration(hoursAgo) * time.Hour)
	return vs(schedule.SnapshotName("db", "data", t), append([]func(*snapv1.VolumeSnapshot){func(v *snapv1.VolumeSnapshot) {
		v.Labels, v.Annotations = schedule.Labels(nil, "db", "data"), schedule.Annotations(nil, t)
		v.Status = &snapv1.VolumeSnapshotStatus{ReadyToUse: ptr.To(true)}
	}}, mods...)...)
}

func notReady(v *snapv1.VolumeSnapshot) {
	v.Status = &snapv1.VolumeSnapshotStatus{ReadyToUse: ptr.To(false)}
}

func failedWith(msg string) func(*snapv1.VolumeSnapshot) {
	return func(v *snapv1.VolumeSnapshot) {
		v.Status = &snapv1.VolumeSnapshotStatus{ReadyToUse: ptr.To(false), Error: &snapv1.VolumeSnapshotError{Message: ptr.To(msg)}}
	}
}

func schedulesLease(renewed time.Duration) coordinationv1.Lease {
	t := metav1.NewMicroTime(now.Add(-renewed))
	return coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: SchedulesLease, Namespace: "snapkeeper"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("controller-0_x"), LeaseDurationSeconds: ptr.To(int32(15)), RenewTime: &t}}
}

// scheduling is served() with the claim data labelled backup=hourly, the
// schedule component leading, and the schedule db.
func scheduling() Input {
	in := served()
	in.PVCs[0].Labels = map[string]string{"backup": "hourly"}
	in.Leases = append(in.Leases, schedulesLease(time.Second))
	in.Schedules = []v1alpha1.SnapshotSchedule{hourly()}
	return in
}

var scheduleCases = []struct {
	name        string
	in          func(in *Input)
	want        []string // "Kind name code" of each finding, in order
	reason, fix string   // substrings of the first SnapshotSchedule finding
}{
	{name: "cutting", in: func(in *Input) { in.Snapshots = []snapv1.VolumeSnapshot{scheduled(0), scheduled(1)} }},
	{name: "invalid cron line", in: func(in *Input) { in.Schedules[0].Spec.Schedule = "TZ=UTC 0 * * * *" },
		want: []string{"SnapshotSchedule db schedule-invalid"}, reason: "set spec.timeZone instead (field spec.schedule)", fix: "neither cuts nor deletes"},
	{name: "no retention", in: func(in *Input) { in.Schedules[0].Spec.Retention = v1alpha1.RetentionPolicy{} },
		want: []string{"SnapshotSchedule db schedule-invalid"}, reason: "it has no retention rule"},
	{name: "suspended", in: func(in *Input) {
		in.Schedules[0].Spec.Suspend = ptr.To(true)
		in.Schedules[0].Status.NextScheduleTime = &metav1.Time{Time: now.Add(-time.Hour)}
	}, want: []string{"SnapshotSchedule db schedule-suspended"}, fix: `"suspend":false`},
	{name: "selector matches no claim", in: func(in *Input) {
		in.PVCs[0].Labels = map[string]string{"app": "db"}
		in.PVCs = append(in.PVCs, claim("logs", true))
		in.PVCs[1].Labels = map[string]string{"app": "db", "tier": "logs"}
	}, want: []string{"SnapshotSchedule db no-claims-selected"}, reason: "labels of the namespace's claims (2): app=db (2), tier=logs (1)", fix: "kubectl label pvc -n team"},
	{name: "selected claim not bound", in: func(in *Input) {
		in.PVCs = append(in.PVCs, claim("new", false))
		in.PVCs[1].Labels = map[string]string{"backup": "hourly"}
	}, want: []string{"SnapshotSchedule db claims-unbound"}, reason: "1 selected claim is not bound to a volume yet; runs skip each until it is: new"},
	{name: "class missing", in: func(in *Input) { in.Schedules[0].Spec.SnapshotTemplate.VolumeSnapshotClassName = ptr.To("nope") },
		want: []string{"SnapshotSchedule db schedule-class"}, reason: `it names VolumeSnapshotClass "nope"`},
	{name: "class of another driver", in: func(in *Input) {
		other := snapClass("other", false)
		other.Driver = "other.csi.example.com"
		in.Classes = append(in.Classes, other)
		in.Schedules[0].Spec.SnapshotTemplate.VolumeSnapshotClassName = ptr.To("other")
	}, want: []string{"SnapshotSchedule db schedule-class"}, reason: `of driver "other.csi.example.com"`},
	{name: "no default class for the claim's driver", in: func(in *Input) { in.Classes = []snapv1.VolumeSnapshotClass{snapClass("gold", false)} },
		want: []string{"SnapshotSchedule db schedule-class"}, reason: "has no default VolumeSnapshotClass"},
	{name: "group mode without a group class", in: func(in *Input) { in.Schedules[0].Spec.GroupSnapshot = &v1alpha1.GroupSnapshotTemplate{} },
		want: []string{"SnapshotSchedule db schedule-class"}, reason: "no default VolumeGroupSnapshotClass"},
	{name: "claim behind: two not ready", in: func(in *Input) {
		in.Snapshots = []snapv1.VolumeSnapshot{scheduled(0, notReady), scheduled(1, notReady), scheduled(2)}
	}, want: []string{"VolumeSnapshot db-data-202601020200 waiting", "VolumeSnapshot db-data-202601020300 waiting", "SnapshotSchedule db claims-behind"},
		reason: "data (db-data-202601020300, db-data-202601020200)"},
	{name: "newest snapshot failed", in: func(in *Input) {
		in.Snapshots = []snapv1.VolumeSnapshot{scheduled(0, failedWith("quota exceeded")), scheduled(1)}
	}, want: []string{"VolumeSnapshot db-data-202601020300 snapshot-error", "SnapshotSchedule db claims-failing"},
		reason: "data: db-data-202601020300 failed: quota exceeded"},
	{name: "group series failed", in: func(in *Input) {
		in.GroupClasses = []groupv1.VolumeGroupSnapshotClass{{ObjectMeta: metav1.ObjectMeta{Name: "g", Annotations: map[string]string{snapshot.AnnGroupDefaultClass: "true"}}, Driver: drv}}
		in.Schedules[0].Spec.GroupSnapshot = &v1alpha1.GroupSnapshotTemplate{}
		t := now.Truncate(time.Hour)
		in.Groups = []groupv1.VolumeGroupSnapshot{{ObjectMeta: metav1.ObjectMeta{Name: "db-202601020300", Namespace: ns, UID: "uid-g",
			Labels: schedule.Labels(nil, "db", ""), Annotations: schedule.Annotations(nil, t), Finalizers: []string{"f"}},
			Status: &groupv1.VolumeGroupSnapshotStatus{ReadyToUse: ptr.To(false), Error: &snapv1.VolumeSnapshotError{Message: ptr.To("driver says no")}}}}
	}, want: []string{"VolumeGroupSnapshot db-202601020300 snapshot-error", "SnapshotSchedule db claims-failing"},
		reason: "the newest snapshot of 1 group series failed: db: db-202601020300 failed: driver says no"},
	{name: "missed runs lately", in: func(in *Input) {
		in.Schedules[0].Spec.StartingDeadlineSeconds = ptr.To(int64(60))
		in.Schedules[0].Status.MissedRuns = 3
		in.Schedules[0].Status.LastMissedTime = &metav1.Time{Time: now.Add(-2 * time.Hour)}
	}, want: []string{"SnapshotSchedule db missed-runs"}, reason: "3 scheduled times were skipped", fix: "startingDeadlineSeconds (60s)"},
	{name: "missed runs long ago are history", in: func(in *Input) {
		in.Schedules[0].Status.MissedRuns = 3
		in.Schedules[0].Status.LastMissedTime = &metav1.Time{Time: now.Add(-72 * time.Hour)}
	}},
	{name: "missed runs with their event", in: func(in *Input) {
		in.Schedules[0].Status.MissedRuns = 2
		in.Events = []corev1.Event{{InvolvedObject: corev1.ObjectReference{Kind: "SnapshotSchedule", Namespace: ns, Name: "db"}, Type: corev1.EventTypeWarning,
			Reason: "MissedRuns", Message: "Skipped 2 scheduled time(s)", LastTimestamp: metav1.NewTime(now.Add(-time.Minute))}}
	}, want: []string{"SnapshotSchedule db missed-runs"}, reason: "event MissedRuns: Skipped 2 scheduled time(s)"},
	{name: "run failed", in: func(in *Input) {
		in.Schedules[0].Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "RunFailed", Message: "forbidden"}}
	}, want: []string{"SnapshotSchedule db schedule-not-ready"}, reason: "reason RunFailed: forbidden", fix: "RBAC"},
	{name: "stale NoClaimsSelected is not repeated", in: func(in *Input) {
		in.Schedules[0].Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "NoClaimsSelected"}}
	}},
	{name: "next time past, no component ever ran", in: func(in *Input) {
		in.Leases = in.Leases[:1]
		in.Schedules[0].Status.NextScheduleTime = &metav1.Time{Time: now.Add(-2 * time.Hour)}
	}, want: []string{"SnapshotSchedule db schedules-not-running"}, reason: "is 2h0m0s past", fix: "controller.schedules.enabled"},
	{name: "next time past, Lease stale", in: func(in *Input) {
		in.Leases[1] = schedulesLease(time.Hour)
		in.Schedules[0].Status.NextScheduleTime = &metav1.Time{Time: now.Add(-2 * time.Hour)}
	}, want: []string{"SnapshotSchedule db schedules-not-running"}, reason: "held by controller-0_x, is stale", fix: "kubectl get pods -n snapkeeper"},
	{name: "next time past, the leader does not sync it", in: func(in *Input) {
		in.Schedules[0].Status.NextScheduleTime = &metav1.Time{Time: now.Add(-2 * time.Hour)}
	}, want: []string{"SnapshotSchedule db schedules-not-running"}, reason: "controller-0_x leads", fix: "kubectl logs -n snapkeeper"},
	{name: "never synced, Leases unknown", in: func(in *Input) {
		in.Leases, in.LeasesKnown = nil, false
		in.Schedules[0].Status = v1alpha1.SnapshotScheduleStatus{}
	}, want: []string{"SnapshotSchedule db schedules-not-running"}, reason: "no status 48h0m0s after it was created", fix: "grep " + SchedulesLease},
}

func TestSchedules(t *testing.T) {
	for _, tc := range scheduleCases {
		t.Run(tc.name, func(t *testing.T) {
			in := scheduling()
			tc.in(&in)
			got := Analyze(in)
			var short []string
			var first *Finding
			for i, f := range got {
				short = append(short, f.Kind+" "+f.Name+" "+f.Code)
				if f.Reason == "" || f.Fix == "" {
					t.Errorf("finding without reason or fix: %+v", f)
				}
				if f.Kind == kindSchedule && first == nil {
					first = &got[i]
				}
			}
			if strings.Join(short, "; ") != strings.Join(tc.want, "; ") {
				t.Fatalf("findings = %q, want %q\n%v", short, tc.want, got)
			}
			if first == nil {
				return
			}
			if !strings.Contains(first.Reason, tc.reason) || !strings.Contains(first.Fix, tc.fix) {
				t.Errorf("finding %s\nwant reason with %q, fix with %q", first, tc.reason, tc.fix)
			}
		})
	}
}

// The doctor's copies of the component's reasons and event stay its.
func TestScheduleReasonsAreTheComponents(t *testing.T) {
	for mine, theirs := range map[string]string{readyCondition: scheduler.ConditionReady, reasonInvalidSpec: scheduler.ReasonInvalidSpec,
		reasonNoClaims: scheduler.ReasonNoClaims, reasonClaimsFailing: scheduler.ReasonClaimsFailing, reasonRunFailed: scheduler.ReasonRunFailed,
		reasonGroupsUnavailable: scheduler.ReasonGroupsUnavailable, eventMissedRuns: scheduler.EventMissedRuns} {
		if mine != theirs {
			t.Errorf("%q != %q", mine, theirs)
		}
	}
}
