package schedule

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation"
)

func TestSnapshotName(t *testing.T) {
	at := time.Date(2026, 5, 13, 2, 30, 45, 0, time.UTC)
	schedule63 := strings.Repeat("s", 63)
	for name, tc := range map[string]struct {
		schedule, claim string
		at              time.Time
		want            string
		// wantPrefix, when want is not set: the name starts so, then comes
		// the hash of the claim and the time.
		wantPrefix string
	}{
		"short names are joined as they are": {
			schedule: "nightly", claim: "data-db-0", at: at,
			want: "nightly-data-db-0-202605130230",
		},
		"the time is named in UTC, to the minute": {
			schedule: "nightly", claim: "data", at: time.Date(2026, 5, 13, 4, 30, 59, 999, mustZone(t, "Europe/Berlin")),
			want: "nightly-data-202605130230",
		},
		"dots in names are kept": {
			schedule: "team.nightly", claim: "db.data", at: at,
			want: "team.nightly-db.data-202605130230",
		},
		"a claim that just fits is not shortened": {
			schedule: schedule63, claim: strings.Repeat("c", 253-63-1-13), at: at,
			want: schedule63 + "-" + strings.Repeat("c", 176) + "-202605130230",
		},
		"a claim one longer is shortened and hashed": {
			schedule: schedule63, claim: strings.Repeat("c", 177), at: at,
			wantPrefix: schedule63 + "-" + strings.Repeat("c", 167) + "-",
		},
		"a 253-character claim is shortened and hashed": {
			schedule: "nightly", claim: strings.Repeat("c", 253), at: at,
			wantPrefix: "nightly-" + strings.Repeat("c", 253-len("nightly-")-len("-202605130230")-len("-12345678")) + "-",
		},
		"a shortened claim does not end in a dot before the hash's hyphen": {
			schedule: schedule63, claim: strings.Repeat("c", 166) + "." + strings.Repeat("d", 60), at: at,
			wantPrefix: schedule63 + "-" + strings.Repeat("c", 166) + "-",
		},
		"a shortened claim does not end in hyphens": {
			schedule: schedule63, claim: strings.Repeat("c", 165) + "--" + strings.Repeat("d", 60), at: at,
			wantPrefix: schedule63 + "-" + strings.Repeat("c", 165) + "-",
		},
		"a shortened claim cut after a dot and hyphen ends on a letter": {
			schedule: schedule63, claim: strings.Repeat("c", 164) + "-.-" + strings.Repeat("d", 60), at: at,
			wantPrefix: schedule63 + "-" + strings.Repeat("c", 164) + "-",
		},
	} {
		t.Run(name, func(t *testing.T) {
			got := SnapshotName(tc.schedule, tc.claim, tc.at)
			if errs := validation.IsDNS1123Subdomain(got); len(errs) != 0 {
				t.Errorf("SnapshotName = %q, not a DNS subdomain: %v", got, errs)
			}
			if tc.want != "" && got != tc.want {
				t.Errorf("SnapshotName = %q, want %q", got, tc.want)
			}
			if tc.wantPrefix != "" {
				rest, ok := strings.CutPrefix(got, tc.wantPrefix)
				if !ok || len(rest) != 8+1+12 || len(got) > 253 {
					t.Errorf("SnapshotName = %q (%d characters), want %q, then 8 hex characters and the time", got, len(got), tc.wantPrefix)
				}
			}
			if again := SnapshotName(tc.schedule, tc.claim, tc.at); again != got {
				t.Errorf("SnapshotName is not deterministic: %q then %q", got, again)
			}
		})
	}
}

func TestSnapshotNameKeepsLongClaimsApart(t *testing.T) {
	at := time.Date(2026, 5, 13, 2, 30, 0, 0, time.UTC)
	prefix := strings.Repeat("data.", 49) // 245 characters
	seen := map[string]string{}
	for _, schedule := range []string{"n", strings.Repeat("s", 63)} {
		for _, claim := range []string{prefix + "one", prefix + "two", prefix + "three", prefix + "on", strings.Repeat("x", 253), strings.Repeat("x", 252)} {
			got := SnapshotName(schedule, claim, at)
			if errs := validation.IsDNS1123Subdomain(got); len(errs) != 0 {
				t.Errorf("SnapshotName(%q, %q) = %q, not a DNS subdomain: %v", schedule, claim, got, errs)
			}
			if other, dup := seen[got]; dup {
				t.Errorf("claims %q and %q share the name %q", other, claim, got)
			}
			seen[got] = claim
		}
	}
}

