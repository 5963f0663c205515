package schedule

import (
	"math/bits"
	"time"
)

// maxCandidates bounds how many scheduled times Due counts, so that a
// schedule whose last run is ages ago (or bogus) is still decided at once.
const maxCandidates = 1_000_000

// Due is what a schedule has to do at a given moment.
type Due struct {
	// Run is the scheduled time to cut now; zero when none is due.
	Run time.Time
	// Missed counts the scheduled times after last and up to now that are
	// not run: every one but the most recent, and the most recent too when
	// it is past the starting deadline. Counting stops at a million
	// scheduled times: Missed is then a lower bound.
	Missed int64
	// Latest is the most recent scheduled time after last and up to now,
	// run or missed; zero when there is none. Runs resume after it.
	Latest time.Time
	// Next is the first scheduled time strictly after now.
	Next time.Time
}

// Due decides, for a schedule whose last handled scheduled time is last
// (status.lastScheduleTime, or the schedule's creation time when it never
// ran), what is due at now. deadline, when non-nil, is
// startingDeadlineSeconds as a duration.
//
// As a CronJob decides: of the scheduled times after last and up to now,
// only the most recent is run, and only if it is at most deadline old; the
// others are missed. When now is before last (the clock went back), nothing
// is due until the clock passes last again.
func (s *Spec) Due(last, now time.Time, deadline *time.Duration) Due {
	return s.due(last, now, deadline, maxCandidates)
}

// due is Due with the counting bound as an argument, so that tests reach
// the bound without a million scheduled times.
func (s *Spec) due(last, now time.Time, deadline *time.Duration, limit int64) Due {
	if now.Before(last) {
		return Due{Next: s.Next(last)}
	}
	d := Due{Next: s.Next(now)}
	latest := s.latest(last, now)
	if latest.IsZero() {
		return d
	}
	d.Latest = latest
	d.Missed = s.count(last, latest, limit)
	if deadline != nil && now.Sub(latest) > *deadline {
		d.Missed++
	} else {
		d.Run = latest
	}
	return d
}

// NextTimes is the next n scheduled times after after, fewer when the
// schedule has no more within five years of the last one.
func (s *Spec) NextTimes(after time.Time, n int) []time.Time {
	var times []time.Time
	for t := after; len(times) < n; {
		if t = s.Next(t); t.IsZero() {
			break
		}
		times = append(times, t)
	}
	return times
}

// latest is the most recent scheduled time in (after, now], zero when
// none. It looks back from now over a window that doubles until it holds
// one, so that its cost follows how often the schedule runs near now, not
// how long ago after is.
func (s *Spec) latest(after, now time.Time) time.Time {
	if first := s.Next(after); first.IsZero() || first.After(now) {
		return time.Time{}
	}
	span := now.Sub(after)
	for w := time.Minute; ; {
		from := after
		if w < span {
			from = now.Add(-w)
		}
		var found time.Time
		for t := s.Next(from); !t.IsZero() && !t.After(now); t = s.Next(t) {
			found = t
		}
		if !found.IsZero() || from.Equal(after) {
			return found
		}
		if w > span/2 {
			w = span
		} else {
			w *= 2
		}
	}
}

// count is how many scheduled times lie strictly between after and
// before, up to limit. Whole days of one steady UTC offset are counted
// from the cron fields at once, so a minutely schedule down for a year
// costs a few thousand steps, not half a million; the days near a
// daylight-saving change and the partial days at both ends are walked one
// scheduled time at a time.
func (s *Spec) count(after, before time.Time, limit int64) int64 {
	var n int64
	// walk counts the scheduled times in (from, to); false at the limit.
	walk := func(from, to time.Time) bool {
		for t := s.Next(from); !t.IsZero() && t.Before(to); t = s.Next(t) {
			if n++; n >= limit {
				return false
			}
		}
		return true
	}
	// The days are counted by calendar date, not by instant, so that a
	// midnight a zone skips or repeats cannot stall the loop.
	y, m, d := after.In(s.loc).Date()
	day := time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	end := s.midnight(day.AddDate(0, 0, 1))
	if end.Before(after) {
		end = after
	}
	if !walk(after, earlier(end, before)) {
		return n
	}
	// The days are bounded too, for a bogus after such as the zero time.
	for days := 0; end.Before(before) && days < maxCandidates; days++ {
		day = day.AddDate(0, 0, 1)
		start := end
		end = s.midnight(day.AddDate(0, 0, 1))
		if end.Before(start) {
			end = start
		}
		if !start.After(after) || end.After(before) || !steady(day, start, end) {
			// Next from just before start, so a time at start counts,
			// though never one at after.
			from := start.Add(-time.Nanosecond)
			if from.Before(after) {
				from = after
			}
			if !walk(from, earlier(end, before)) {
				return n
			}
			continue
		}
		if n += s.perDay(day); n >= limit {
			return limit
		}
	}
	return n
}

// midnight is the instant the calendar date day starts in the schedule's
// time zone.
func (s *Spec) midnight(day time.Time) time.Time {
	return time.Date(day.Year(), day.Month(), day.Day(), 0, 0, 0, 0, s.loc)
}

// steady reports whether [start, end) is the calendar date day as a plain
// day: from its midnight, 24 hours of one UTC offset, none of whose
// wall-clock times a clock set back has shown before. A clock is never set
// back by more than a day, so a zone period that began two days before
// start rules that out.
func steady(day, start, end time.Time) bool {
	if end.Sub(start) != 24*time.Hour {
		return false
	}
	// A zone may skip a date, so that one date's bounds hold another's day.
	y, m, d := start.Date()
	if h, mi, sec := start.Clock(); y != day.Year() || m != day.Month() || d != day.Day() || h != 0 || mi != 0 || sec != 0 {
		return false
	}
	from, to := start.ZoneBounds()
	return (from.IsZero() || !from.After(start.Add(-48*time.Hour))) &&
		(to.IsZero() || !to.Before(end))
}

// perDay is how many times the schedule runs on the calendar date day when
// that day is plain: one per combination of its hours, minutes and
// seconds, when the day matches.
func (s *Spec) perDay(day time.Time) int64 {
	c := s.cron
	if c.Month&(1<<uint(day.Month())) == 0 || !dayMatches(c.Dom, c.Dow, day) {
		return 0
	}
	const minutes = 1<<60 - 1
	return int64(bits.OnesCount64(c.Hour&allHours) *
		bits.OnesCount64(c.Minute&minutes) *
		bits.OnesCount64(c.Second&minutes))
}

// dayMatches reads the day-of-month and day-of-week fields as the cron
// parser does: when both are restricted (neither is *), a day matching
// either runs; otherwise a day must match both.
func dayMatches(dom, dow uint64, day time.Time) bool {
	const star = 1 << 63 // the parser's mark of a field written as * or ?
	domMatch := dom&(1<<uint(day.Day())) != 0
	dowMatch := dow&(1<<uint(day.Weekday())) != 0
	if dom&star != 0 || dow&star != 0 {
		return domMatch && dowMatch
	}
	return domMatch || dowMatch
}

// earlier is the earlier of two instants.
func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
