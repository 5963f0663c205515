package schedule

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/snapkeeper/snapkeeper/pkg/apis/snapkeeper/v1alpha1"
)

// retT0 is a Thursday (ISO week 2026-W50); most series end there.
var retT0 = time.Date(2026, 12, 10, 23, 0, 0, 0, time.UTC)

type retOpt func(*Item)

func asNotReady(it *Item)  { it.Ready = false }
func asFailed(it *Item)    { it.Ready, it.Failed = false, true }
func asProtected(it *Item) { it.Protected = true }
func asDeleting(it *Item)  { it.Deleting = true }

// snapName is the name the builders give an item cut at t: its UTC minute.
func snapName(t time.Time) string { return t.UTC().Format("2006-01-02T15:04") }

// snapAt is a ready item cut at t, named by snapName(t).
func snapAt(t time.Time, opts ...retOpt) Item {
	it := Item{Name: snapName(t), Time: t, Ready: true}
	for _, o := range opts {
		o(&it)
	}
	return it
}

// retUTC reads "2006-01-02T15:04" in UTC.
func retUTC(s string) time.Time {
	t, err := time.Parse("2006-01-02T15:04", s)
	if err != nil {
		panic(err)
	}
	return t
}

// retSeries is n ready items step apart, the newest at newest, oldest first
// as a list from the server may come, so that Decide has to sort.
func retSeries(newest time.Time, step time.Duration, n int) []Item {
	out := make([]Item, n)
	for i := range n {
		out[n-1-i] = snapAt(newest.Add(-time.Duration(i) * step))
	}
	return out
}

// retItems is the items at the given UTC minutes, all ready.
func retItems(minutes ...string) []Item {
	out := make([]Item, len(minutes))
	for i, m := range minutes {
		out[i] = snapAt(retUTC(m))
	}
	return out
}

// snapNames is the names of retSeries(newest, step, n), newest first.
func snapNames(newest time.Time, step time.Duration, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = snapName(newest.Add(-time.Duration(i) * step))
	}
	return out
}

func keptNames(d Decision) []string {
	out := make([]string, len(d.Keep))
	for i, k := range d.Keep {
		out[i] = k.Item.Name
	}
	return out
}

func deletedNames(d Decision) []string {
	out := make([]string, len(d.Delete))
	for i, x := range d.Delete {
		out[i] = x.Item.Name
	}
	return out
}

// retentionCase is one Decide call and what it must give. now defaults to
// retT0, zone to UTC; keep and del are newest first; reasons and why check
// the named items' Kept.Reasons and Deletion.Reason.
type retentionCase struct {
	items   []Item
	policy  Policy
	now     time.Time
	zone    string
	keep    []string
	del     []string
	reasons map[string][]string
	why     map[string]string
}

func (tc retentionCase) run(t *testing.T) Decision {
	t.Helper()
	loc, err := Location(tc.zone)
	if err != nil {
		t.Fatal(err)
	}
	now := tc.now
	if now.IsZero() {
		now = retT0
	}
	d := Decide(tc.items, tc.policy, now, loc)
	if got := keptNames(d); !slices.Equal(got, tc.keep) {
		t.Errorf("kept %d %v\nwant %d %v", len(got), got, len(tc.keep), tc.keep)
	}
	if got := deletedNames(d); !slices.Equal(got, tc.del) {
		t.Errorf("deleted %d %v\nwant %d %v", len(got), got, len(tc.del), tc.del)
	}
	for n := range tc.reasons {
		if !slices.Contains(tc.keep, n) {
			t.Errorf("the case checks the reasons of %s, which it does not keep", n)
		}
	}
	for n := range tc.why {
		if !slices.Contains(tc.del, n) {
			t.Errorf("the case checks why %s is deleted, which it does not delete", n)
		}
	}
	for _, k := range d.Keep {
		if want, ok := tc.reasons[k.Item.Name]; ok && !slices.Equal(k.Reasons, want) {
			t.Errorf("%s kept for %q, want %q", k.Item.Name, k.Reasons, want)
		}
	}
	for _, x := range d.Delete {
		if want, ok := tc.why[x.Item.Name]; ok && x.Reason != want {
			t.Errorf("%s deleted for %q, want %q", x.Item.Name, x.Reason, want)
		}
	}
	return d
}