func TestSnapshotNameDistinguishesTimes(t *testing.T) {
	berlin := mustZone(t, "Europe/Berlin")
	// The two 02:30s of a fall-back night are an hour apart in UTC.
	first := time.Date(2026, 10, 25, 0, 30, 0, 0, time.UTC).In(berlin)
	second := first.Add(time.Hour)
	if first.Format("15:04") != second.Format("15:04") {
		t.Fatalf("%v and %v should show the same wall-clock time", first, second)
	}
	if a, b := SnapshotName("s", "c", first), SnapshotName("s", "c", second); a == b {
		t.Errorf("both 02:30s are named %q", a)
	}
	if a, b := SnapshotName("s", "c", first), SnapshotName("s", "c", first.Add(59*time.Second)); a != b {
		t.Errorf("one minute has two names: %q and %q", a, b)
	}
}

func FuzzSnapshotName(f *testing.F) {
	f.Add("nightly", "data-db-0", int64(1778639400))
	f.Add(strings.Repeat("s", 63), strings.Repeat("c", 253), int64(0))
	f.Add("a", strings.Repeat("c", 166)+"."+strings.Repeat("d", 60), int64(253402300799))
	f.Add(strings.Repeat("s", 63), strings.Repeat("c", 165)+"-.-"+strings.Repeat("d", 60), int64(-1))
	f.Fuzz(func(t *testing.T, schedule, claim string, sec int64) {
		if len(schedule) > 63 || len(validation.IsDNS1123Subdomain(schedule)) != 0 || len(validation.IsDNS1123Subdomain(claim)) != 0 {
			t.Skip()
		}
		// Times from 1970 to the end of year 9999, whose years have four digits.
		const end = 253402300800
		at := time.Unix((sec%end+end)%end, 0)
		got := SnapshotName(schedule, claim, at)
		if errs := validation.IsDNS1123Subdomain(got); len(errs) != 0 {
			t.Fatalf("SnapshotName(%q, %q, %v) = %q, not a DNS subdomain: %v", schedule, claim, at, got, errs)
		}
		if again := SnapshotName(schedule, claim, at); again != got {
			t.Fatalf("SnapshotName is not deterministic: %q then %q", got, again)
		}
		suffix := "-" + at.UTC().Format("200601021504")
		if !strings.HasPrefix(got, schedule+"-") || !strings.HasSuffix(got, suffix) {
			t.Fatalf("SnapshotName(%q, %q, %v) = %q: the schedule or the time is lost", schedule, claim, at, got)
		}
		if full := schedule + "-" + claim + suffix; len(full) <= 253 && got != full {
			t.Fatalf("SnapshotName = %q, want the unshortened %q", got, full)
		}
	})
}

func TestGroupName(t *testing.T) {
	got := GroupName("nightly", time.Date(2026, 5, 13, 4, 30, 0, 0, mustZone(t, "Europe/Berlin")))
	if got != "nightly-202605130230" {
		t.Errorf("GroupName = %q, want nightly-202605130230", got)
	}
	if errs := validation.IsDNS1123Subdomain(GroupName(strings.Repeat("s", 63), time.Now())); len(errs) != 0 {
		t.Errorf("a group name of a 63-character schedule is no DNS subdomain: %v", errs)
	}
}

