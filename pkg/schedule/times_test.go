package schedule

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/robfig/cron/v3"
)

// runsOnDay lists the scheduled times that fall on a calendar day of the
// schedule's time zone.
func runsOnDay(s *Spec, day string) []time.Time {
	d, err := time.Parse(time.DateOnly, day)
	if err != nil {
		panic(err)
	}
	loc := s.Location()
	var runs []time.Time
	// From two days before: the day before may not exist (Apia, 2011-12-30).
	for ts := s.Next(time.Date(d.Year(), d.Month(), d.Day()-2, 0, 0, 0, 0, loc)); !ts.IsZero(); ts = s.Next(ts) {
		y, m, dd := ts.In(loc).Date()
		on := time.Date(y, m, dd, 0, 0, 0, 0, time.UTC)
		if on.After(d) {
			break
		}
		if on.Equal(d) {
			runs = append(runs, ts)
		}
	}
	return runs
}

func formatUTC(times []time.Time) []string {
	out := []string{}
	for _, ts := range times {
		out = append(out, ts.UTC().Format(time.RFC3339))
	}
	return out
}

// TestDaylightSaving documents what a schedule does on the days a clock
// jumps. A wall-clock time the clock skips is not run that day (as a
// CronJob does not run it); the rest of that day runs. A wall-clock time
// the clock shows twice is run once, at its first showing, by a line that
// names its hours; a line that runs every hour runs every real hour, so no
// instant repeats and the day has as many runs as it has hours.
func TestDaylightSaving(t *testing.T) {
	for name, tc := range map[string]struct {
		line, tz, day string
		// want lists the day's runs as UTC instants, when set.
		want []string
		// count is the number of the day's runs, when want is not set.
		count int
	}{
		"daily 02:30 in Berlin: on the spring-forward day 02:30 does not exist and there is no run": {
			line: "30 2 * * *", tz: "Europe/Berlin", day: "2026-03-29",
			want: []string{},
		},
		"daily 02:30 in Berlin: the day before spring-forward runs at 02:30 CET": {
			line: "30 2 * * *", tz: "Europe/Berlin", day: "2026-03-28",
			want: []string{"2026-03-28T01:30:00Z"},
		},
		"daily 02:30 in Berlin: the day after spring-forward runs at 02:30 CEST": {
			line: "30 2 * * *", tz: "Europe/Berlin", day: "2026-03-30",
			want: []string{"2026-03-30T00:30:00Z"},
		},
		"daily 02:30 in Berlin: on the fall-back day 02:30 shows twice and runs once, at 02:30 CEST": {
			line: "30 2 * * *", tz: "Europe/Berlin", day: "2026-10-25",
			want: []string{"2026-10-25T00:30:00Z"},
		},
		"every 20 minutes of 02:00-02:59 in Berlin: the fall-back day runs the first pass only": {
			line: "*/20 2 * * *", tz: "Europe/Berlin", day: "2026-10-25",
			want: []string{"2026-10-25T00:00:00Z", "2026-10-25T00:20:00Z", "2026-10-25T00:40:00Z"},
		},
		"hourly in Berlin: the spring-forward day has 23 hours and 23 runs": {
			line: "0 * * * *", tz: "Europe/Berlin", day: "2026-03-29", count: 23,
		},
		"hourly in Berlin: the fall-back day has 25 hours and 25 runs, 02:00 CEST and 02:00 CET both": {
			line: "0 * * * *", tz: "Europe/Berlin", day: "2026-10-25", count: 25,
		},
		"hourly in Berlin: a plain day has 24 runs": {
			line: "@hourly", tz: "Europe/Berlin", day: "2026-05-13", count: 24,
		},
		"daily 02:30 in New York: no run on the spring-forward day": {
			line: "30 2 * * *", tz: "America/New_York", day: "2026-03-08",
			want: []string{},
		},
		"daily 01:30 in New York: one run on the fall-back day, at 01:30 EDT": {
			line: "30 1 * * *", tz: "America/New_York", day: "2026-11-01",
			want: []string{"2026-11-01T05:30:00Z"},
		},
		"daily 02:15 on Lord Howe: its clock jumps from 02:00 to 02:30 and skips the run": {
			line: "15 2 * * *", tz: "Australia/Lord_Howe", day: "2026-10-04",
			want: []string{},
		},
		"daily 02:45 on Lord Howe: after the half-hour jump 02:45 exists and runs": {
			line: "45 2 * * *", tz: "Australia/Lord_Howe", day: "2026-10-04",
			want: []string{"2026-10-03T15:45:00Z"},
		},
		"daily 01:45 on Lord Howe: its clock goes back from 02:00 to 01:30 and 01:45 runs once": {
			line: "45 1 * * *", tz: "Australia/Lord_Howe", day: "2026-04-05",
			want: []string{"2026-04-04T14:45:00Z"},
		},
		"every quarter hour on Lord Howe: the half-hour-longer day has 98 runs": {
			line: "*/15 * * * *", tz: "Australia/Lord_Howe", day: "2026-04-05", count: 98,
		},
		"every quarter hour on Lord Howe: the half-hour-shorter day has 94 runs": {
			line: "*/15 * * * *", tz: "Australia/Lord_Howe", day: "2026-10-04", count: 94,
		},
		"daily midnight on Lord Howe: the day after its fall-back runs (the cron library alone skips it)": {
			line: "@daily", tz: "Australia/Lord_Howe", day: "2026-04-06",
			want: []string{"2026-04-05T13:30:00Z"},
		},
		"Sundays 00:00-01:40 in Beirut: midnight is skipped, 01:00 and on run (the cron library alone skips the day)": {
			line: "*/20 0-1 * * 0", tz: "Asia/Beirut", day: "2019-03-31",
			want: []string{"2019-03-30T22:00:00Z", "2019-03-30T22:20:00Z", "2019-03-30T22:40:00Z"},
		},
		"noon in Havana: the day that starts at 01:00 runs at noon": {
			line: "0 12 * * *", tz: "America/Havana", day: "2026-03-08",
			want: []string{"2026-03-08T16:00:00Z"},
		},
		"daily midnight in Havana: on the fall-back day midnight shows twice and runs once": {
			line: "@daily", tz: "America/Havana", day: "2026-11-01",
			want: []string{"2026-11-01T04:00:00Z"},
		},
		"daily in Apia: 2011-12-30 never happened there": {
			line: "0 12 * * *", tz: "Pacific/Apia", day: "2011-12-30",
			want: []string{},
		},
		"daily in Apia: the day after the skipped one runs": {
			line: "0 12 * * *", tz: "Pacific/Apia", day: "2011-12-31",
			want: []string{"2011-12-30T22:00:00Z"},
		},
		"Kolkata has no daylight saving: 24 hourly runs every day": {
			line: "0 * * * *", tz: "Asia/Kolkata", day: "2026-03-29", count: 24,
		},
	} {
		t.Run(name, func(t *testing.T) {
			runs := runsOnDay(mustSpec(t, tc.line, tc.tz), tc.day)
			for i := 1; i < len(runs); i++ {
				if !runs[i].After(runs[i-1]) {
					t.Fatalf("scheduled times do not strictly increase: %v then %v", runs[i-1], runs[i])
				}
			}
			if tc.want != nil {
				if diff := cmp.Diff(tc.want, formatUTC(runs)); diff != "" {
					t.Errorf("runs on %s (-want +got):\n%s", tc.day, diff)
				}
				return
			}
			if len(runs) != tc.count {
				t.Errorf("%d runs on %s, want %d: %v", len(runs), tc.day, tc.count, formatUTC(runs))
			}
		})
	}
}