func TestDecide(t *testing.T) {
	h := time.Hour
	day := 24 * h
	cases := map[string]retentionCase{
		"keepLast 2 over 5 ready leaves 2": {
			items:   retSeries(retT0, h, 5),
			policy:  Policy{KeepLast: 2},
			keep:    snapNames(retT0, h, 2),
			del:     snapNames(retT0.Add(-2*h), h, 3),
			reasons: map[string][]string{snapName(retT0): {"newest ready", "keepLast 1/2"}, snapName(retT0.Add(-h)): {"keepLast 2/2"}},
			why:     map[string]string{snapName(retT0.Add(-2 * h)): "beyond retention"},
		},
		"a not-ready newest is kept and not counted": {
			items:   append(retSeries(retT0.Add(-h), h, 3), snapAt(retT0, asNotReady)),
			policy:  Policy{KeepLast: 2},
			keep:    snapNames(retT0, h, 3),
			del:     []string{snapName(retT0.Add(-3 * h))},
			reasons: map[string][]string{snapName(retT0): {"not ready yet"}, snapName(retT0.Add(-h)): {"newest ready", "keepLast 1/2"}},
		},
		"the newest ready is kept even when every snapshot is older than maxAge": {
			items:   retSeries(retT0.Add(-10*day), day, 3),
			policy:  Policy{KeepLast: 3, MaxAge: 7 * day},
			keep:    []string{snapName(retT0.Add(-10 * day))},
			del:     snapNames(retT0.Add(-11*day), day, 2),
			reasons: map[string][]string{snapName(retT0.Add(-10 * day)): {"newest ready"}},
			why:     map[string]string{snapName(retT0.Add(-11 * day)): "older than maxAge 7d"},
		},
		"a failed snapshot is deleted once a newer one is ready": {
			items:  []Item{snapAt(retT0), snapAt(retT0.Add(-h), asFailed), snapAt(retT0.Add(-2*h), asNotReady), snapAt(retT0.Add(-3 * h))},
			policy: Policy{KeepLast: 5},
			keep:   []string{snapName(retT0), snapName(retT0.Add(-3 * h))},
			del:    []string{snapName(retT0.Add(-h)), snapName(retT0.Add(-2 * h))},
			why:    map[string]string{snapName(retT0.Add(-h)): "not ready, and a newer snapshot is ready"},
		},
		"failed snapshots are kept while none newer is ready": {
			items:   []Item{snapAt(retT0, asFailed), snapAt(retT0.Add(-h), asFailed), snapAt(retT0.Add(-2 * h)), snapAt(retT0.Add(-3 * h))},
			policy:  Policy{KeepLast: 1},
			keep:    snapNames(retT0, h, 3),
			del:     []string{snapName(retT0.Add(-3 * h))},
			reasons: map[string][]string{snapName(retT0): {"not ready yet"}, snapName(retT0.Add(-h)): {"not ready yet"}},
		},
		"with none ready every snapshot is kept": {
			items:  []Item{snapAt(retT0, asFailed), snapAt(retT0.Add(-h), asNotReady), snapAt(retT0.Add(-30*day), asFailed)},
			policy: Policy{KeepLast: 1, MaxAge: day},
			keep:   []string{snapName(retT0), snapName(retT0.Add(-h)), snapName(retT0.Add(-30 * day))},
		},
		"a protected snapshot is never deleted": {
			items: []Item{
				snapAt(retT0), snapAt(retT0.Add(-h), asFailed, asProtected), snapAt(retT0.Add(-2 * h)),
				snapAt(retT0.Add(-3*h), asProtected), snapAt(retT0.Add(-30*day), asProtected),
			},
			policy: Policy{KeepLast: 1, MaxAge: 7 * day},
			keep:   []string{snapName(retT0), snapName(retT0.Add(-h)), snapName(retT0.Add(-3 * h)), snapName(retT0.Add(-30 * day))},
			del:    []string{snapName(retT0.Add(-2 * h))},
			reasons: map[string][]string{
				snapName(retT0.Add(-h)):        {"restoring a claim"},
				snapName(retT0.Add(-3 * h)):    {"restoring a claim"},
				snapName(retT0.Add(-30 * day)): {"restoring a claim"},
			},
		},
		"a protected snapshot a rule keeps does not take another's place": {
			items:   []Item{snapAt(retT0), snapAt(retT0.Add(-h), asProtected), snapAt(retT0.Add(-2 * h))},
			policy:  Policy{KeepLast: 2},
			keep:    snapNames(retT0, h, 2),
			del:     []string{snapName(retT0.Add(-2 * h))},
			reasons: map[string][]string{snapName(retT0.Add(-h)): {"keepLast 2/2"}},
		},
		"a snapshot being deleted is neither counted nor deleted again": {
			items:   []Item{snapAt(retT0, asDeleting), snapAt(retT0.Add(-h)), snapAt(retT0.Add(-2 * h)), snapAt(retT0.Add(-3 * h)), snapAt(retT0.Add(-4*h), asDeleting)},
			policy:  Policy{KeepLast: 2},
			keep:    []string{snapName(retT0.Add(-h)), snapName(retT0.Add(-2 * h))},
			del:     []string{snapName(retT0.Add(-3 * h))},
			reasons: map[string][]string{snapName(retT0.Add(-h)): {"newest ready", "keepLast 1/2"}},
		},
		"an hourly schedule over 3 days with daily 2 keeps the newest of each of the last 2 days": {
			items:  retSeries(retT0, h, 72),
			policy: Policy{Daily: 2},
			keep:   []string{"2026-12-10T23:00", "2026-12-09T23:00"},
			del: slices.DeleteFunc(snapNames(retT0.Add(-h), h, 71), func(n string) bool {
				return n == "2026-12-09T23:00"
			}),
			reasons: map[string][]string{"2026-12-10T23:00": {"newest ready", "daily 2026-12-10"}, "2026-12-09T23:00": {"daily 2026-12-09"}},
		},
		// The 24 hours of Thursday 2026-12-10 (keepLast, which also holds
		// that day's daily and its week's weekly), the last hour of each of
		// the 6 days before it (daily; Sunday 12-06 is also 2026-W49's
		// weekly), and the last hour of Sundays 11-29 and 11-22 (the
		// weeklies of 2026-W48 and W47): 24 + 6 + 2.
		"every hour, keep last 24, daily 7 and weekly 4, over 40 days": {
			items:  retSeries(retT0, h, 40*24),
			policy: Policy{KeepLast: 24, Daily: 7, Weekly: 4},
			keep: append(snapNames(retT0, h, 24),
				"2026-12-09T23:00", "2026-12-08T23:00", "2026-12-07T23:00", "2026-12-06T23:00",
				"2026-12-05T23:00", "2026-12-04T23:00", "2026-11-29T23:00", "2026-11-22T23:00"),
			del: slices.DeleteFunc(snapNames(retT0.Add(-24*h), h, 40*24-24), func(n string) bool {
				return strings.HasSuffix(n, "T23:00") && (n >= "2026-12-04" || n == "2026-11-29T23:00" || n == "2026-11-22T23:00")
			}),
			reasons: map[string][]string{
				snapName(retT0):    {"newest ready", "keepLast 1/24", "daily 2026-12-10", "weekly 2026-W50"},
				"2026-12-10T00:00": {"keepLast 24/24"},
				"2026-12-06T23:00": {"daily 2026-12-06", "weekly 2026-W49"},
				"2026-11-22T23:00": {"weekly 2026-W47"},
			},
		},
		"maxAge alone keeps every ready snapshot up to that age": {
			items:   retSeries(retT0, day, 10),
			policy:  Policy{MaxAge: 3 * day},
			keep:    snapNames(retT0, day, 4),
			del:     snapNames(retT0.Add(-4*day), day, 6),
			reasons: map[string][]string{snapName(retT0): {"newest ready", "within maxAge 3d"}, snapName(retT0.Add(-3 * day)): {"within maxAge 3d"}},
			why:     map[string]string{snapName(retT0.Add(-4 * day)): "older than maxAge 3d"},
		},
		"maxAge caps keepLast": {
			items:  retSeries(retT0, day, 10),
			policy: Policy{KeepLast: 10, MaxAge: 36 * h},
			keep:   snapNames(retT0, day, 2),
			del:    snapNames(retT0.Add(-2*day), day, 8),
			why:    map[string]string{snapName(retT0.Add(-2 * day)): "older than maxAge 36h0m0s"},
		},
		"maxAge is measured from now": {
			items:   retSeries(retT0, day, 3),
			policy:  Policy{MaxAge: 36 * h},
			now:     retT0.Add(2 * day),
			keep:    []string{snapName(retT0)},
			del:     snapNames(retT0.Add(-day), day, 2),
			reasons: map[string][]string{snapName(retT0): {"newest ready"}},
		},
		"ties in time are broken by name, newest the greater": {
			items:  []Item{{Name: "a", Time: retT0, Ready: true}, {Name: "c", Time: retT0, Ready: true}, {Name: "b", Time: retT0, Ready: true}},
			policy: Policy{KeepLast: 1},
			keep:   []string{"c"},
			del:    []string{"b", "a"},
		},
		"a not-ready snapshot tied with the newest ready is older when its name is smaller": {
			items:  []Item{{Name: "a", Time: retT0}, {Name: "b", Time: retT0, Ready: true}, {Name: "c", Time: retT0}},
			policy: Policy{KeepLast: 1},
			keep:   []string{"c", "b"},
			del:    []string{"a"},
		},
		"a policy without any rule deletes nothing": {
			items:   retSeries(retT0, h, 3),
			keep:    snapNames(retT0, h, 3),
			reasons: map[string][]string{snapName(retT0.Add(-h)): {"no retention rule set"}},
		},
		"an empty series decides nothing": {
			policy: Policy{KeepLast: 1},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) { tc.run(t) })
	}
}