func TestLabels(t *testing.T) {
	for name, tc := range map[string]struct {
		template        map[string]string
		schedule, claim string
		want            map[string]string
	}{
		"no template: the schedule's labels only": {
			schedule: "nightly", claim: "data",
			want: map[string]string{LabelSchedule: "nightly", LabelClaim: "data"},
		},
		"the template's labels are kept": {
			template: map[string]string{"team": "db", "tier": "gold"}, schedule: "nightly", claim: "data",
			want: map[string]string{"team": "db", "tier": "gold", LabelSchedule: "nightly", LabelClaim: "data"},
		},
		"the schedule's labels win over the template's": {
			template: map[string]string{LabelSchedule: "other", LabelClaim: "other", "team": "db"}, schedule: "nightly", claim: "data",
			want: map[string]string{"team": "db", LabelSchedule: "nightly", LabelClaim: "data"},
		},
		"a claim of 63 characters is a label value": {
			schedule: "nightly", claim: strings.Repeat("c", 63),
			want: map[string]string{LabelSchedule: "nightly", LabelClaim: strings.Repeat("c", 63)},
		},
		"a claim of 64 characters is no label value: no claim label": {
			schedule: "nightly", claim: strings.Repeat("c", 64),
			want: map[string]string{LabelSchedule: "nightly"},
		},
		"a long claim drops a template's claim label, which would name another claim": {
			template: map[string]string{LabelClaim: "other"}, schedule: "nightly", claim: strings.Repeat("c", 64),
			want: map[string]string{LabelSchedule: "nightly"},
		},
		"a group snapshot has no claim label, even from the template": {
			template: map[string]string{LabelClaim: "other", "team": "db"}, schedule: "nightly",
			want: map[string]string{LabelSchedule: "nightly", "team": "db"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			before := maps.Clone(tc.template)
			got := Labels(tc.template, tc.schedule, tc.claim)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Labels (-want +got):\n%s", diff)
			}
			if !maps.Equal(before, tc.template) {
				t.Errorf("Labels changed the template: %v, was %v", tc.template, before)
			}
			for k, v := range got {
				if errs := validation.IsValidLabelValue(v); len(errs) != 0 {
					t.Errorf("label %s=%q is no valid label value: %v", k, v, errs)
				}
			}
		})
	}
}

func TestAnnotations(t *testing.T) {
	at := time.Date(2026, 5, 13, 4, 30, 0, 0, mustZone(t, "Europe/Berlin"))
	for name, tc := range map[string]struct {
		template map[string]string
		want     map[string]string
	}{
		"no template": {
			want: map[string]string{AnnScheduledTime: "2026-05-13T02:30:00Z"},
		},
		"the template's annotations are kept": {
			template: map[string]string{"owner": "db-team"},
			want:     map[string]string{"owner": "db-team", AnnScheduledTime: "2026-05-13T02:30:00Z"},
		},
		"the scheduled time wins over the template's": {
			template: map[string]string{AnnScheduledTime: "1999-12-31T23:59:00Z", "owner": "db-team"},
			want:     map[string]string{"owner": "db-team", AnnScheduledTime: "2026-05-13T02:30:00Z"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			before := maps.Clone(tc.template)
			got := Annotations(tc.template, at)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Annotations (-want +got):\n%s", diff)
			}
			if !maps.Equal(before, tc.template) {
				t.Errorf("Annotations changed the template: %v, was %v", tc.template, before)
			}
		})
	}
}

func TestScheduledTime(t *testing.T) {
	at := time.Date(2026, 5, 13, 2, 30, 0, 0, time.UTC)
	for name, tc := range map[string]struct {
		annotations map[string]string
		want        time.Time
		ok          bool
	}{
		"written by Annotations": {
			annotations: Annotations(nil, at.In(mustZone(t, "Asia/Kolkata"))), want: at, ok: true,
		},
		"with an offset, read as the same instant": {
			annotations: map[string]string{AnnScheduledTime: "2026-05-13T04:30:00+02:00"}, want: at, ok: true,
		},
		"absent": {
			annotations: map[string]string{"other": "2026-05-13T02:30:00Z"},
		},
		"no annotations at all": {},
		"unparsable": {
			annotations: map[string]string{AnnScheduledTime: "yesterday"},
		},
		"without a zone": {
			annotations: map[string]string{AnnScheduledTime: "2026-05-13T02:30:00"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, ok := ScheduledTime(tc.annotations)
			if ok != tc.ok || !got.Equal(tc.want) {
				t.Errorf("ScheduledTime = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
			if ok && got.Location() != time.UTC {
				t.Errorf("ScheduledTime = %v, want it in UTC", got)
			}
		})
	}
}