// TestCronLibraryAlone pins down why Spec.Next asks the cron library only
// about one UTC offset at a time: across zone changes the library alone
// runs a daily job twice, or skips a day. (It also loops forever across a
// skipped calendar day, as Pacific/Apia's 2011-12-30, which no test can
// show without hanging.)
func TestCronLibraryAlone(t *testing.T) {
	for name, tc := range map[string]struct {
		line, tz, from string
		want           []string
	}{
		"it runs a daily 02:30 twice on Berlin's fall-back night": {
			line: "30 2 * * *", tz: "Europe/Berlin", from: "2026-10-24T12:00:00Z",
			want: []string{"2026-10-25T00:30:00Z", "2026-10-25T01:30:00Z", "2026-10-26T01:30:00Z"},
		},
		"it skips the midnight after Lord Howe's half-hour fall-back": {
			line: "@daily", tz: "Australia/Lord_Howe", from: "2026-04-04T12:00:00Z",
			want: []string{"2026-04-04T13:00:00Z", "2026-04-06T13:30:00Z"},
		},
		"it skips a day whose midnight does not exist, noon included": {
			line: "0 12 31 * *", tz: "Asia/Beirut", from: "2019-02-01T00:00:00Z",
			want: []string{"2019-05-31T09:00:00Z"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			raw, err := cron.ParseStandard(tc.line)
			if err != nil {
				t.Fatal(err)
			}
			ts := isoUTC(t, tc.from).In(mustZone(t, tc.tz))
			var got []time.Time
			for range tc.want {
				ts = raw.Next(ts)
				got = append(got, ts)
			}
			if diff := cmp.Diff(tc.want, formatUTC(got)); diff != "" {
				t.Errorf("the cron library's times changed (-want +got):\n%s", diff)
			}
		})
	}
}

