package validation

import (
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/pkg/apis/snapkeeper/v1alpha1"
	. "github.com/snapkeeper/snapkeeper/pkg/validation/validationtest"
)

// scheduleWorld is groupWorld (claims of namespace "ns" of two drivers, one
// unbound, one not a CSI volume) with a default VolumeSnapshotClass for ebs
// and a class of gce that is not the default.
func scheduleWorld() []any {
	return append(groupWorld(),
		NewClass("snap-ebs", WithDriver(ebs), AsDefault()),
		NewClass("snap-gce", WithDriver(gce)),
	)
}

func TestSchedule(t *testing.T) {
	db := func(opts ...Opt) *v1alpha1.SnapshotSchedule {
		return NewSchedule("ns", "nightly", append([]Opt{Selecting("app", "db")}, opts...)...)
	}
	count := func(n int32) *int32 { return &n }
	age := func(s string) *string { return &s }
	expr := func(key string, op metav1.LabelSelectorOperator, values ...string) metav1.LabelSelectorRequirement {
		return metav1.LabelSelectorRequirement{Key: key, Operator: op, Values: values}
	}
	selecting := func(labels map[string]string, exprs ...metav1.LabelSelectorRequirement) Opt {
		return WithSelector(&metav1.LabelSelector{MatchLabels: labels, MatchExpressions: exprs})
	}
	appDB := map[string]string{"app": "db"}
	tests := map[string]verdictCase[*v1alpha1.SnapshotSchedule]{
		"bound claims of one driver with the driver's default class are admitted": {
			obj: db(),
		},
		"a named class of the claims' driver is admitted": {
			obj: db(WithClass("snap-ebs")),
		},
		"a cron line in a time zone is admitted": {
			obj: db(Cron("30 2 * * 1-5"), InTimeZone("Europe/Berlin")),
		},
		"a name longer than 63 characters is denied": {
			obj:     NewSchedule("ns", strings.Repeat("n", 64), Selecting("app", "db")),
			wantErr: `has a name of 64 characters: at most 63 are allowed, as the name is the value of the snapkeeper.io/schedule label of each of its snapshots; choose a shorter name (field metadata.name)`,
		},
		"a cron line that does not parse is denied with how to write one": {
			obj:     db(Cron("every day")),
			wantErr: `; write five fields (minute hour day-of-month month day-of-week, e.g. "0 * * * *") or @hourly, @daily, @weekly, @monthly, @yearly (field spec.schedule)`,
		},
		"a cron line that does not parse names the schedule and the line": {
			obj:     db(Cron("every day")),
			wantErr: `SnapshotSchedule "ns/nightly" has an invalid spec.schedule: "every day": `,
		},
		"a time zone in the cron line is denied": {
			obj:     db(Cron("CRON_TZ=UTC 0 * * * *")),
			wantErr: `SnapshotSchedule "ns/nightly" has an invalid spec.schedule: a time zone in the cron line (TZ= or CRON_TZ=) is not supported: set spec.timeZone instead (field spec.schedule)`,
		},
		"an unknown time zone is denied on spec.timeZone": {
			obj:     db(InTimeZone("Mars/Olympus")),
			wantErr: `SnapshotSchedule "ns/nightly" has an invalid spec.timeZone: "Mars/Olympus" is not an IANA time zone name (such as UTC, Europe/Berlin or America/New_York); write an IANA name, or omit spec.timeZone to use UTC (field spec.timeZone)`,
		},
		"the Local time zone is denied": {
			obj:     db(InTimeZone("Local")),
			wantErr: `has an invalid spec.timeZone: "Local": name an IANA time zone such as Europe/Berlin, or leave it empty for UTC (field spec.timeZone)`,
		},
		"a bad time zone does not hide a bad cron line": {
			obj:     db(InTimeZone("Mars/Olympus"), Cron("61 * * * *")),
			wantErr: "(field spec.timeZone)\n" + `SnapshotSchedule "ns/nightly" has an invalid spec.schedule: "61 * * * *"`,
		},
		"a retention without rules is denied": {
			obj:     db(WithRetention(v1alpha1.RetentionPolicy{})),
			wantErr: `SnapshotSchedule "ns/nightly" has no retention rule: set at least one of keepLast, hourly, daily, weekly, monthly, yearly or maxAge in spec.retention (for example keepLast: 7), so that the schedule knows which snapshots to keep (field spec.retention)`,
		},
		"a zero count is denied": {
			obj:     db(WithRetention(v1alpha1.RetentionPolicy{KeepLast: count(2), Daily: count(0)})),
			wantErr: `SnapshotSchedule "ns/nightly" has an invalid spec.retention: spec.retention.daily: must be at least 1; correct or remove the rules named (field spec.retention)`,
		},
		"a maxAge that does not parse is denied": {
			obj:     db(WithRetention(v1alpha1.RetentionPolicy{MaxAge: age("a week")})),
			wantErr: `has an invalid spec.retention: spec.retention.maxAge: "a week" is not a positive duration: write hours or minutes as Go does (36h, 90m), or whole days or weeks (7d, 2w); correct or remove the rules named (field spec.retention)`,
		},
		"maxAge alone in days is admitted": {
			obj: db(WithRetention(v1alpha1.RetentionPolicy{MaxAge: age("7d")})),
		},
		"a selector with an unknown operator is denied": {
			obj:     NewSchedule("ns", "nightly", selecting(nil, expr("app", "Equals", "db"))),
			wantErr: `SnapshotSchedule "ns/nightly" has an invalid spec.claimSelector: "Equals" is not a valid label selector operator; write matchLabels as valid label keys and values, and matchExpressions with operator In or NotIn (with values) or Exists or DoesNotExist (without) (field spec.claimSelector)`,
		},
		"a label value excluded by NotIn is a contradiction": {
			obj:     NewSchedule("ns", "nightly", selecting(appDB, expr("app", metav1.LabelSelectorOpNotIn, "db", "web"))),
			wantErr: `SnapshotSchedule "ns/nightly" has a spec.claimSelector that no claim can match: matchLabels app=db and matchExpressions app NotIn [db, web] contradict (label "app"); remove or change one of them, or the schedule never snapshots anything (field spec.claimSelector)`,
		},
		"a label required absent is a contradiction": {
			obj:     NewSchedule("ns", "nightly", selecting(appDB, expr("app", metav1.LabelSelectorOpDoesNotExist))),
			wantErr: `no claim can match: matchLabels app=db and matchExpressions app DoesNotExist contradict (label "app")`,
		},
		"In sets without a common value are a contradiction": {
			obj: NewSchedule("ns", "nightly", selecting(nil,
				expr("tier", metav1.LabelSelectorOpIn, "gold", "silver"), expr("tier", metav1.LabelSelectorOpIn, "bronze"))),
			wantErr: `no claim can match: matchExpressions tier In [gold, silver] and matchExpressions tier In [bronze] contradict (label "tier")`,
		},
		"a label value outside an In set is a contradiction": {
			obj:     NewSchedule("ns", "nightly", selecting(map[string]string{"tier": "gold"}, expr("tier", metav1.LabelSelectorOpIn, "silver"))),
			wantErr: `no claim can match: matchLabels tier=gold and matchExpressions tier In [silver] contradict (label "tier")`,
		},
		"Exists and DoesNotExist on one key are a contradiction": {
			obj: NewSchedule("ns", "nightly", selecting(nil,
				expr("app", metav1.LabelSelectorOpExists), expr("app", metav1.LabelSelectorOpDoesNotExist))),
			wantErr: `no claim can match: matchExpressions app Exists and matchExpressions app DoesNotExist contradict (label "app")`,
		},
		"In values all excluded by NotIn are a contradiction": {
			obj: NewSchedule("ns", "nightly", selecting(nil,
				expr("app", metav1.LabelSelectorOpIn, "db", "web"), expr("app", metav1.LabelSelectorOpNotIn, "web"), expr("app", metav1.LabelSelectorOpNotIn, "db"))),
			wantErr: `matchExpressions app In [db, web], matchExpressions app NotIn [web] and matchExpressions app NotIn [db] contradict (label "app")`,
		},
		"contradictions on two keys are both named": {
			obj: NewSchedule("ns", "nightly", selecting(map[string]string{"app": "db", "tier": "gold"},
				expr("app", metav1.LabelSelectorOpDoesNotExist), expr("tier", metav1.LabelSelectorOpNotIn, "gold"))),
			wantErr: `matchLabels app=db and matchExpressions app DoesNotExist contradict (label "app"); matchLabels tier=gold and matchExpressions tier NotIn [gold] contradict (label "tier")`,
		},
		"requirements that overlap are admitted": {
			obj: NewSchedule("ns", "nightly", selecting(appDB,
				expr("app", metav1.LabelSelectorOpIn, "db", "web"), expr("app", metav1.LabelSelectorOpNotIn, "web"),
				expr("app", metav1.LabelSelectorOpExists), expr("backup", metav1.LabelSelectorOpNotIn, "no"),
				expr("backup", metav1.LabelSelectorOpDoesNotExist))),
		},
		"a selector that matches no claim yet is a warning": {
			obj:         NewSchedule("ns", "nightly", Selecting("app", "later")),
			wantWarning: `SnapshotSchedule "ns/nightly": spec.claimSelector "app=later" matches no PersistentVolumeClaim in namespace "ns" yet; the schedule cuts nothing until claims with matching labels exist`,
		},
		"an empty selector in a namespace without claims is a warning": {
			obj:         NewSchedule("empty", "nightly"),
			wantWarning: `the empty spec.claimSelector, which selects every claim, matches no PersistentVolumeClaim in namespace "empty" yet`,
		},
		"a failing claim lookup is a warning, a failing class lookup a denial": {
			lookupErr:   errors.New("cache broken"),
			obj:         db(WithClass("snap-ebs")),
			wantErr:     `could not read VolumeSnapshotClass "snap-ebs" to check this rule: cache broken; retry shortly (field spec.snapshotTemplate.volumeSnapshotClassName)`,
			wantWarning: `could not list the PersistentVolumeClaims that spec.claimSelector "app=db" matches (cache broken); their drivers were not checked`,
		},
		"a class that does not exist is denied, listing the few that do": {
			obj:     db(WithClass("snap-fast")),
			wantErr: `SnapshotSchedule "ns/nightly" names VolumeSnapshotClass "snap-fast" in spec.snapshotTemplate.volumeSnapshotClassName, which does not exist, so every run would fail: create the class first, or name an existing one (existing: "snap-ebs", "snap-gce") (field spec.snapshotTemplate.volumeSnapshotClassName)`,
		},
		"a misspelt class among many is denied with the nearest name": {
			existing: []any{NewClass("a1"), NewClass("a2"), NewClass("a3"), NewClass("a4")},
			obj:      db(WithClass("snap-ebz")),
			wantErr:  `which does not exist, so every run would fail: create the class first, or name an existing one (did you mean "snap-ebs"?)`,
		},
		"an empty class name is denied": {
			obj:     db(WithClass("")),
			wantErr: `SnapshotSchedule "ns/nightly" sets spec.snapshotTemplate.volumeSnapshotClassName to the empty string: omit the field to use the default class of each claim's driver, or name a class (field spec.snapshotTemplate.volumeSnapshotClassName)`,
		},
		"a class of another driver than the claims is denied naming claims and drivers": {
			obj:     db(WithClass("snap-gce")),
			wantErr: `SnapshotSchedule "ns/nightly" names VolumeSnapshotClass "snap-gce" of driver "pd.csi.storage.gke.io", but it selects claims "data", "log" of driver "ebs.csi.aws.com", so the snapshots of those claims would fail; name a VolumeSnapshotClass of driver "ebs.csi.aws.com", or change spec.claimSelector so that it selects only claims of driver "pd.csi.storage.gke.io" (field spec.snapshotTemplate.volumeSnapshotClassName)`,
		},
		"a class is checked against each driver of the claims": {
			obj:     NewSchedule("ns", "nightly", Selecting("mix", "yes"), WithClass("snap-ebs")),
			wantErr: `but it selects claim "cache" of driver "pd.csi.storage.gke.io", so the snapshots of that claim would fail`,
		},
		"claims not bound yet are not checked against the class": {
			obj: NewSchedule("ns", "nightly", Selecting("app", "late"), WithClass("snap-gce")),
		},
		"a driver without a default class is a warning": {
			obj:         NewSchedule("ns", "nightly", Selecting("app", "mixed")),
			wantWarning: `SnapshotSchedule "ns/nightly" names no VolumeSnapshotClass and driver "pd.csi.storage.gke.io" of claim "cache" has no default VolumeSnapshotClass, so snapshots of that claim would fail; set spec.snapshotTemplate.volumeSnapshotClassName, or mark a class of driver "pd.csi.storage.gke.io" default (annotation snapshot.storage.kubernetes.io/is-default-class: "true")`,
		},
		"a driver with two default classes is a warning": {
			existing:    []any{NewClass("snap-ebs-2", WithDriver(ebs), AsDefault())},
			obj:         db(),
			wantWarning: `driver "ebs.csi.aws.com" of claims "data", "log" has several default VolumeSnapshotClasses ("snap-ebs", "snap-ebs-2"), so snapshots of those claims would fail`,
		},
		"group mode over claims of one driver with its default group class is admitted": {
			obj: db(InGroupMode("-")),
		},
		"group mode with a named group class of the claims' driver is admitted": {
			obj: db(InGroupMode("group-ebs")),
		},
		"group mode over claims not bound yet is admitted": {
			obj: NewSchedule("ns", "nightly", Selecting("app", "late"), InGroupMode("-")),
		},
		"a group class that does not exist is denied": {
			obj:     db(InGroupMode("group-fast")),
			wantErr: `SnapshotSchedule "ns/nightly" names VolumeGroupSnapshotClass "group-fast" in spec.groupSnapshot.volumeGroupSnapshotClassName, which does not exist, so every run would fail: create the class first, or name an existing one (existing: "group-ebs", "group-gce") (field spec.groupSnapshot.volumeGroupSnapshotClassName)`,
		},
		"a group class of another driver is denied": {
			obj:     db(InGroupMode("group-gce")),
			wantErr: `SnapshotSchedule "ns/nightly" names VolumeGroupSnapshotClass "group-gce" of driver "pd.csi.storage.gke.io", but it selects claims "data", "log" of driver "ebs.csi.aws.com", so every group snapshot would fail; name a VolumeGroupSnapshotClass of driver "ebs.csi.aws.com", or change spec.claimSelector so that it selects only claims of driver "pd.csi.storage.gke.io" (field spec.groupSnapshot.volumeGroupSnapshotClassName)`,
		},
		"group mode without a group class is denied": {
			obj:     NewSchedule("ns", "nightly", Selecting("app", "mixed"), InGroupMode("-")),
			wantErr: `SnapshotSchedule "ns/nightly" is in group mode without a group class: it names none, and driver "pd.csi.storage.gke.io" of claim "cache" has no default VolumeGroupSnapshotClass, so every group snapshot would fail; name one in spec.groupSnapshot.volumeGroupSnapshotClassName, or mark a VolumeGroupSnapshotClass of driver "pd.csi.storage.gke.io" default (annotation groupsnapshot.storage.kubernetes.io/is-default-class: "true") (field spec.groupSnapshot.volumeGroupSnapshotClassName)`,
		},
		"group mode with two default group classes is denied": {
			existing: []any{NewGroupClass("group-ebs-2", WithDriver(ebs), AsGroupDefault())},
			obj:      db(InGroupMode("-")),
			wantErr:  `has several default VolumeGroupSnapshotClasses ("group-ebs", "group-ebs-2"), so every group snapshot would fail; name one in spec.groupSnapshot.volumeGroupSnapshotClassName, or keep annotation groupsnapshot.storage.kubernetes.io/is-default-class on only one of them (field spec.groupSnapshot.volumeGroupSnapshotClassName)`,
		},
		"group mode over claims of two drivers is denied": {
			obj:     NewSchedule("ns", "nightly", Selecting("mix", "yes"), InGroupMode("-")),
			wantErr: `SnapshotSchedule "ns/nightly" is in group mode (spec.groupSnapshot) and selects volumes of 2 CSI drivers (claim "data" of driver "ebs.csi.aws.com"; claim "cache" of driver "pd.csi.storage.gke.io"): one driver cuts a group snapshot, so every run would fail; change spec.claimSelector or the claims' labels so that it selects the claims of one driver, or remove spec.groupSnapshot to snapshot each claim on its own (field spec.claimSelector)`,
		},
		"an empty group class name is denied": {
			obj:     db(InGroupMode("")),
			wantErr: `sets spec.groupSnapshot.volumeGroupSnapshotClassName to the empty string: omit the field to use the default group class of the claims' driver, or name a group class (field spec.groupSnapshot.volumeGroupSnapshotClassName)`,
		},
		"a VolumeSnapshotClass in group mode is a warning: it is not used": {
			obj:         db(InGroupMode("-"), WithClass("snap-gce")),
			wantWarning: `SnapshotSchedule "ns/nightly" sets spec.snapshotTemplate.volumeSnapshotClassName "snap-gce", which group mode does not use: group snapshots are cut with the group class of spec.groupSnapshot.volumeGroupSnapshotClassName; remove it`,
		},
		"an update is judged by the rules of a create": {
			obj:     db(Cron("every day")),
			old:     db(),
			wantErr: `has an invalid spec.schedule: "every day"`,
		},
		"an update may change anything, the selector and group mode included": {
			obj: NewSchedule("ns", "nightly", Selecting("app", "late"), InGroupMode("-")),
			old: db(WithClass("snap-ebs")),
		},
		"an update that newly names a missing class is denied": {
			obj:     db(WithClass("snap-gone")),
			old:     db(),
			wantErr: `names VolumeSnapshotClass "snap-gone" in spec.snapshotTemplate.volumeSnapshotClassName, which does not exist`,
		},
		"an update keeps a class deleted since editable": {
			obj: db(WithClass("snap-gone"), Cron("@daily")),
			old: db(WithClass("snap-gone")),
		},
		"a metadata-only update is admitted whatever the spec": {
			obj: db(Cron("every day"), WithLabel("team", "a")),
			old: db(Cron("every day")),
		},
		"a schedule being deleted is admitted whatever it changes": {
			obj: db(Cron("every day"), Deleting()),
			old: db(Deleting()),
		},
	}
	runVerdicts(t, scheduleWorld, Validator.Schedule, tests)
}

// A missing class where none exists says so, instead of listing nothing.
func TestScheduleClassWhereNoneExists(t *testing.T) {
	l := lookupOf(t)
	errs, warnings := Validator{Lookup: l}.Schedule(Create, NewSchedule("ns", "nightly", WithClass("fast")), nil)
	expect(t, errs, warnings, `create the class first, or name an existing one (no VolumeSnapshotClass exists yet)`, "matches no PersistentVolumeClaim")
}

// Validate routes a schedule to its rules, and refuses an old object of
// another kind.
func TestValidateRoutesSchedules(t *testing.T) {
	v := Validator{Lookup: lookupOf(t, scheduleWorld()...)}
	errs, _, err := v.Validate(Create, NewSchedule("ns", "nightly", Selecting("app", "db"), Cron("nope")), nil)
	if err != nil || !strings.Contains(Message(errs), "(field spec.schedule)") {
		t.Errorf("create: %v, %v", Message(errs), err)
	}
	if _, _, err := v.Validate(Update, NewSchedule("ns", "nightly"), NewGroupSnapshot("ns", "nightly")); err == nil {
		t.Error("an old object of another kind was accepted")
	}
}