func TestDecideCalendarBuckets(t *testing.T) {
	// Clocks in Berlin fall back on 2026-10-25 at 01:00 UTC, from 03:00
	// CEST to 02:00 CET: that local day has 25 hours, two of them 02.
	fallBack := retSeries(retUTC("2026-10-25T22:00"), time.Hour, 25)
	// And spring forward on 2026-03-29 at 01:00 UTC: 23 hours, no 02.
	springForward := retSeries(retUTC("2026-03-29T21:00"), time.Hour, 23)
	cases := map[string]retentionCase{
		"hourly keeps the newest of each hour": {
			items:   retItems("2026-12-10T10:40", "2026-12-10T10:20", "2026-12-10T09:59", "2026-12-10T09:00"),
			policy:  Policy{Hourly: 5},
			keep:    []string{"2026-12-10T10:40", "2026-12-10T09:59"},
			del:     []string{"2026-12-10T10:20", "2026-12-10T09:00"},
			reasons: map[string][]string{"2026-12-10T09:59": {"hourly 2026-12-10T09"}},
		},
		"hourly buckets follow a half-hour offset": {
			// 15:30, 15:50 and 16:10 in India.
			items:   retItems("2026-12-10T10:00", "2026-12-10T10:20", "2026-12-10T10:40"),
			policy:  Policy{Hourly: 3},
			zone:    "Asia/Kolkata",
			keep:    []string{"2026-12-10T10:40", "2026-12-10T10:20"},
			del:     []string{"2026-12-10T10:00"},
			reasons: map[string][]string{"2026-12-10T10:40": {"newest ready", "hourly 2026-12-10T16"}, "2026-12-10T10:20": {"hourly 2026-12-10T15"}},
		},
		"a snapshot at 20:00 UTC falls into the next day in India": {
			items:   retItems("2026-12-06T17:00", "2026-12-06T20:00"),
			policy:  Policy{Daily: 2},
			zone:    "Asia/Kolkata",
			keep:    []string{"2026-12-06T20:00", "2026-12-06T17:00"},
			reasons: map[string][]string{"2026-12-06T20:00": {"newest ready", "daily 2026-12-07"}, "2026-12-06T17:00": {"daily 2026-12-06"}},
		},
		"the same snapshots share one day in UTC": {
			items:  retItems("2026-12-06T17:00", "2026-12-06T20:00"),
			policy: Policy{Daily: 2},
			keep:   []string{"2026-12-06T20:00"},
			del:    []string{"2026-12-06T17:00"},
		},
		"the 25 hours of the day clocks fall back are 25 hourly buckets": {
			items:  fallBack,
			policy: Policy{Hourly: 30},
			zone:   "Europe/Berlin",
			keep:   snapNames(retUTC("2026-10-25T22:00"), time.Hour, 25),
			reasons: map[string][]string{
				"2026-10-24T22:00": {"hourly 2026-10-25T00"},
				"2026-10-25T00:00": {"hourly 2026-10-25T02 CEST"},
				"2026-10-25T01:00": {"hourly 2026-10-25T02 CET"},
				"2026-10-25T02:00": {"hourly 2026-10-25T03"},
				"2026-10-25T22:00": {"newest ready", "hourly 2026-10-25T23"},
			},
		},
		"the 25 hours of the day clocks fall back are one daily bucket": {
			items:   append(slices.Clone(fallBack), snapAt(retUTC("2026-10-24T21:00"))),
			policy:  Policy{Daily: 2},
			zone:    "Europe/Berlin",
			keep:    []string{"2026-10-25T22:00", "2026-10-24T21:00"},
			del:     snapNames(retUTC("2026-10-25T21:00"), time.Hour, 24),
			reasons: map[string][]string{"2026-10-25T22:00": {"newest ready", "daily 2026-10-25"}, "2026-10-24T21:00": {"daily 2026-10-24"}},
		},
		"the 23 hours of the day clocks spring forward are 23 hourly buckets": {
			items:   springForward,
			policy:  Policy{Hourly: 30},
			zone:    "Europe/Berlin",
			keep:    snapNames(retUTC("2026-03-29T21:00"), time.Hour, 23),
			reasons: map[string][]string{"2026-03-29T00:00": {"hourly 2026-03-29T01"}, "2026-03-29T01:00": {"hourly 2026-03-29T03"}},
		},
		"ISO weeks run across the new year": {
			// Thursday 2026-12-31 and Friday 2027-01-01 are both in
			// 2026-W53 (Monday 12-28 to Sunday 01-03); 2027-W01 starts
			// on Monday 2027-01-04.
			items:  retItems("2026-12-27T12:00", "2026-12-28T12:00", "2026-12-31T12:00", "2027-01-01T12:00", "2027-01-03T12:00", "2027-01-04T12:00"),
			policy: Policy{Weekly: 5},
			now:    retUTC("2027-01-05T00:00"),
			keep:   []string{"2027-01-04T12:00", "2027-01-03T12:00", "2026-12-27T12:00"},
			del:    []string{"2027-01-01T12:00", "2026-12-31T12:00", "2026-12-28T12:00"},
			reasons: map[string][]string{
				"2027-01-04T12:00": {"newest ready", "weekly 2027-W01"},
				"2027-01-03T12:00": {"weekly 2026-W53"},
				"2026-12-27T12:00": {"weekly 2026-W52"},
			},
		},
		"years are calendar years": {
			items:   retItems("2026-12-30T12:00", "2026-12-31T12:00", "2027-01-01T12:00", "2027-01-04T12:00"),
			policy:  Policy{Yearly: 3},
			keep:    []string{"2027-01-04T12:00", "2026-12-31T12:00"},
			del:     []string{"2027-01-01T12:00", "2026-12-30T12:00"},
			reasons: map[string][]string{"2026-12-31T12:00": {"yearly 2026"}},
		},
		"a leap day is its own day": {
			items:   retItems("2028-02-28T12:00", "2028-02-29T12:00", "2028-03-01T12:00"),
			policy:  Policy{Daily: 3},
			keep:    []string{"2028-03-01T12:00", "2028-02-29T12:00", "2028-02-28T12:00"},
			reasons: map[string][]string{"2028-02-29T12:00": {"daily 2028-02-29"}},
		},
		"a leap day is in February": {
			items:   retItems("2028-02-28T12:00", "2028-02-29T12:00", "2028-03-01T12:00"),
			policy:  Policy{Monthly: 2},
			keep:    []string{"2028-03-01T12:00", "2028-02-29T12:00"},
			del:     []string{"2028-02-28T12:00"},
			reasons: map[string][]string{"2028-03-01T12:00": {"newest ready", "monthly 2028-03"}, "2028-02-29T12:00": {"monthly 2028-02"}},
		},
		"a month ends at midnight UTC": {
			items:  retItems("2026-01-15T12:00", "2026-01-31T23:30", "2026-02-01T00:30"),
			policy: Policy{Monthly: 2},
			keep:   []string{"2026-02-01T00:30", "2026-01-31T23:30"},
			del:    []string{"2026-01-15T12:00"},
		},
		"a month ends at local midnight": {
			// 2026-01-31T23:30 UTC is already February in Berlin.
			items:   retItems("2026-01-15T12:00", "2026-01-31T23:30", "2026-02-01T00:30"),
			policy:  Policy{Monthly: 2},
			zone:    "Europe/Berlin",
			keep:    []string{"2026-02-01T00:30", "2026-01-15T12:00"},
			del:     []string{"2026-01-31T23:30"},
			reasons: map[string][]string{"2026-01-15T12:00": {"monthly 2026-01"}},
		},
		"a bucket rule skips what is not ready": {
			items:   []Item{snapAt(retUTC("2026-12-10T12:00")), snapAt(retUTC("2026-12-09T18:00"), asFailed), snapAt(retUTC("2026-12-09T12:00")), snapAt(retUTC("2026-12-08T12:00"))},
			policy:  Policy{Daily: 2},
			keep:    []string{"2026-12-10T12:00", "2026-12-09T12:00"},
			del:     []string{"2026-12-09T18:00", "2026-12-08T12:00"},
			reasons: map[string][]string{"2026-12-09T12:00": {"daily 2026-12-09"}},
		},
		"the rules add up": {
			items:  retSeries(retUTC("2026-12-10T12:00"), 24*time.Hour, 400),
			policy: Policy{KeepLast: 1, Daily: 2, Monthly: 2, Yearly: 2},
			keep:   []string{"2026-12-10T12:00", "2026-12-09T12:00", "2026-11-30T12:00", "2025-12-31T12:00"},
			reasons: map[string][]string{
				"2026-12-10T12:00": {"newest ready", "keepLast 1/1", "daily 2026-12-10", "monthly 2026-12", "yearly 2026"},
				"2025-12-31T12:00": {"yearly 2025"},
			},
			del: slices.DeleteFunc(snapNames(retUTC("2026-12-10T12:00"), 24*time.Hour, 400), func(n string) bool {
				return slices.Contains([]string{"2026-12-10T12:00", "2026-12-09T12:00", "2026-11-30T12:00", "2025-12-31T12:00"}, n)
			}),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) { tc.run(t) })
	}
}

