package main

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func TestParseScale(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []int
		err      bool
	}{
		{"sizes are sorted and deduplicated", "5000, 500,20000,500", []int{500, 5000, 20000}, false},
		{"an empty list skips the scale runs", "", nil, false},
		{"a zero size is refused", "0,500", nil, true},
		{"a word is refused", "500,many", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseScale(tc.in)
			if (err != nil) != tc.err {
				t.Fatalf("parseScale(%q) error %v, want error %v", tc.in, err, tc.err)
			}
			if !tc.err && !slices.Equal(got, tc.want) {
				t.Fatalf("parseScale(%q) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

func TestGrowthPerTenfold(t *testing.T) {
	at := func(n int, secs float64) *scenarioResult {
		return &scenarioResult{N: n, Create: phase{Duration: time.Duration(secs * float64(time.Second))}}
	}
	f := func(s *scenarioResult) float64 { return s.Create.Duration.Seconds() }
	for _, tc := range []struct {
		name       string
		prev, cur  *scenarioResult
		comparable bool
		want       float64
		ok         bool
	}{
		{"a linear figure grows ten times per tenfold N", at(500, 4), at(5000, 40), true, 10, true},
		{"a linear figure over 4x N still reads as ten per tenfold", at(5000, 40), at(20000, 160), true, 10, true},
		{"a constant figure reads as one", at(500, 7), at(20000, 7), true, 1, true},
		{"rows of different paths are not compared", at(500, 4), at(5000, 40), false, 0, false},
		{"a zero figure has no growth", at(500, 0), at(5000, 40), true, 0, false},
		{"no row above has no growth", nil, at(5000, 40), true, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := growthOf(tc.prev, tc.cur, f, tc.comparable)
			if ok != tc.ok || math.Abs(got-tc.want) > 1e-9 {
				t.Fatalf("growthOf = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestMockReadyDelayStaysInTheRange(t *testing.T) {
	lo, hi := readyRange("5s-30s")
	if lo != 5*time.Second || hi != 30*time.Second {
		t.Fatalf("readyRange(5s-30s) = %s, %s", lo, hi)
	}
	seen := map[time.Duration]bool{}
	for i := 1; i <= 200; i++ {
		d := mockReadyDelay(strings.Repeat("x", i%7)+string(rune('0'+i%10)), lo, hi)
		if d < lo || d > hi {
			t.Fatalf("delay %s outside [%s, %s]", d, lo, hi)
		}
		seen[d] = true
	}
	if len(seen) < 10 {
		t.Fatalf("only %d distinct delays: the spread is lost", len(seen))
	}
	if d := mockReadyDelay("1", 5*time.Second, 0); d != 5*time.Second {
		t.Fatalf("a single bound must give that delay, got %s", d)
	}
}

func TestMemoryPerSnapshot(t *testing.T) {
	s := &steadyResult{M: 1000, Baseline: startWindow{HWMkB: 40 * 1024}, Start: startWindow{HWMkB: 50 * 1024}}
	if got := s.bytesPerSnapshot(); got != 10*1024*1024/1000.0 {
		t.Fatalf("bytesPerSnapshot = %v", got)
	}
	if got := (&steadyResult{M: 1000, Start: startWindow{HWMkB: 50 * 1024}}).bytesPerSnapshot(); got != 0 {
		t.Fatalf("without a baseline the figure must be unknown (0), got %v", got)
	}
}

func TestReportRendersEmptySections(t *testing.T) {
	r := &report{opts: options{scale: "50,200", coldStartM: 2000, steadyM: 100}}
	md := r.markdown()
	for _, want := range []string{"## Analysis", "## Cold start over 2000 ready snapshots", "(not run)"} {
		if !strings.Contains(md, want) {
			t.Fatalf("report lacks %q:\n%s", want, md)
		}
	}
}

func TestWatcherCountsFollowEvents(t *testing.T) {
	w := &watcher{timeline: newTimeline()}
	yes := true
	vs := func(name string, ready bool) *snapv1.VolumeSnapshot {
		v := &snapv1.VolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if ready {
			v.Status = &snapv1.VolumeSnapshotStatus{ReadyToUse: &yes}
		}
		return v
	}
	content := &snapv1.VolumeSnapshotContent{ObjectMeta: metav1.ObjectMeta{Name: "c"}}
	w.observe(nil, vs("a", false), false)
	w.observe(nil, vs("b", true), false)
	w.observe(nil, content, false)
	w.observe(vs("a", false), vs("a", true), false) // a turns ready
	w.observe(vs("a", true), vs("a", true), false)  // an update that changes nothing
	if s, r, c := w.counts(); s != 2 || r != 2 || c != 1 {
		t.Fatalf("after adds and updates: counts %d, %d, %d; want 2, 2, 1", s, r, c)
	}
	w.observe(nil, cache.DeletedFinalStateUnknown{Key: "ns/b", Obj: vs("b", true)}, true)
	w.observe(nil, content, true)
	if s, r, c := w.counts(); s != 1 || r != 1 || c != 0 {
		t.Fatalf("after deletes: counts %d, %d, %d; want 1, 1, 0", s, r, c)
	}
}

func TestScaleRepeatsKeepTheMedianAndGrowTheMedians(t *testing.T) {
	ours := &system{ID: sysOurs, Label: "snapkeeper"}
	run := func(n, k int, ready, deleted float64, failed bool) *scenarioResult {
		s := &scenarioResult{System: ours, N: n, Run: k,
			Create: phase{Duration: time.Duration(ready * float64(time.Second))},
			Delete: phase{Duration: time.Duration(deleted * float64(time.Second))}}
		if failed {
			s.Err = errors.New("timed out")
		}
		return s
	}
	all := []*scenarioResult{
		run(5000, 1, 80, 60, false), run(20000, 1, 320, 240, false),
		run(5000, 2, 70, 58, false), run(20000, 2, 380, 232, false),
		run(5000, 3, 90, 50, false), run(20000, 3, 1, 1, true),
		run(20000, 4, 300, 220, false),
	}
	med := scaleMedians(all)
	if len(med) != 2 || med[0] != all[0] || med[1] != all[1] {
		t.Fatalf("scaleMedians kept %v, want the 80 s run at 5000 and the 320 s run at 20000", med)
	}
	empty := &scenarioResult{System: &system{ID: sysWritesOnly}, N: 5000, Run: 1}
	if got := scaleMedians([]*scenarioResult{all[0], empty, all[1]}); len(got) != 3 || got[0] != all[0] || got[1] != empty || got[2] != all[1] {
		t.Fatalf("scaleMedians must keep the order of the first runs (N, then system), got %v", got)
	}
	if got := scaleMedians([]*scenarioResult{run(500, 1, 1, 1, true), run(500, 2, 2, 2, true)}); len(got) != 1 || got[0].Run != 1 {
		t.Fatalf("with every run failed the first must stand for the size, got %v", got)
	}
	g := scaleGroups(all)
	if len(g) != 2 || len(g[1].runs) != 4 || len(g[1].ok()) != 3 {
		t.Fatalf("scaleGroups = %+v", g)
	}
	// Medians: all-ready 80 -> 320 s, all-deleted 58 -> 232 s: x4 over 4x N, linear.
	for name, f := range map[string]func(*scenarioResult) float64{"all-ready": createSecs, "all-deleted": deleteSecs} {
		if v, ok := g[1].growthOf(&g[0], f, true); !ok || math.Abs(v-10) > 1e-9 {
			t.Fatalf("%s growth of the medians = %v, %v; want x10", name, v, ok)
		}
	}
	r := &report{opts: options{scale: "5000,20000", scaleRepeats: 4}, scaleAll: all, scale: med}
	md := r.markdown()
	for _, want := range []string{"### Over the repeats", "| snapkeeper | 20000 | 3 of 4 |", "run 3 failed",
		"growth per 10× N of each phase's median over the repeats: N 5000→20000: all-ready ×10.0", "all-deleted ×10.0 (58.00 → 232.00 s)"} {
		if !strings.Contains(md, want) {
			t.Fatalf("report lacks %q:\n%s", want, md)
		}
	}
}