func deadlineOf(d time.Duration) *time.Duration { return &d }

func TestDue(t *testing.T) {
	type want struct {
		run    string // "" when nothing is due
		missed int64
		next   string
	}
	for name, tc := range map[string]struct {
		line, tz  string
		last, now string
		deadline  *time.Duration
		want      want
	}{
		"never ran, created between two times: nothing is due yet": {
			line: "@hourly", last: "2026-05-13T10:17:00Z", now: "2026-05-13T10:59:59Z",
			want: want{next: "2026-05-13T11:00:00Z"},
		},
		"never ran, the first time comes: it runs": {
			line: "@hourly", last: "2026-05-13T10:17:00Z", now: "2026-05-13T11:00:00Z",
			want: want{run: "2026-05-13T11:00:00Z", next: "2026-05-13T12:00:00Z"},
		},
		"exactly on the scheduled time: it runs": {
			line: "@hourly", last: "2026-05-13T10:00:00Z", now: "2026-05-13T11:00:00Z",
			want: want{run: "2026-05-13T11:00:00Z", next: "2026-05-13T12:00:00Z"},
		},
		"right after a run: nothing is due again": {
			line: "@hourly", last: "2026-05-13T11:00:00Z", now: "2026-05-13T11:00:00Z",
			want: want{next: "2026-05-13T12:00:00Z"},
		},
		"late within the hour: the time runs late": {
			line: "@hourly", last: "2026-05-13T10:00:00Z", now: "2026-05-13T11:40:00Z",
			want: want{run: "2026-05-13T11:00:00Z", next: "2026-05-13T12:00:00Z"},
		},
		"one missed time: the latest runs, the one before is missed": {
			line: "@hourly", last: "2026-05-13T09:00:00Z", now: "2026-05-13T11:30:00Z",
			want: want{run: "2026-05-13T11:00:00Z", missed: 1, next: "2026-05-13T12:00:00Z"},
		},
		"many missed, no deadline: the latest runs": {
			line: "@hourly", last: "2026-05-12T00:00:00Z", now: "2026-05-13T10:30:00Z",
			want: want{run: "2026-05-13T10:00:00Z", missed: 33, next: "2026-05-13T11:00:00Z"},
		},
		"many missed, within the deadline: the latest runs": {
			line: "@hourly", last: "2026-05-12T00:00:00Z", now: "2026-05-13T10:30:00Z", deadline: deadlineOf(time.Hour),
			want: want{run: "2026-05-13T10:00:00Z", missed: 33, next: "2026-05-13T11:00:00Z"},
		},
		"many missed, past the deadline: all are missed": {
			line: "@hourly", last: "2026-05-12T00:00:00Z", now: "2026-05-13T10:30:00Z", deadline: deadlineOf(10 * time.Minute),
			want: want{missed: 34, next: "2026-05-13T11:00:00Z"},
		},
		"exactly at the deadline: it runs": {
			line: "@hourly", last: "2026-05-12T00:00:00Z", now: "2026-05-13T10:30:00Z", deadline: deadlineOf(30 * time.Minute),
			want: want{run: "2026-05-13T10:00:00Z", missed: 33, next: "2026-05-13T11:00:00Z"},
		},
		"one second past the deadline: it is missed": {
			line: "@hourly", last: "2026-05-12T00:00:00Z", now: "2026-05-13T10:30:01Z", deadline: deadlineOf(30 * time.Minute),
			want: want{missed: 34, next: "2026-05-13T11:00:00Z"},
		},
		"a zero deadline, on the dot: it runs": {
			line: "@hourly", last: "2026-05-13T09:00:00Z", now: "2026-05-13T10:00:00Z", deadline: deadlineOf(0),
			want: want{run: "2026-05-13T10:00:00Z", next: "2026-05-13T11:00:00Z"},
		},
		"a zero deadline, a second late: it is missed": {
			line: "@hourly", last: "2026-05-13T09:00:00Z", now: "2026-05-13T10:00:01Z", deadline: deadlineOf(0),
			want: want{missed: 1, next: "2026-05-13T11:00:00Z"},
		},
		"the clock went back: nothing is due, and the next time is after last": {
			line: "@hourly", last: "2026-05-13T11:00:00Z", now: "2026-05-13T10:30:00Z",
			want: want{next: "2026-05-13T12:00:00Z"},
		},
		"the clock went back a day: nothing is due or missed": {
			line: "@hourly", last: "2026-05-13T11:00:00Z", now: "2026-05-12T10:30:00Z",
			want: want{next: "2026-05-13T12:00:00Z"},
		},
		"daily 02:30 in Berlin, down over the spring-forward day: that day had no time to miss": {
			line: "30 2 * * *", tz: "Europe/Berlin", last: "2026-03-28T01:30:00Z", now: "2026-03-30T12:00:00Z",
			want: want{run: "2026-03-30T00:30:00Z", next: "2026-03-31T00:30:00Z"},
		},
		"daily 02:30 in Berlin, over the fall-back day: one time that day": {
			line: "30 2 * * *", tz: "Europe/Berlin", last: "2026-10-24T00:30:00Z", now: "2026-10-26T12:00:00Z",
			want: want{run: "2026-10-26T01:30:00Z", missed: 1, next: "2026-10-27T01:30:00Z"},
		},
		"monthly in New York, down for three months: the times follow the offset": {
			line: "@monthly", tz: "America/New_York", last: "2026-01-01T05:00:00Z", now: "2026-04-15T00:00:00Z",
			want: want{run: "2026-04-01T04:00:00Z", missed: 2, next: "2026-05-01T04:00:00Z"},
		},
		"daily 01:45 on Lord Howe over its fall-back: the second 01:45 is neither run nor missed": {
			line: "45 1 * * *", tz: "Australia/Lord_Howe", last: "2026-04-03T14:45:00Z", now: "2026-04-05T12:00:00Z",
			want: want{run: "2026-04-04T14:45:00Z", next: "2026-04-05T15:15:00Z"},
		},
		"yearly, down for years: the latest runs": {
			line: "@yearly", last: "2020-01-01T00:00:00Z", now: "2026-05-13T00:00:00Z",
			want: want{run: "2026-01-01T00:00:00Z", missed: 5, next: "2027-01-01T00:00:00Z"},
		},
		"29 February, down over a leap day: it runs late": {
			line: "0 0 29 2 *", last: "2024-02-29T00:00:00Z", now: "2028-03-01T00:00:00Z",
			want: want{run: "2028-02-29T00:00:00Z", next: "2032-02-29T00:00:00Z"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := mustSpec(t, tc.line, tc.tz)
			d := s.Due(isoUTC(t, tc.last), isoUTC(t, tc.now), tc.deadline)
			got := want{missed: d.Missed, next: d.Next.UTC().Format(time.RFC3339)}
			if !d.Run.IsZero() {
				got.run = d.Run.UTC().Format(time.RFC3339)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("Due (-want +got):\n%s", diff)
			}
			// Latest is the run when there is one; when every time is
			// missed it is the newest of them, which the controller
			// records so that the next look does not count them again.
			switch {
			case !d.Run.IsZero() && !d.Latest.Equal(d.Run):
				t.Errorf("Latest %v, want the run %v", d.Latest, d.Run)
			case d.Run.IsZero() && d.Missed > 0:
				if d.Latest.IsZero() || d.Latest.After(isoUTC(t, tc.now)) || s.Due(d.Latest, isoUTC(t, tc.now), tc.deadline).Missed != 0 {
					t.Errorf("Latest %v: not the newest missed time before %s", d.Latest, tc.now)
				}
			case d.Run.IsZero() && d.Missed == 0 && !d.Latest.IsZero():
				t.Errorf("Latest %v with nothing run or missed", d.Latest)
			}
		})
	}
}

