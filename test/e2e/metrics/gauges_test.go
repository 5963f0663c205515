// Package metrics tests the binder's state gauges (pkg/sync/binder/gauges.go,
// docs/metrics.md) on a real API server: each step of a snapshot's life is
// read back from the controller's /metrics.
package metrics

import (
	"context"
	"fmt"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

// waitMetric waits until the sum of the samples of name that carry every
// label fragment is want.
func waitMetric(t *testing.T, c *framework.Component, want float64, name string, labels ...string) {
	t.Helper()
	var last float64
	err := framework.Poll(30*time.Second, fmt.Sprintf("%s%v = %v", name, labels, want), func() (bool, error) {
		v, err := c.Metric(context.Background(), name, labels...)
		last = v
		return err == nil && v == want, err
	})
	if err != nil {
		t.Fatalf("%v (last value %v)", err, last)
	}
}

func TestBinderGaugesFollowASnapshot(t *testing.T) {
	s := framework.NewScenario(t, framework.ScenarioOptions{NoController: true, DefaultClass: true})
	binder := s.StartController(t, "--components=binder")
	drv, class := `driver="`+s.Drv.Name+`"`, `class="`+s.Class+`"`
	phase := func(p string) []string { return []string{drv, class, `phase="` + p + `"`, `component="binder"`} }
	const snaps = "snapkeeper_snapshots"

	// The class alone gives zeros, so an alert sees the count.
	waitMetric(t, binder, 0, snaps, phase("pending")...)
	waitMetric(t, binder, 1, "snapkeeper_driver_default_classes", drv)

	// No CSI side: the binder makes the content, nobody cuts it.
	s.PVC(t, "data")
	s.Snapshot(t, "snap", "data", nil)
	waitMetric(t, binder, 1, snaps, phase("pending")...)
	waitMetric(t, binder, 0, snaps, phase("ready")...)
	// Fed by the binder's CSI presence tracker (CSI side Leases).
	waitMetric(t, binder, 1, "snapkeeper_driver_without_csi_side", drv)

	csi := s.StartController(t, "--components=csi", "--csi-address="+s.Drv.Socket)
	s.WaitReady(t, "snap", 30*time.Second)
	waitMetric(t, binder, 1, snaps, phase("ready")...)
	waitMetric(t, binder, 0, snaps, phase("pending")...)
	waitMetric(t, binder, 1, "snapkeeper_snapshot_time_to_ready_seconds_count", drv)
	waitMetric(t, binder, 1, "snapkeeper_snapshot_time_to_ready_seconds_bucket", drv, `le="+Inf"`)
	waitMetric(t, binder, 0, "snapkeeper_driver_without_csi_side", drv)

	// Without a CSI side the content is never deleted, so the snapshot
	// stays deleting until one runs again.
	csi.Proc.Stop(10 * time.Second)
	s.DeleteSnapshot(t, "snap")
	waitMetric(t, binder, 1, snaps, phase("deleting")...)
	waitMetric(t, binder, 0, snaps, phase("ready")...)
	s.StartController(t, "--components=csi", "--csi-address="+s.Drv.Socket)
	s.WaitSnapshotGone(t, "snap")
	for _, p := range []string{"deleting", "ready", "pending", "error"} {
		waitMetric(t, binder, 0, snaps, phase(p)...)
	}
	// Still one observation: the deletion is no second time to ready.
	waitMetric(t, binder, 1, "snapkeeper_snapshot_time_to_ready_seconds_count", drv)

	// A second default class of the driver.
	s.Env.CreateSnapshotClass(t, framework.SnapshotClass("second-"+s.NS, s.Drv.Name, snapv1.VolumeSnapshotContentDelete, true))
	waitMetric(t, binder, 2, "snapkeeper_driver_default_classes", drv)
	waitMetric(t, binder, 0, snaps, drv, `class="second-`+s.NS+`"`)
}
