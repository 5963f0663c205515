package cachetrim

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
)

// The objects in testdata are one snapshot's as a benchmark run left them
// in the API server once ready (make bench-scale, snap-00007 of N=5000, with its managedFields):
// what the binder caches per snapshot (the snapshot, its content, its
// claim and volume) and the CSI side (the content).
var cached = []struct {
	file string
	new  func() any
}{
	{"volumesnapshot.json", func() any { return &snapv1.VolumeSnapshot{} }},
	{"volumesnapshotcontent.json", func() any { return &snapv1.VolumeSnapshotContent{} }},
	{"persistentvolumeclaim.json", func() any { return &corev1.PersistentVolumeClaim{} }},
	{"persistentvolume.json", func() any { return &corev1.PersistentVolume{} }},
}

// BenchmarkCachedBytes reports the heap one cached copy of each object
// takes (bytes/object), with its managedFields and without them (as
// DropManagedFields leaves it): go test -run=^$ -bench=CachedBytes ./pkg/cachetrim
func BenchmarkCachedBytes(b *testing.B) {
	for _, c := range cached {
		raw, err := os.ReadFile(filepath.Join("testdata", c.file))
		if err != nil {
			b.Fatal(err)
		}
		for _, trim := range []bool{false, true} {
			name := c.file[:len(c.file)-len(".json")]
			if trim {
				name += "/without-managedFields"
			} else {
				name += "/as-served"
			}
			b.Run(name, func(b *testing.B) {
				keep := make([]any, 0, b.N)
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				for range b.N {
					obj := c.new()
					if err := json.Unmarshal(raw, obj); err != nil {
						b.Fatal(err)
					}
					if trim {
						obj, _ = DropManagedFields(obj)
					}
					keep = append(keep, obj)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(b.N), "bytes/object")
				runtime.KeepAlive(keep)
			})
		}
	}
}