// TestDueAfterAYearDown: every minute of a year is a scheduled time of a
// minutely line, whatever the zone's clock changes, and deciding it must
// not walk them one by one.
func TestDueAfterAYearDown(t *testing.T) {
	last := isoUTC(t, "2025-05-13T10:00:00Z")
	now := isoUTC(t, "2026-05-13T10:00:30Z")
	for name, tc := range map[string]struct {
		line, tz string
		missed   int64
	}{
		"minutely in UTC":                 {line: "* * * * *", missed: 365*24*60 - 1},
		"minutely in Berlin":              {line: "* * * * *", tz: "Europe/Berlin", missed: 365*24*60 - 1},
		"minutely in New York":            {line: "* * * * *", tz: "America/New_York", missed: 365*24*60 - 1},
		"minutely on Lord Howe":           {line: "* * * * *", tz: "Australia/Lord_Howe", missed: 365*24*60 - 1},
		"every five minutes in Kolkata":   {line: "*/5 * * * *", tz: "Asia/Kolkata", missed: 365*24*12 - 1},
		"every 10 minutes of 10:00-10:59": {line: "*/10 10 * * *", missed: 365*6 - 1},
	} {
		t.Run(name, func(t *testing.T) {
			s := mustSpec(t, tc.line, tc.tz)
			d := s.Due(last, now, nil)
			if !d.Run.Equal(isoUTC(t, "2026-05-13T10:00:00Z")) || d.Missed != tc.missed {
				t.Errorf("Due = run %v, missed %d; want run 2026-05-13T10:00:00Z, missed %d", d.Run, d.Missed, tc.missed)
			}
		})
	}
	t.Run("daily 02:30 in Berlin misses no spring-forward day it never had", func(t *testing.T) {
		s := mustSpec(t, "30 2 * * *", "Europe/Berlin")
		d := s.Due(isoUTC(t, "2025-05-13T00:30:00Z"), isoUTC(t, "2026-05-13T00:30:00Z"), nil)
		// 365 days, less 2026-03-29; the fall-back day counts once.
		if !d.Run.Equal(isoUTC(t, "2026-05-13T00:30:00Z")) || d.Missed != 363 {
			t.Errorf("Due = run %v, missed %d; want run 2026-05-13T00:30:00Z, missed 363", d.Run, d.Missed)
		}
	})
}