func TestDecideCountsTheKeptSnapshots(t *testing.T) {
	d := Decide([]Item{
		snapAt(retT0, asFailed), snapAt(retT0.Add(-time.Hour), asNotReady), snapAt(retT0.Add(-2 * time.Hour)),
		snapAt(retT0.Add(-3*time.Hour), asFailed), snapAt(retT0.Add(-4*time.Hour), asFailed, asProtected),
		snapAt(retT0.Add(-5 * time.Hour)), snapAt(retT0.Add(-6*time.Hour), asDeleting), snapAt(retT0.Add(-7 * time.Hour)),
	}, Policy{KeepLast: 2}, retT0, time.UTC)
	if d.Ready != 2 || d.Failed != 2 || d.NewestReady != snapName(retT0.Add(-2*time.Hour)) {
		t.Errorf("Ready %d, Failed %d, NewestReady %q; want 2, 2 (the newest, and the protected one), %q",
			d.Ready, d.Failed, d.NewestReady, snapName(retT0.Add(-2*time.Hour)))
	}
	if len(d.Keep)+len(d.Delete) != 7 {
		t.Errorf("%d kept and %d deleted of the 7 not being deleted", len(d.Keep), len(d.Delete))
	}
	if d := Decide([]Item{snapAt(retT0, asFailed)}, Policy{KeepLast: 1}, retT0, time.UTC); d.NewestReady != "" || d.Ready != 0 || d.Failed != 1 {
		t.Errorf("none ready: %+v", d)
	}
}

