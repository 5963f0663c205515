package cachelag

import (
	"runtime"
	"strconv"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// BenchmarkTrackerSize tracks benchObjects objects at once, the way a burst
// of snapshots leaves them between our writes and their events, and
// reports the heap the tracker holds per tracked object (B/object; the
// objects' own UID and resourceVersion strings are shared, not counted) and
// the time to record the writes and drop them on their events
// (ns/object). Run: go test -run '^$' -bench BenchmarkTrackerSize ./pkg/cachelag/
func BenchmarkTrackerSize(b *testing.B) {
	const benchObjects = 10000
	objs := make([][]*metav1.ObjectMeta, benchObjects) // per object: read copy, then each answer
	for i := range objs {
		uid := types.UID("3f1c0a52-6f0e-4b8e-9d6a-" + strconv.Itoa(100000000000+i))
		for v := range 4 {
			objs[i] = append(objs[i], &metav1.ObjectMeta{Name: "snapcontent-" + string(uid), UID: uid,
				ResourceVersion: strconv.Itoa(1000000 + 10*i + v)})
		}
	}
	for _, bc := range []struct {
		name   string
		writes int // chained writes per object
		create bool
	}{
		{name: "one-write", writes: 1},             // the binder's snapshot or claim write
		{name: "three-writes", writes: 3},          // the CSI side's mark, status, unmark
		{name: "created", writes: 0, create: true}, // the binder's new content, until cached
		{name: "created-then-written", writes: 1, create: true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var perObject float64
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				b.StartTimer()
				t := New()
				for _, o := range objs {
					if bc.create {
						t.Begin(Create, &metav1.ObjectMeta{Name: o[0].Name}).Done(o[0], nil)
					}
					for v := range bc.writes {
						t.Begin(Update, o[v]).Done(o[v+1], nil)
					}
				}
				b.StopTimer()
				runtime.GC()
				runtime.ReadMemStats(&after)
				perObject = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / benchObjects
				if t.Len() != benchObjects {
					b.Fatalf("%d entries, want %d", t.Len(), benchObjects)
				}
				b.StartTimer()
				for _, o := range objs {
					t.Observe(o[bc.writes])
				}
				if t.Len() != 0 {
					b.Fatalf("%d entries left after the events", t.Len())
				}
			}
			b.ReportMetric(perObject, "B/object")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchObjects, "ns/object")
		})
	}
}
