package schedule

import (
	"cmp"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/snapkeeper/snapkeeper/pkg/apis/snapkeeper/v1alpha1"
)

// Item is one scheduled snapshot of a series (one claim's snapshots of one
// schedule, or a group schedule's group snapshots), as retention sees it.
type Item struct {
	Name string
	// Time is the scheduled time of the run that cut it (or its creation
	// time for an adopted snapshot).
	Time time.Time
	// Ready is status.readyToUse.
	Ready bool
	// Failed: not ready and status.error set.
	Failed bool
	// Protected: a claim that is not bound yet restores from it, so it is
	// never deleted.
	Protected bool
	// Deleting: already being deleted, so neither counted nor deleted
	// again.
	Deleting bool
}

// Policy is a parsed RetentionPolicy; a zero count means the rule is unset.
type Policy struct {
	KeepLast, Hourly, Daily, Weekly, Monthly, Yearly int
	MaxAge                                           time.Duration
}

// ErrRetention classifies PolicyFrom's errors, as ErrSchedule and
// ErrTimeZone classify Parse's.
var ErrRetention = errors.New("invalid retention")

// PolicyFrom parses the API's RetentionPolicy. Every field at fault is
// named in the one error, so that a user fixes them all at once.
func PolicyFrom(r v1alpha1.RetentionPolicy) (Policy, error) {
	var p Policy
	var problems []string
	count := func(field string, v *int32, dst *int) {
		if v == nil {
			return
		}
		if *v < 1 {
			problems = append(problems, "retention."+field+": must be at least 1")
			return
		}
		*dst = int(*v)
	}
	count("keepLast", r.KeepLast, &p.KeepLast)
	count("hourly", r.Hourly, &p.Hourly)
	count("daily", r.Daily, &p.Daily)
	count("weekly", r.Weekly, &p.Weekly)
	count("monthly", r.Monthly, &p.Monthly)
	count("yearly", r.Yearly, &p.Yearly)
	if r.MaxAge != nil {
		d, err := ParseMaxAge(*r.MaxAge)
		if err != nil {
			problems = append(problems, "retention.maxAge: "+err.Error())
		}
		p.MaxAge = d
	}
	if len(problems) > 0 {
		return Policy{}, fmt.Errorf("%w: %s", ErrRetention, strings.Join(problems, "; "))
	}
	if r.KeepLast == nil && r.Hourly == nil && r.Daily == nil && r.Weekly == nil &&
		r.Monthly == nil && r.Yearly == nil && r.MaxAge == nil {
		return Policy{}, fmt.Errorf("%w: retention: set at least one of keepLast, hourly, daily, weekly, monthly, yearly or maxAge", ErrRetention)
	}
	return p, nil
}

// hasCountRule says whether anything but maxAge is set.
func (p Policy) hasCountRule() bool {
	return p.KeepLast > 0 || p.Hourly > 0 || p.Daily > 0 || p.Weekly > 0 || p.Monthly > 0 || p.Yearly > 0
}

// Kept is an item retention keeps, with why (for events, status and a dry
// run).
type Kept struct {
	Item    Item
	Reasons []string
}

// Deletion is an item retention deletes, with why.
type Deletion struct {
	Item   Item
	Reason string
}

// Decision is what retention does with a series.
type Decision struct {
	Keep   []Kept     // newest first
	Delete []Deletion // newest first
	// Ready and Failed count the kept items (neither already being
	// deleted nor deleted by this decision), as status.claims reports
	// them.
	Ready, Failed int
	// NewestReady is the newest ready item's name, "" when none.
	NewestReady string
}

// The reasons of Kept and Deletion that carry no value.
const (
	reasonNewestReady = "newest ready"
	reasonNotReadyYet = "not ready yet"
	reasonRestoring   = "restoring a claim"
	reasonNoRule      = "no retention rule set"
	reasonBeyond      = "beyond retention"
	reasonSuperseded  = "not ready, and a newer snapshot is ready"
)

// An item's fate, as bits: the rules that keep it, or the one reason it
// is deleted.
const (
	markLast uint16 = 1 << iota
	markHourly
	markDaily
	markWeekly
	markMonthly
	markYearly
	markNewest
	markWithin
	markNoRule
	markNotReadyYet
	markRestoring
	delBeyond
	delOlder
	delSuperseded

	markRules = markLast | markHourly | markDaily | markWeekly | markMonthly | markYearly
	markKeep  = markRules | markNewest | markWithin | markNoRule | markNotReadyYet | markRestoring
)