func TestDecideDoesNotDependOnOrderNorModifyItems(t *testing.T) {
	in := retSeries(retT0, 17*time.Minute, 2000)
	for i := range in {
		switch i % 7 {
		case 0:
			in[i].Ready = false
		case 1:
			in[i].Protected = true
		case 2:
			in[i].Deleting = true
		}
	}
	in = append(in, Item{Name: "tie-a", Time: retT0.Add(-time.Hour), Ready: true}, Item{Name: "tie-b", Time: retT0.Add(-time.Hour), Ready: true})
	p := Policy{KeepLast: 5, Hourly: 10, Daily: 3, Weekly: 2, MaxAge: 10 * 24 * time.Hour}
	loc, _ := Location("Europe/Berlin")
	want := Decide(in, p, retT0, loc)

	rng := rand.New(rand.NewPCG(1, 2))
	for range 3 {
		shuffled := slices.Clone(in)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		before := slices.Clone(shuffled)
		got := Decide(shuffled, p, retT0, loc)
		if !slices.Equal(shuffled, before) {
			t.Fatal("Decide modified its input")
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatal("Decide depends on the order of its input")
		}
	}
}

func TestDecideReasonsDoNotShareStorage(t *testing.T) {
	d := Decide(retSeries(retT0, time.Hour, 3), Policy{MaxAge: 7 * 24 * time.Hour}, retT0, time.UTC)
	d.Keep[0].Reasons = append(d.Keep[0].Reasons, "extra")
	if got := d.Keep[1].Reasons; !slices.Equal(got, []string{"within maxAge 7d"}) {
		t.Errorf("appending to one item's reasons changed the next one's: %q", got)
	}
}

