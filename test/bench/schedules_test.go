package main

import (
	"strings"
	"testing"
	"time"

	"github.com/snapkeeper/snapkeeper/pkg/schedule"
)

func TestSeededScheduledSnapshotsAreAnHourApartPerClaim(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 17, 0, 0, time.UTC)
	const claims = 4
	seen := map[string][]time.Time{}
	for i := 0; i < 3*claims; i++ {
		vs := seededScheduled(i, claims, at)
		claim := *vs.Spec.Source.PersistentVolumeClaimName
		when, ok := schedule.ScheduledTime(vs.Annotations)
		if !ok || vs.Labels[schedule.LabelSchedule] != benchSchedule {
			t.Fatalf("snapshot %d lacks the schedule's label or time: %v %v", i, vs.Labels, vs.Annotations)
		}
		if vs.Name != schedule.SnapshotName(benchSchedule, claim, when) {
			t.Fatalf("snapshot %d is named %s, not as the schedule names it", i, vs.Name)
		}
		seen[claim] = append(seen[claim], when)
	}
	if len(seen) != claims {
		t.Fatalf("spread over %d claims, want %d", len(seen), claims)
	}
	for claim, times := range seen {
		for j, when := range times {
			if want := at.Add(-time.Duration(j+1) * time.Hour); !when.Equal(want) {
				t.Fatalf("%s: snapshot %d at %s, want %s", claim, j, when, want)
			}
		}
	}
}

func TestCronAtTheNextMinute(t *testing.T) {
	at := nextMinute(15 * time.Second)
	if d := time.Until(at); d < 15*time.Second || d > 76*time.Second || at.Second() != 0 {
		t.Fatalf("nextMinute(15s) = %s, %s away", at, d)
	}
	if got := cronAt(time.Date(2026, 1, 2, 3, 7, 0, 0, time.UTC)); got != "7 * * * *" {
		t.Fatalf("cronAt = %q", got)
	}
}

func TestReportRendersScheduleSection(t *testing.T) {
	ours := &scheduleResult{System: &system{ID: sysOurs, Label: "snapkeeper"}, N: 10, Cron: "5 * * * *", FirstDelete: -1,
		Run1: phase{Duration: 2 * time.Second, Writes: newWriteCounts(), Own: newWriteCounts()},
		Run2: phase{Duration: 3 * time.Second, Writes: newWriteCounts(), Own: newWriteCounts()}}
	seeded := &seededScheduleResult{System: ours.System, Claims: 10, Seeded: 100, KeepLast: 9, Cron: "5 * * * *",
		IdleSyncs: []time.Duration{time.Millisecond, 2 * time.Millisecond}, Window: phase{Writes: newWriteCounts()}}
	r := &report{schedules: []*scheduleResult{ours}, schedSeeded: seeded}
	md := r.markdown()
	for _, want := range []string{"## Snapshot schedules", "One hourly schedule over 10 claims", "over 100 scheduled snapshots", "- Schedules, 10 claims"} {
		if !strings.Contains(md, want) {
			t.Fatalf("report lacks %q", want)
		}
	}
}