// calendar is an item's bucket keys in the schedule's time zone.
type calendar struct {
	// hour is the instant the local hour began (Unix seconds), not its
	// wall-clock text: the hour repeated when clocks fall back is two
	// buckets, not one.
	hour                   int64
	day, week, month, year int32
}

func calendarOf(t time.Time) calendar {
	y, m, d := t.Date()
	_, mi, s := t.Clock()
	iy, iw := t.ISOWeek()
	return calendar{
		hour:  t.Unix() - int64(mi*60+s),
		day:   int32(y*10000 + int(m)*100 + d),
		week:  int32(iy*100 + iw),
		month: int32(y*100 + int(m)),
		year:  int32(y),
	}
}

// newerFirst orders items newest first; names break ties so the order,
// and so the decision, does not depend on the order of the input.
func newerFirst(a, b Item) int {
	if c := b.Time.Compare(a.Time); c != 0 {
		return c
	}
	return cmp.Compare(b.Name, a.Name)
}

// Decide applies p to a series: the count rules keep ready items (and add
// up), maxAge caps them, the newest ready item is always kept, not-ready
// items are kept until a newer one is ready, and protected items are never
// deleted. now is the time maxAge is measured from; loc is the time zone of
// the calendar buckets (UTC when nil). It does not modify items.
func Decide(items []Item, p Policy, now time.Time, loc *time.Location) Decision {
	if loc == nil {
		loc = time.UTC
	}
	nLive, nReady := 0, 0
	for _, it := range items {
		if !it.Deleting {
			nLive++
			if it.Ready {
				nReady++
			}
		}
	}
	live := make([]Item, 0, nLive)
	for _, it := range items {
		if !it.Deleting {
			live = append(live, it)
		}
	}
	slices.SortFunc(live, newerFirst)
	ready := make([]int, 0, nReady) // indexes into live, newest first
	for i := range live {
		if live[i].Ready {
			ready = append(ready, i)
		}
	}
	newest := -1
	if len(ready) > 0 {
		newest = ready[0]
	}

	marks := make([]uint16, len(live))
	for r := 0; r < p.KeepLast && r < len(ready); r++ {
		marks[ready[r]] |= markLast
	}
	if p.Hourly > 0 || p.Daily > 0 || p.Weekly > 0 || p.Monthly > 0 || p.Yearly > 0 {
		cal := make([]calendar, len(ready))
		for r, i := range ready {
			cal[r] = calendarOf(live[i].Time.In(loc))
		}
		bucket := func(n int, mark uint16, key func(calendar) int64) {
			var last int64
			kept := 0
			for r := 0; r < len(ready) && kept < n; r++ {
				if k := key(cal[r]); kept == 0 || k != last {
					marks[ready[r]] |= mark
					last = k
					kept++
				}
			}
		}
		bucket(p.Hourly, markHourly, func(c calendar) int64 { return c.hour })
		bucket(p.Daily, markDaily, func(c calendar) int64 { return int64(c.day) })
		bucket(p.Weekly, markWeekly, func(c calendar) int64 { return int64(c.week) })
		bucket(p.Monthly, markMonthly, func(c calendar) int64 { return int64(c.month) })
		bucket(p.Yearly, markYearly, func(c calendar) int64 { return int64(c.year) })
	}

	// Settle each item's fate first, so that the results are allocated
	// once at their size: a schedule's 100,000 items are mostly deleted.
	counting := p.hasCountRule()
	nKeep, nReasons := 0, 0
	for i, it := range live {
		m := marks[i]
		switch {
		case it.Ready:
			tooOld := p.MaxAge > 0 && now.Sub(it.Time) > p.MaxAge
			if tooOld {
				// The cap overrides the count rules, not "newest ready".
				m = 0
			}
			if i == newest {
				m |= markNewest
			}
			switch {
			case tooOld, counting:
			case p.MaxAge > 0:
				m |= markWithin
			default:
				// A policy without a single rule is a caller's bug,
				// not a request to delete all but one snapshot.
				m |= markNoRule
			}
			if m == 0 {
				m = delBeyond
				if tooOld {
					m = delOlder
				}
			}
		case newest < 0 || i < newest:
			m = markNotReadyYet
		default:
			m = delSuperseded
		}
		if m&markKeep == 0 && it.Protected {
			m = markRestoring
		}
		marks[i] = m
		if m&markKeep != 0 {
			nKeep++
			nReasons += bits.OnesCount16(m)
		}
	}

	d := Decision{Keep: make([]Kept, 0, nKeep), Delete: make([]Deletion, 0, len(live)-nKeep)}
	if newest >= 0 {
		d.NewestReady = live[newest].Name
	}
	age := formatAge(p.MaxAge)
	// One backing array for every Reasons slice, each cut with its
	// capacity at its length so that appending to one never writes into
	// the next.
	arena := make([]string, 0, nReasons)
	rank := 0 // position among the ready items, for keepLast's reason
	for i, it := range live {
		if it.Ready {
			rank++
		}
		m := marks[i]
		switch m {
		case delBeyond:
			d.Delete = append(d.Delete, Deletion{Item: it, Reason: reasonBeyond})
			continue
		case delOlder:
			d.Delete = append(d.Delete, Deletion{Item: it, Reason: "older than maxAge " + age})
			continue
		case delSuperseded:
			d.Delete = append(d.Delete, Deletion{Item: it, Reason: reasonSuperseded})
			continue
		}
		start := len(arena)
		arena = appendReasons(arena, m, rank, p, age, it.Time.In(loc))
		d.Keep = append(d.Keep, Kept{Item: it, Reasons: arena[start:len(arena):len(arena)]})
		if it.Ready {
			d.Ready++
		} else if it.Failed {
			d.Failed++
		}
	}
	return d
}