// A whole schedule's series at its largest: 100,000 snapshots a minute
// apart, from 2026-10-02T13:20 to 2026-12-10T23:59 UTC (69 days 10 h 39
// min). Kept: the newest 24 (keepLast, which also hold December's monthly
// and the daily and weekly of 12-10), 23:59 of 12-09 back to 12-04 (daily;
// Sunday 12-06 is also W49's weekly), of Sundays 11-29 and 11-22 (weekly),
// of 11-30 and 10-31 (monthly; no month before October has one):
// 24 + 6 + 2 + 2 = 34.
func TestDecideAHundredThousand(t *testing.T) {
	newest := retUTC("2026-12-10T23:59")
	in := retSeries(newest, time.Minute, 100_000)
	d := Decide(in, Policy{KeepLast: 24, Daily: 7, Weekly: 4, Monthly: 12}, newest, time.UTC)
	want := append(snapNames(newest, time.Minute, 24),
		"2026-12-09T23:59", "2026-12-08T23:59", "2026-12-07T23:59", "2026-12-06T23:59", "2026-12-05T23:59",
		"2026-12-04T23:59", "2026-11-30T23:59", "2026-11-29T23:59", "2026-11-22T23:59", "2026-10-31T23:59")
	slices.Sort(want)
	slices.Reverse(want)
	if len(d.Keep) != 34 || len(d.Delete) != 100_000-34 {
		t.Fatalf("kept %d and deleted %d, want 34 and %d", len(d.Keep), len(d.Delete), 100_000-34)
	}
	if got := keptNames(d); !slices.Equal(got, want) {
		t.Errorf("kept %v\nwant %v", got, want)
	}
	if in[0].Name != "2026-10-02T13:20" {
		t.Errorf("the oldest is %s: the comment above is wrong", in[0].Name)
	}
}

