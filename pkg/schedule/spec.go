// Package schedule holds the pure decisions of snapshot schedules
// (docs/schedules.md): when a schedule runs (cron in a time zone, missed
// times, the starting deadline), what its snapshots are named, and which of
// them its retention keeps. Nothing here reads a clock or talks to a
// server: times come in as arguments, so every decision is table-tested.
package schedule

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	// Time zone data in the binary: a schedule's timeZone must not depend
	// on the image carrying /usr/share/zoneinfo (ours is distroless).
	_ "time/tzdata"

	"github.com/robfig/cron/v3"
)

// Spec is a parsed schedule: its cron line read in its time zone.
type Spec struct {
	cron *cron.SpecSchedule
	loc  *time.Location
	// once: the line names its hours, so a wall-clock time that a clock
	// set back shows twice is run only the first time (a daily 02:30 job
	// runs once on the fall-back day). A line that runs every hour follows
	// the real clock instead and runs in both passes of the repeated hour.
	once bool
}

// allHours is the cron hour field with every hour of the day set.
const allHours = 1<<24 - 1

// ErrSchedule and ErrTimeZone classify Parse's errors by the field at fault.
var (
	ErrSchedule = errors.New("invalid schedule")
	ErrTimeZone = errors.New("invalid time zone")
)

// Parse reads a schedule line (five cron fields or a descriptor such as
// @hourly, as a CronJob reads it) in the named IANA time zone (UTC when tz
// is empty). A TZ= or CRON_TZ= prefix is refused, as CronJob refuses it:
// the time zone has its own field. @every is refused, and so is a line
// that never runs (0 0 30 2 *).
func Parse(line, tz string) (*Spec, error) {
	if strings.Contains(line, "TZ") {
		return nil, fmt.Errorf("%w: a time zone in the cron line (TZ= or CRON_TZ=) is not supported: set spec.timeZone instead", ErrSchedule)
	}
	loc, err := Location(tz)
	if err != nil {
		return nil, err
	}
	// @every is not a calendar schedule: its times drift with the moment
	// they are counted from, and below a minute two of them would share one
	// snapshot name.
	if strings.HasPrefix(line, "@every") {
		return nil, fmt.Errorf("%w: %q: @every is not supported; write five fields (e.g. \"*/30 * * * *\") or @hourly, @daily, @weekly, @monthly, @yearly", ErrSchedule, line)
	}
	c, err := cron.ParseStandard(line)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %v; write five fields (minute hour day-of-month month day-of-week, e.g. \"0 * * * *\") or @hourly, @daily, @weekly, @monthly, @yearly", ErrSchedule, line, err)
	}
	// Five fields and the named descriptors all parse to a SpecSchedule.
	spec, ok := c.(*cron.SpecSchedule)
	if !ok {
		return nil, fmt.Errorf("%w: %q: write five fields or @hourly, @daily, @weekly, @monthly, @yearly", ErrSchedule, line)
	}
	// Next hands the library wall-clock times written as UTC.
	spec.Location = time.UTC
	s := &Spec{cron: spec, loc: loc, once: spec.Hour&allHours != allHours}
	// A line whose days never come (30 February) would otherwise be
	// accepted and silently never run. The search from a leap year's
	// first day meets every day a line can name, 29 February included.
	if s.Next(time.Date(2000, time.January, 1, 0, 0, 0, 0, loc)).IsZero() {
		return nil, fmt.Errorf("%w: %q never runs: no month has the day it names", ErrSchedule, line)
	}
	return s, nil
}

// Location loads an IANA time zone by name; "" is UTC. "Local" is refused:
// it would make a schedule mean another time on every node.
func Location(tz string) (*time.Location, error) {
	if tz == "" {
		return time.UTC, nil
	}
	if tz == "Local" {
		return nil, fmt.Errorf("%w: %q: name an IANA time zone such as Europe/Berlin, or leave it empty for UTC", ErrTimeZone, tz)
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, fmt.Errorf("%w: %q is not an IANA time zone name (such as UTC, Europe/Berlin or America/New_York)", ErrTimeZone, tz)
	}
	return loc, nil
}

// Location is the schedule's time zone.
func (s *Spec) Location() *time.Location { return s.loc }

// Next is the first scheduled time strictly after t, in the schedule's
// time zone; zero when the schedule has none within five years.
//
// The scheduled times are the instants whose wall-clock time in the zone
// the line matches. So across daylight-saving changes: a wall-clock time
// the clock skips (02:30 on a spring-forward night in Europe/Berlin) does
// not run that day, as a CronJob does not run it. A wall-clock time the
// clock shows twice (02:30 on a fall-back night) runs once, at its first
// showing, unless the line runs every hour: then each real hour runs, 25
// on that day.
//
// The cron library is asked only about wall-clock times of one UTC offset
// at a time, where it is exact: across zone changes it skips whole days
// (a half-hour shift, or a change at midnight) and can loop forever (a
// skipped calendar day).
func (s *Spec) Next(t time.Time) time.Time {
	at, inclusive := t.In(s.loc), false
	horizon := at.AddDate(5, 0, 1)
	for at.Before(horizon) {
		_, end := at.ZoneBounds()
		_, offset := at.Zone()
		shift := time.Duration(offset) * time.Second
		wall := at.UTC().Add(shift)
		if inclusive {
			wall = wall.Add(-time.Nanosecond)
		}
		w := s.cron.Next(wall)
		if w.IsZero() {
			return time.Time{}
		}
		next := w.Add(-shift).In(s.loc)
		switch {
		case !end.IsZero() && !next.Before(end):
			// Past this offset: search on from the change, in the next one.
			at, inclusive = end, true
		case s.once && repeated(next):
			at, inclusive = next, false
		default:
			return next
		}
	}
	return time.Time{}
}

// repeated reports whether t's wall-clock time was already shown at an
// earlier instant: t lies in the stretch a clock set back shows again.
func repeated(t time.Time) bool {
	start, _ := t.ZoneBounds()
	if start.IsZero() {
		return false
	}
	_, off := t.Zone()
	_, before := start.Add(-time.Nanosecond).Zone()
	return before > off && t.Sub(start) < time.Duration(before-off)*time.Second
}

// ParseMaxAge reads retention.maxAge: a Go duration (36h, 90m) or a whole
// number of days or weeks (7d, 2w). It must be positive.
func ParseMaxAge(v string) (time.Duration, error) {
	var d time.Duration
	var err error
	switch {
	case strings.HasSuffix(v, "d") || strings.HasSuffix(v, "w"):
		unit := 24 * time.Hour
		if strings.HasSuffix(v, "w") {
			unit *= 7
		}
		var n int64
		n, err = strconv.ParseInt(v[:len(v)-1], 10, 32)
		if n > math.MaxInt64/int64(unit) {
			// Would wrap around; refused below like any non-positive value.
			n = 0
		}
		d = time.Duration(n) * unit
	default:
		d, err = time.ParseDuration(v)
	}
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q is not a positive duration: write hours or minutes as Go does (36h, 90m), or whole days or weeks (7d, 2w)", v)
	}
	return d, nil
}