// appendReasons names why an item is kept (marks), the count rules in the
// order the policy lists them. t is the item's time in the schedule's
// zone.
func appendReasons(buf []string, marks uint16, rank int, p Policy, age string, t time.Time) []string {
	if marks&markNewest != 0 {
		buf = append(buf, reasonNewestReady)
	}
	if marks&markLast != 0 {
		buf = append(buf, "keepLast "+strconv.Itoa(rank)+"/"+strconv.Itoa(p.KeepLast))
	}
	if marks&markHourly != 0 {
		buf = append(buf, "hourly "+hourLabel(t))
	}
	if marks&markDaily != 0 {
		buf = append(buf, "daily "+t.Format("2006-01-02"))
	}
	if marks&markWeekly != 0 {
		y, w := t.ISOWeek()
		buf = append(buf, fmt.Sprintf("weekly %04d-W%02d", y, w))
	}
	if marks&markMonthly != 0 {
		buf = append(buf, "monthly "+t.Format("2006-01"))
	}
	if marks&markYearly != 0 {
		buf = append(buf, "yearly "+t.Format("2006"))
	}
	if marks&markWithin != 0 {
		buf = append(buf, "within maxAge "+age)
	}
	if marks&markNoRule != 0 {
		buf = append(buf, reasonNoRule)
	}
	if marks&markNotReadyYet != 0 {
		buf = append(buf, reasonNotReadyYet)
	}
	if marks&markRestoring != 0 {
		buf = append(buf, reasonRestoring)
	}
	return buf
}

// hourLabel is t's local hour; the hour that clocks falling back repeat
// gets its zone abbreviation (CEST, then CET), or its two buckets would
// read the same.
func hourLabel(t time.Time) string {
	label := t.Format("2006-01-02T15")
	_, off := t.Zone()
	for _, d := range []time.Duration{-time.Hour, -30 * time.Minute, 30 * time.Minute, time.Hour} {
		o := t.Add(d)
		if _, oo := o.Zone(); oo != off && o.Format("2006-01-02T15") == label {
			return label + " " + t.Format("MST")
		}
	}
	return label
}

// formatAge writes maxAge as a user would: whole days as 7d, the rest as
// a Go duration.
func formatAge(d time.Duration) string {
	if d > 0 && d%(24*time.Hour) == 0 {
		return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
	}
	return d.String()
}

// Behind counts the items not being deleted that are not ready and newer
// than the newest ready one (all not-ready ones when none is ready): a run
// skips a claim whose Behind is 2 or more, so a claim whose last snapshot
// is still not ready gets at most one new one behind it.
func Behind(items []Item) int {
	newest := -1
	for i, it := range items {
		if it.Ready && !it.Deleting && (newest < 0 || newerFirst(it, items[newest]) < 0) {
			newest = i
		}
	}
	n := 0
	for _, it := range items {
		if !it.Ready && !it.Deleting && (newest < 0 || newerFirst(it, items[newest]) < 0) {
			n++
		}
	}
	return n
}