func TestPolicyFrom(t *testing.T) {
	n := func(v int32) *int32 { return &v }
	s := func(v string) *string { return &v }
	cases := map[string]struct {
		in      v1alpha1.RetentionPolicy
		want    Policy
		wantErr []string // substrings of the error; none when nil
	}{
		"every field": {
			in:   v1alpha1.RetentionPolicy{KeepLast: n(1), Hourly: n(2), Daily: n(3), Weekly: n(4), Monthly: n(5), Yearly: n(6), MaxAge: s("36h")},
			want: Policy{KeepLast: 1, Hourly: 2, Daily: 3, Weekly: 4, Monthly: 5, Yearly: 6, MaxAge: 36 * time.Hour},
		},
		"days are accepted":        {in: v1alpha1.RetentionPolicy{MaxAge: s("7d")}, want: Policy{MaxAge: 7 * 24 * time.Hour}},
		"weeks are accepted":       {in: v1alpha1.RetentionPolicy{MaxAge: s("2w")}, want: Policy{MaxAge: 14 * 24 * time.Hour}},
		"one count rule is enough": {in: v1alpha1.RetentionPolicy{Daily: n(7)}, want: Policy{Daily: 7}},
		"an empty policy is refused": {
			wantErr: []string{"set at least one of keepLast, hourly, daily, weekly, monthly, yearly or maxAge"},
		},
		"a zero count is refused": {
			in:      v1alpha1.RetentionPolicy{KeepLast: n(0)},
			wantErr: []string{"retention.keepLast: must be at least 1"},
		},
		"a negative count is refused": {
			in:      v1alpha1.RetentionPolicy{Daily: n(3), Yearly: n(-1)},
			wantErr: []string{"retention.yearly: must be at least 1"},
		},
		"a bad maxAge is refused": {
			in:      v1alpha1.RetentionPolicy{KeepLast: n(3), MaxAge: s("a week")},
			wantErr: []string{"retention.maxAge:", `"a week"`},
		},
		"a zero maxAge is refused": {
			in:      v1alpha1.RetentionPolicy{MaxAge: s("0d")},
			wantErr: []string{"retention.maxAge:"},
		},
		"every field at fault is named": {
			in:      v1alpha1.RetentionPolicy{Hourly: n(0), Monthly: n(0), MaxAge: s("-1h")},
			wantErr: []string{"retention.hourly:", "retention.monthly:", "retention.maxAge:"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := PolicyFrom(tc.in)
			if tc.wantErr == nil {
				if err != nil || got != tc.want {
					t.Fatalf("PolicyFrom = %+v, %v; want %+v", got, err, tc.want)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrRetention) {
				t.Fatalf("PolicyFrom = %+v, %v; want an ErrRetention", got, err)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestBehind(t *testing.T) {
	h := time.Hour
	cases := map[string]struct {
		items []Item
		want  int
	}{
		"nothing":                          {nil, 0},
		"all ready":                        {retSeries(retT0, h, 3), 0},
		"one in progress behind the ready": {[]Item{snapAt(retT0, asNotReady), snapAt(retT0.Add(-h))}, 1},
		"two behind the ready":             {[]Item{snapAt(retT0, asNotReady), snapAt(retT0.Add(-h), asFailed), snapAt(retT0.Add(-2 * h))}, 2},
		"not-ready ones older than the ready do not count": {
			[]Item{snapAt(retT0, asNotReady), snapAt(retT0.Add(-h)), snapAt(retT0.Add(-2*h), asFailed), snapAt(retT0.Add(-3*h), asFailed)}, 1,
		},
		"none ready: all not-ready ones count": {[]Item{snapAt(retT0, asFailed), snapAt(retT0.Add(-h), asNotReady), snapAt(retT0.Add(-2*h), asFailed)}, 3},
		"items being deleted do not count": {
			[]Item{snapAt(retT0, asNotReady, asDeleting), snapAt(retT0.Add(-h), asNotReady), snapAt(retT0.Add(-2 * h))}, 1,
		},
		"a ready item being deleted is not the newest ready": {
			[]Item{snapAt(retT0, asNotReady), snapAt(retT0.Add(-h), asDeleting), snapAt(retT0.Add(-2*h), asFailed), snapAt(retT0.Add(-3 * h))}, 2,
		},
		"order does not matter": {[]Item{snapAt(retT0.Add(-2 * h)), snapAt(retT0, asNotReady), snapAt(retT0.Add(-h), asNotReady)}, 2},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Behind(tc.items); got != tc.want {
				t.Errorf("Behind = %d, want %d", got, tc.want)
			}
		})
	}
}
