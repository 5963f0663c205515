package schedule

import (
	"strconv"
	"testing"
	"time"
)

// BenchmarkDecide runs the policy of an hourly schedule over one claim's
// series (1,000) and over a whole schedule's (100,000), with a few
// not-ready items, as a retention pass sees them.
func BenchmarkDecide(b *testing.B) {
	newest := time.Date(2026, 12, 10, 23, 59, 0, 0, time.UTC)
	loc, err := Location("Europe/Berlin")
	if err != nil {
		b.Fatal(err)
	}
	p := Policy{KeepLast: 24, Daily: 7, Weekly: 4, Monthly: 12, MaxAge: 400 * 24 * time.Hour}
	for _, n := range []int{1_000, 100_000} {
		in := retSeries(newest, time.Minute, n)
		for i := range in {
			if i%97 == 0 {
				in[i].Ready, in[i].Failed = false, true
			}
		}
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Decide(in, p, newest, loc)
			}
		})
	}
}