func TestDueStopsCountingAtTheBound(t *testing.T) {
	s := mustSpec(t, "* * * * *", "Europe/Berlin")
	last := isoUTC(t, "2023-01-01T00:00:00Z")
	now := isoUTC(t, "2026-01-01T00:00:30Z")
	latest := isoUTC(t, "2026-01-01T00:00:00Z")

	d := s.Due(last, now, nil)
	if !d.Run.Equal(latest) || d.Missed != maxCandidates {
		t.Errorf("three years of minutes: Due = run %v, missed %d; want run %v, missed %d (the bound)", d.Run, d.Missed, latest, maxCandidates)
	}
	d = s.Due(last, now, deadlineOf(10*time.Second))
	if !d.Run.IsZero() || d.Missed != maxCandidates+1 {
		t.Errorf("past the deadline: Due = run %v, missed %d; want no run, missed %d", d.Run, d.Missed, maxCandidates+1)
	}
	d = s.Due(time.Time{}, now, nil)
	if !d.Run.Equal(latest) || d.Missed != maxCandidates {
		t.Errorf("from the zero time: Due = run %v, missed %d; want run %v, missed %d", d.Run, d.Missed, latest, maxCandidates)
	}

	for name, tc := range map[string]struct{ line, tz, last, now string }{
		"hourly for a week":                  {line: "@hourly", last: "2026-05-01T00:00:00Z", now: "2026-05-08T00:30:00Z"},
		"weekdays at noon in New York":       {line: "0 12 * * 1-5", tz: "America/New_York", last: "2025-01-01T00:00:00Z", now: "2026-05-13T20:00:00Z"},
		"a burst on the first of the month":  {line: "* 0 1 * *", last: "2026-01-01T00:00:00Z", now: "2026-05-20T00:00:00Z"},
		"every 10 minutes in Lord Howe":      {line: "*/10 * * * *", tz: "Australia/Lord_Howe", last: "2026-03-01T00:00:00Z", now: "2026-04-10T00:00:00Z"},
		"daily 02:30 in Berlin over October": {line: "30 2 * * *", tz: "Europe/Berlin", last: "2026-07-01T00:00:00Z", now: "2026-11-01T00:00:00Z"},
	} {
		t.Run(name, func(t *testing.T) {
			s := mustSpec(t, tc.line, tc.tz)
			last, now := isoUTC(t, tc.last), isoUTC(t, tc.now)
			full := s.due(last, now, nil, maxCandidates)
			if full.Missed <= 50 {
				t.Fatalf("the case misses only %d times; it must exceed the bound of 50", full.Missed)
			}
			bounded := s.due(last, now, nil, 50)
			if !bounded.Run.Equal(full.Run) || bounded.Missed != 50 || !bounded.Next.Equal(full.Next) {
				t.Errorf("bounded Due = %+v, want run %v, missed 50, next %v", bounded, full.Run, full.Next)
			}
		})
	}
}

