package binder

import (
	"strings"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/snapkeeper/snapkeeper/pkg/sync/testkit"
)

func newGauges(t *testing.T, configure func(*Config), opts GaugeOptions, objs ...runtime.Object) *Gauges {
	t.Helper()
	h := newHarnessWith(t, configure, objs...)
	g, err := NewGauges(h.c, opts)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func readySnapshot(name string, ready bool, opts ...testkit.SnapshotOption) *snapv1.VolumeSnapshot {
	vs := testkit.Snapshot(name, opts...)
	if vs.Status == nil {
		vs.Status = &snapv1.VolumeSnapshotStatus{}
	}
	vs.Status.ReadyToUse = ptr.To(ready)
	return vs
}

func TestSnapshotGaugesCountPhasesFromTheCache(t *testing.T) {
	gold := testkit.ClassName("gold")
	ready := readySnapshot("ready", true, gold)
	errored := testkit.Snapshot("errored", gold)
	errored.Status = &snapv1.VolumeSnapshotStatus{Error: &snapv1.VolumeSnapshotError{Message: ptr.To("boom")}}
	// The driver of a bound snapshot is its content's, and so is the class
	// of a snapshot that names none.
	bound := testkit.Snapshot("bound", testkit.BoundTo("c-bound"))
	content := testkit.Content("c-bound", testkit.Driver("other.driver"), testkit.ClassName("silver"))
	g := newGauges(t, nil, GaugeOptions{},
		testkit.SnapshotClass("gold"), testkit.SnapshotClass("empty"), ready, errored, bound, content,
		testkit.Snapshot("pending", gold), testkit.Snapshot("deleting", gold, testkit.Deleted()),
		testkit.Snapshot("orphan"))

	want := `
# HELP snapkeeper_snapshots VolumeSnapshots in the binder's cache by driver, class and phase (ready, pending, error, deleting).
# TYPE snapkeeper_snapshots gauge
snapkeeper_snapshots{class="",driver="unknown",phase="deleting"} 0
snapkeeper_snapshots{class="",driver="unknown",phase="error"} 0
snapkeeper_snapshots{class="",driver="unknown",phase="pending"} 1
snapkeeper_snapshots{class="",driver="unknown",phase="ready"} 0
snapkeeper_snapshots{class="empty",driver="drv.example.com",phase="deleting"} 0
snapkeeper_snapshots{class="empty",driver="drv.example.com",phase="error"} 0
snapkeeper_snapshots{class="empty",driver="drv.example.com",phase="pending"} 0
snapkeeper_snapshots{class="empty",driver="drv.example.com",phase="ready"} 0
snapkeeper_snapshots{class="gold",driver="drv.example.com",phase="deleting"} 1
snapkeeper_snapshots{class="gold",driver="drv.example.com",phase="error"} 1
snapkeeper_snapshots{class="gold",driver="drv.example.com",phase="pending"} 1
snapkeeper_snapshots{class="gold",driver="drv.example.com",phase="ready"} 1
snapkeeper_snapshots{class="silver",driver="other.driver",phase="deleting"} 0
snapkeeper_snapshots{class="silver",driver="other.driver",phase="error"} 0
snapkeeper_snapshots{class="silver",driver="other.driver",phase="pending"} 1
snapkeeper_snapshots{class="silver",driver="other.driver",phase="ready"} 0
`
	if err := testutil.CollectAndCompare(g, strings.NewReader(want), "snapkeeper_snapshots"); err != nil {
		t.Fatal(err)
	}
}

func TestDefaultClassGauges(t *testing.T) {
	g := newGauges(t, func(c *Config) { c.Groups = true }, GaugeOptions{},
		testkit.SnapshotClass("a", testkit.DefaultClass()), testkit.SnapshotClass("b", testkit.DefaultClass()),
		testkit.SnapshotClass("c", testkit.Driver("other.driver")),
		testkit.GroupClass("ga", testkit.DefaultClass()), testkit.GroupClass("gb", testkit.Driver("other.driver")))

	want := `
# HELP snapkeeper_driver_default_classes Default VolumeSnapshotClasses of each driver that has a class; more than 1 makes snapshots without a class fail.
# TYPE snapkeeper_driver_default_classes gauge
snapkeeper_driver_default_classes{driver="drv.example.com"} 2
snapkeeper_driver_default_classes{driver="other.driver"} 0
# HELP snapkeeper_driver_default_group_classes Default VolumeGroupSnapshotClasses of each driver that has a group class.
# TYPE snapkeeper_driver_default_group_classes gauge
snapkeeper_driver_default_group_classes{driver="drv.example.com"} 1
snapkeeper_driver_default_group_classes{driver="other.driver"} 0
`
	if err := testutil.CollectAndCompare(g, strings.NewReader(want),
		"snapkeeper_driver_default_classes", "snapkeeper_driver_default_group_classes"); err != nil {
		t.Fatal(err)
	}
}

func TestDriverWithoutCSISideFollowsTheHook(t *testing.T) {
	objs := []runtime.Object{testkit.SnapshotClass("a"), testkit.SnapshotClass("b", testkit.Driver("other.driver"))}
	g := newGauges(t, nil, GaugeOptions{}, objs...)
	if n := testutil.CollectAndCount(g, "snapkeeper_driver_without_csi_side"); n != 0 {
		t.Fatalf("without a hook the gauge is absent, got %d series", n)
	}
	g = newGauges(t, nil, GaugeOptions{WithoutCSISide: func(d string) bool { return d == "other.driver" }}, objs...)
	want := `
# HELP snapkeeper_driver_without_csi_side 1 when a driver of a class or snapshot has no running CSI side, else 0.
# TYPE snapkeeper_driver_without_csi_side gauge
snapkeeper_driver_without_csi_side{driver="drv.example.com"} 0
snapkeeper_driver_without_csi_side{driver="other.driver"} 1
`
	if err := testutil.CollectAndCompare(g, strings.NewReader(want), "snapkeeper_driver_without_csi_side"); err != nil {
		t.Fatal(err)
	}
}

func TestTimeToReadyIsObservedOnceOnTheTransition(t *testing.T) {
	now := testkit.Time.Add(42 * time.Second)
	g := newGauges(t, nil, GaugeOptions{Now: func() time.Time { return now }}, testkit.SnapshotClass("gold"))
	created := metav1.NewTime(testkit.Time)
	mk := func(ready bool, opts ...testkit.SnapshotOption) *snapv1.VolumeSnapshot {
		vs := readySnapshot("s", ready, append([]testkit.SnapshotOption{testkit.ClassName("gold")}, opts...)...)
		vs.CreationTimestamp = created
		return vs
	}
	g.onUpdate(mk(false), mk(true))                    // turns ready: observed
	g.onUpdate(mk(true), mk(true))                     // resync or later update: not again
	g.onUpdate(mk(false), mk(false))                   // still pending
	g.onUpdate(mk(false), mk(true, testkit.Deleted())) // ready while deleted: not a success
	want := `
# HELP snapkeeper_snapshot_time_to_ready_seconds Time from a VolumeSnapshot's creationTimestamp to the moment it turned ready, for snapshots that turned ready while this process watched.
# TYPE snapkeeper_snapshot_time_to_ready_seconds histogram
snapkeeper_snapshot_time_to_ready_seconds_bucket{driver="drv.example.com",le="1"} 0
snapkeeper_snapshot_time_to_ready_seconds_bucket{driver="drv.example.com",le="2.5"} 0
snapkeeper_snapshot_time_to_ready_seconds_bucket{driver="drv.example.com",le="5"} 0
snapkeeper_snapshot_time_to_ready_seconds_bucket{driver="drv.example.com",le="10"} 0
snapkeeper_snapshot_time_to_ready_seconds_bucket{driver="drv.example.com",le="30"} 0
snapkeeper_snapshot_time_to_ready_seconds_bucket{driver="drv.example.com",le="60"} 1
snapkeeper_snapshot_time_to_ready_seconds_bucket{driver="drv.example.com",le="120"} 1
snapkeeper_snapshot_time_to_ready_seconds_bucket{driver="drv.example.com",le="300"} 1
snapkeeper_snapshot_time_to_ready_seconds_bucket{driver="drv.example.com",le="600"} 1
snapkeeper_snapshot_time_to_ready_seconds_bucket{driver="drv.example.com",le="1800"} 1
snapkeeper_snapshot_time_to_ready_seconds_bucket{driver="drv.example.com",le="3600"} 1
snapkeeper_snapshot_time_to_ready_seconds_bucket{driver="drv.example.com",le="+Inf"} 1
snapkeeper_snapshot_time_to_ready_seconds_sum{driver="drv.example.com"} 42
snapkeeper_snapshot_time_to_ready_seconds_count{driver="drv.example.com"} 1
`
	if err := testutil.CollectAndCompare(g, strings.NewReader(want), "snapkeeper_snapshot_time_to_ready_seconds"); err != nil {
		t.Fatal(err)
	}
}

func TestGaugesWaitForTheCaches(t *testing.T) {
	g := newGauges(t, nil, GaugeOptions{}, testkit.SnapshotClass("gold"))
	g.c.informers.AddSynced(func() bool { return false })
	if n := testutil.CollectAndCount(g); n != 0 {
		t.Fatalf("an unsynced binder exposes %d series, want none", n)
	}
}
