package schedule

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// mustSpec parses a line the test knows to be valid.
func mustSpec(t testing.TB, line, tz string) *Spec {
	t.Helper()
	s, err := Parse(line, tz)
	if err != nil {
		t.Fatalf("Parse(%q, %q): %v", line, tz, err)
	}
	return s
}

// mustZone loads a zone the test knows to exist.
func mustZone(t testing.TB, tz string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(tz)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// isoUTC reads an RFC 3339 time the test knows to be valid.
func isoUTC(t testing.TB, v string) time.Time {
	t.Helper()
	ts, err := time.Parse(time.RFC3339, v)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func TestParseNextTimes(t *testing.T) {
	for name, tc := range map[string]struct {
		line, tz string
		from     string
		// want are the next scheduled times, as RFC 3339 instants.
		want []string
	}{
		"@hourly runs at the top of every hour": {
			line: "@hourly", from: "2026-05-13T10:17:00Z",
			want: []string{"2026-05-13T11:00:00Z", "2026-05-13T12:00:00Z"},
		},
		"@daily runs at midnight": {
			line: "@daily", from: "2026-05-13T10:17:00Z",
			want: []string{"2026-05-14T00:00:00Z", "2026-05-15T00:00:00Z"},
		},
		"@midnight is @daily": {
			line: "@midnight", from: "2026-05-13T10:17:00Z",
			want: []string{"2026-05-14T00:00:00Z", "2026-05-15T00:00:00Z"},
		},
		"@weekly runs at midnight between Saturday and Sunday": {
			line: "@weekly", from: "2026-05-13T10:17:00Z",
			want: []string{"2026-05-17T00:00:00Z", "2026-05-24T00:00:00Z"},
		},
		"@monthly runs at midnight of the first": {
			line: "@monthly", from: "2026-05-13T10:17:00Z",
			want: []string{"2026-06-01T00:00:00Z", "2026-07-01T00:00:00Z"},
		},
		"@yearly runs at midnight of the first of January": {
			line: "@yearly", from: "2026-05-13T10:17:00Z",
			want: []string{"2027-01-01T00:00:00Z", "2028-01-01T00:00:00Z"},
		},
		"@annually is @yearly": {
			line: "@annually", from: "2026-05-13T10:17:00Z",
			want: []string{"2027-01-01T00:00:00Z", "2028-01-01T00:00:00Z"},
		},
		"five fields with steps, ranges and weekdays": {
			line: "*/20 17-18 * * 1-5", from: "2026-05-15T17:30:00Z", // a Friday
			want: []string{"2026-05-15T17:40:00Z", "2026-05-15T18:00:00Z", "2026-05-15T18:20:00Z", "2026-05-15T18:40:00Z", "2026-05-18T17:00:00Z"},
		},
		"five fields with lists": {
			line: "5,35 3 * * *", from: "2026-05-13T03:10:00Z",
			want: []string{"2026-05-13T03:35:00Z", "2026-05-14T03:05:00Z"},
		},
		"a restricted day of month and day of week run on either, as cron does": {
			line: "0 0 13 * 5", from: "2026-05-13T10:17:00Z", // Wednesday the 13th
			want: []string{"2026-05-15T00:00:00Z", "2026-05-22T00:00:00Z", "2026-05-29T00:00:00Z", "2026-06-05T00:00:00Z", "2026-06-12T00:00:00Z", "2026-06-13T00:00:00Z"},
		},
		"the 31st skips the months of 30 days and February": {
			line: "0 0 31 * *", from: "2026-01-31T00:00:00Z",
			want: []string{"2026-03-31T00:00:00Z", "2026-05-31T00:00:00Z", "2026-07-31T00:00:00Z", "2026-08-31T00:00:00Z", "2026-10-31T00:00:00Z", "2026-12-31T00:00:00Z"},
		},
		"29 February waits for the next leap year": {
			line: "0 0 29 2 *", from: "2027-03-01T00:00:00Z",
			want: []string{"2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"},
		},
		"Europe/Berlin in summer is UTC+2": {
			line: "0 9 * * *", tz: "Europe/Berlin", from: "2026-05-13T10:17:00Z",
			want: []string{"2026-05-14T07:00:00Z"},
		},
		"Europe/Berlin in winter is UTC+1": {
			line: "0 9 * * *", tz: "Europe/Berlin", from: "2026-01-13T10:17:00Z",
			want: []string{"2026-01-14T08:00:00Z"},
		},
		"America/New_York in summer is UTC-4": {
			line: "0 9 * * *", tz: "America/New_York", from: "2026-05-13T10:17:00Z",
			want: []string{"2026-05-13T13:00:00Z", "2026-05-14T13:00:00Z"},
		},
		"Asia/Kolkata is UTC+05:30 all year": {
			line: "0 9 * * *", tz: "Asia/Kolkata", from: "2026-05-13T10:17:00Z",
			want: []string{"2026-05-14T03:30:00Z", "2026-05-15T03:30:00Z"},
		},
		"Australia/Lord_Howe in its winter is UTC+10:30": {
			line: "0 9 * * *", tz: "Australia/Lord_Howe", from: "2026-05-13T10:17:00Z",
			want: []string{"2026-05-13T22:30:00Z"},
		},
		"Australia/Lord_Howe in its summer is UTC+11, half an hour more": {
			line: "0 9 * * *", tz: "Australia/Lord_Howe", from: "2026-01-13T10:17:00Z",
			want: []string{"2026-01-13T22:00:00Z"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := mustSpec(t, tc.line, tc.tz)
			var got []string
			for _, ts := range s.NextTimes(isoUTC(t, tc.from), len(tc.want)) {
				got = append(got, ts.UTC().Format(time.RFC3339))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("next times (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseNextIsInTheScheduleZone(t *testing.T) {
	s := mustSpec(t, "0 9 * * *", "Asia/Kolkata")
	got := s.Next(isoUTC(t, "2026-05-13T10:17:00Z"))
	if got.Location().String() != "Asia/Kolkata" || got.Hour() != 9 {
		t.Errorf("Next = %v, want 09:00 in Asia/Kolkata", got)
	}
	if s.Location().String() != "Asia/Kolkata" {
		t.Errorf("Location = %v", s.Location())
	}
}

func TestParseErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		line, tz string
		want     error
		// mention is part of the message the user reads.
		mention string
	}{
		"six fields (with seconds) are refused":             {line: "0 0 * * * *", want: ErrSchedule},
		"four fields are refused":                           {line: "0 * * *", want: ErrSchedule},
		"an empty line is refused":                          {line: "", want: ErrSchedule},
		"minute 60 is out of range":                         {line: "60 * * * *", want: ErrSchedule},
		"hour 24 is out of range":                           {line: "0 24 * * *", want: ErrSchedule},
		"day 32 is out of range":                            {line: "0 0 32 * *", want: ErrSchedule},
		"day 0 is out of range":                             {line: "0 0 0 * *", want: ErrSchedule},
		"month 13 is out of range":                          {line: "0 0 * 13 *", want: ErrSchedule},
		"weekday 8 is out of range":                         {line: "0 0 * * 8", want: ErrSchedule},
		"garbage is refused":                                {line: "every day at noon", want: ErrSchedule},
		"an unknown descriptor is refused":                  {line: "@reboot", want: ErrSchedule},
		"@every is refused: it is no calendar schedule":     {line: "@every 1h", want: ErrSchedule, mention: "@every"},
		"L (last day of month) is not supported":            {line: "0 0 L * *", want: ErrSchedule},
		"a TZ= prefix is refused: timeZone is the field":    {line: "TZ=UTC 0 * * * *", want: ErrSchedule, mention: "spec.timeZone"},
		"a CRON_TZ= prefix is refused too":                  {line: "CRON_TZ=Europe/Berlin 0 * * * *", want: ErrSchedule, mention: "spec.timeZone"},
		"30 February never runs and is refused":             {line: "0 0 30 2 *", want: ErrSchedule, mention: "never runs"},
		"the 31st of months of 30 days never runs":          {line: "0 0 31 4,6,9,11 *", want: ErrSchedule, mention: "never runs"},
		"an unknown zone is refused":                        {line: "@daily", tz: "Mars/Olympus", want: ErrTimeZone, mention: "Mars/Olympus"},
		"Local is refused: it differs from node to node":    {line: "@daily", tz: "Local", want: ErrTimeZone},
		"a zone is checked even when the line is fine":      {line: "0 3 * * *", tz: "Europe/Berlinn", want: ErrTimeZone},
		"an offset is no zone name":                         {line: "0 3 * * *", tz: "+02:00", want: ErrTimeZone},
		"a line with a TZ= prefix is refused whatever zone": {line: "TZ=Mars/Olympus 0 * * * *", tz: "UTC", want: ErrSchedule},
	} {
		t.Run(name, func(t *testing.T) {
			s, err := Parse(tc.line, tc.tz)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Parse(%q, %q) = %v, %v; want an error wrapping %v", tc.line, tc.tz, s, err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.mention) {
				t.Errorf("error %q does not mention %q", err, tc.mention)
			}
		})
	}
}

func TestLocation(t *testing.T) {
	for name, tc := range map[string]struct {
		tz      string
		want    string
		wantErr bool
	}{
		"empty is UTC":                 {tz: "", want: "UTC"},
		"UTC by name":                  {tz: "UTC", want: "UTC"},
		"an IANA name":                 {tz: "Europe/Berlin", want: "Europe/Berlin"},
		"a zone of a half-hour offset": {tz: "Asia/Kolkata", want: "Asia/Kolkata"},
		"Local is refused":             {tz: "Local", wantErr: true},
		"an unknown name is refused":   {tz: "Mars/Olympus", wantErr: true},
		"a path is refused":            {tz: "../../etc/passwd", wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			loc, err := Location(tc.tz)
			if tc.wantErr {
				if !errors.Is(err, ErrTimeZone) {
					t.Fatalf("Location(%q) = %v, %v; want an error wrapping ErrTimeZone", tc.tz, loc, err)
				}
				return
			}
			if err != nil || loc.String() != tc.want {
				t.Fatalf("Location(%q) = %v, %v; want %s", tc.tz, loc, err, tc.want)
			}
		})
	}
}

func TestParseMaxAge(t *testing.T) {
	for name, tc := range map[string]struct {
		v       string
		want    time.Duration
		wantErr bool
	}{
		"hours as Go writes them":                 {v: "36h", want: 36 * time.Hour},
		"minutes as Go writes them":               {v: "90m", want: 90 * time.Minute},
		"hours and minutes":                       {v: "1h30m", want: 90 * time.Minute},
		"whole days":                              {v: "7d", want: 7 * 24 * time.Hour},
		"whole weeks":                             {v: "2w", want: 14 * 24 * time.Hour},
		"a year of days":                          {v: "365d", want: 365 * 24 * time.Hour},
		"empty is refused":                        {v: "", wantErr: true},
		"zero is refused":                         {v: "0", wantErr: true},
		"zero days are refused":                   {v: "0d", wantErr: true},
		"negative hours are refused":              {v: "-1h", wantErr: true},
		"negative days are refused":               {v: "-2d", wantErr: true},
		"a fraction of a day is refused":          {v: "1.5d", wantErr: true},
		"a unit alone is refused":                 {v: "d", wantErr: true},
		"an unknown unit is refused":              {v: "7y", wantErr: true},
		"garbage is refused":                      {v: "a week", wantErr: true},
		"days beyond 32 bits are refused":         {v: "9999999999d", wantErr: true},
		"weeks beyond a duration are refused":     {v: "2147483647w", wantErr: true},
		"days that would wrap around are refused": {v: "106752d", wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := ParseMaxAge(tc.v)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("ParseMaxAge(%q) = %v, want an error", tc.v, got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseMaxAge(%q) = %v, %v; want %v", tc.v, got, err, tc.want)
			}
		})
	}
}