func TestDueOfAScheduleThatNeverRuns(t *testing.T) {
	// Parse refuses such a line; a Spec built around it must still answer
	// sanely.
	raw, err := cron.ParseStandard("0 0 30 2 *")
	if err != nil {
		t.Fatal(err)
	}
	s := &Spec{cron: raw.(*cron.SpecSchedule), loc: time.UTC, once: true}
	now := isoUTC(t, "2026-05-13T10:00:00Z")
	d := s.Due(isoUTC(t, "2020-01-01T00:00:00Z"), now, nil)
	if d != (Due{}) {
		t.Errorf("Due = %+v, want nothing due and no next time", d)
	}
	if ts := s.NextTimes(now, 3); len(ts) != 0 {
		t.Errorf("NextTimes = %v, want none", ts)
	}
}

func TestNextTimes(t *testing.T) {
	s := mustSpec(t, "0 */6 * * *", "")
	from := isoUTC(t, "2026-05-13T10:17:00Z")
	want := []string{"2026-05-13T12:00:00Z", "2026-05-13T18:00:00Z", "2026-05-14T00:00:00Z"}
	if diff := cmp.Diff(want, formatUTC(s.NextTimes(from, 3))); diff != "" {
		t.Errorf("NextTimes (-want +got):\n%s", diff)
	}
	if ts := s.NextTimes(from, 0); len(ts) != 0 {
		t.Errorf("NextTimes(0) = %v, want none", ts)
	}
}

// TestCountingAgreesWithWalking checks the shortcuts of Due (whole days
// counted from the cron fields, the latest time found looking back from
// now) against walking every scheduled time, around zone changes of many
// kinds: daylight saving at 02:00 and at midnight, half-hour shifts, a
// skipped calendar day, and zones without any.
func TestCountingAgreesWithWalking(t *testing.T) {
	zones := []string{
		"UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata", "Australia/Lord_Howe",
		"America/Sao_Paulo", "America/Havana", "America/Santiago", "Asia/Beirut", "Africa/Casablanca",
		"Pacific/Apia",
	}
	lines := map[string]time.Duration{ // the line and how far around a zone change to look
		"* * * * *":          30 * time.Hour,
		"*/7 * * * *":        4 * 24 * time.Hour,
		"0 * * * *":          20 * 24 * time.Hour,
		"30 2 * * *":         60 * 24 * time.Hour,
		"15,45 0-3 * * *":    30 * 24 * time.Hour,
		"@daily":             60 * 24 * time.Hour,
		"*/20 0-1 * * 0":     60 * 24 * time.Hour,
		"0 0 13 * 5":         90 * 24 * time.Hour,
		"0 12 31 * *":        120 * 24 * time.Hour,
		"30 23 * 3,4,10 1-5": 60 * 24 * time.Hour,
	}
	rng := rand.New(rand.NewPCG(7, 11))
	walkCount := func(s *Spec, after, before time.Time) int64 {
		var n int64
		for ts := s.Next(after); !ts.IsZero() && ts.Before(before); ts = s.Next(ts) {
			n++
		}
		return n
	}
	from, to := time.Date(2012, 1, 1, 0, 0, 0, 0, time.UTC).Unix(), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	for _, tz := range zones {
		loc := mustZone(t, tz)
		// The zone changes after a few fixed dates (Apia skipped
		// 2011-12-30; Sao Paulo set its clock forward and back at midnight
		// until 2019) and random ones.
		bases := []time.Time{
			time.Date(2011, 12, 25, 0, 0, 0, 0, time.UTC),
			time.Date(2018, 11, 1, 0, 0, 0, 0, time.UTC),
			time.Date(2019, 2, 10, 0, 0, 0, 0, time.UTC),
		}
		for range 3 {
			bases = append(bases, time.Unix(from+rng.Int64N(to-from), 0))
		}
		var anchors []time.Time
		for _, b := range bases {
			if _, end := b.In(loc).ZoneBounds(); !end.IsZero() {
				b = end
			}
			anchors = append(anchors, b)
		}
		for line, around := range lines {
			s := mustSpec(t, line, tz)
			for _, anchor := range anchors {
				after := anchor.Add(-time.Duration(rng.Int64N(int64(around)))).Truncate(time.Second)
				now := anchor.Add(time.Duration(rng.Int64N(int64(around)))).Truncate(time.Second)
				var latest time.Time
				var missed int64
				for ts := s.Next(after); !ts.IsZero() && !ts.After(now); ts = s.Next(ts) {
					if !latest.IsZero() {
						missed++
					}
					latest = ts
				}
				d := s.Due(after, now, nil)
				if !d.Run.Equal(latest) || d.Missed != missed {
					t.Errorf("%s in %s from %v to %v: Due = run %v, missed %d; walking finds run %v, missed %d",
						line, tz, after, now, d.Run, d.Missed, latest, missed)
				}
				if n, want := s.count(after, now, maxCandidates), walkCount(s, after, now); n != want {
					t.Errorf("%s in %s: count(%v, %v) = %d, walking finds %d", line, tz, after, now, n, want)
				}
			}
		}
	}
}

// TestNextAgreesWithEveryMinute checks Next against its definition, minute
// by minute around zone changes: an instant is a scheduled time when its
// wall-clock time matches the line, except the second showing of a
// wall-clock time when the line names its hours.
func TestNextAgreesWithEveryMinute(t *testing.T) {
	zones := []string{
		"Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "America/Sao_Paulo",
		"America/Havana", "America/Santiago", "Asia/Beirut", "Pacific/Apia", "Pacific/Chatham", "Asia/Kolkata",
	}
	lines := []string{"*/15 * * * *", "30 2 * * *", "*/20 0-2 * * *", "0 0 * * *", "45 1 * * *", "*/30 23 * * *", "0 * 31 3 *", "10 0-3 * * 0"}
	rng := rand.New(rand.NewPCG(3, 5))
	from, to := time.Date(2012, 1, 1, 0, 0, 0, 0, time.UTC).Unix(), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	for _, tz := range zones {
		loc := mustZone(t, tz)
		bases := []time.Time{time.Date(2011, 12, 25, 0, 0, 0, 0, time.UTC), time.Date(2019, 2, 10, 0, 0, 0, 0, time.UTC)}
		for range 2 {
			bases = append(bases, time.Unix(from+rng.Int64N(to-from), 0))
		}
		for _, line := range lines {
			s := mustSpec(t, line, tz)
			c := s.cron
			for _, b := range bases {
				if _, end := b.In(loc).ZoneBounds(); !end.IsZero() {
					b = end
				}
				start := b.Add(-26 * time.Hour).Truncate(time.Minute)
				var want []time.Time
				for m := start.Add(time.Minute); m.Before(b.Add(26 * time.Hour)); m = m.Add(time.Minute) {
					w := m.In(loc)
					if c.Minute&(1<<uint(w.Minute())) == 0 || c.Hour&(1<<uint(w.Hour())) == 0 ||
						c.Month&(1<<uint(w.Month())) == 0 || !dayMatches(c.Dom, c.Dow, w) {
						continue
					}
					if s.once && repeated(w) {
						continue
					}
					want = append(want, w)
				}
				var got []time.Time
				for ts := s.Next(start); !ts.IsZero() && ts.Before(b.Add(26*time.Hour)); ts = s.Next(ts) {
					got = append(got, ts)
				}
				if diff := cmp.Diff(formatUTC(want), formatUTC(got)); diff != "" {
					t.Errorf("%s in %s around %v (-every minute +Next):\n%s", line, tz, b, diff)
				}
			}
		}
	}
}
