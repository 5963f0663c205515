// Package upgrade upgrades a cluster from the previous release
// (hack/previous-release) to the working tree, the way an operator would:
// `helm install` of the released chart with the released binaries, `helm
// upgrade` to this tree's chart, and a rolling swap of the processes to this
// tree's binaries, with snapshots ready and in flight meanwhile. It checks
// that nothing ready is cut or written again, that what was in flight
// finishes, that new snapshots and deletes work after, and measures the
// webhook's refusals during the swap (docs/releases.md, "Upgrades").
package upgrade

import (
	"context"
	"fmt"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"

	"github.com/snapkeeper/snapkeeper/pkg/csi/csitest"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

// The workload at the upgrade.
const (
	readyN   = 20 // ready snapshots made by the previous release
	pollingN = 2  // cut, not ready yet at the swap (the driver says readyToUse=false)
	cuttingN = 2  // CreateSnapshot not answered at the swap (the driver holds the call)
	afterN   = 3  // made by the new release after the swap
	// holdNew holds the new CSI side's first CreateSnapshot calls, so that
	// the quiet window below sees no in-flight snapshot finish.
	holdNew = 8 * time.Second
	// quiet is the window after the new CSI side leads in which no
	// snapshot object may be written: the ready ones need nothing, the
	// in-flight ones wait for the driver.
	quiet = 3 * time.Second
	// stable is how long the new processes must run without exiting.
	stable = 30 * time.Second
)

// figures are the measurements docs/releases.md quotes.
type figures struct {
	From, To                    string
	BuildPrevious, BuildCurrent time.Duration
	BinderHandover, CSIHandover time.Duration
	AgainHandover               time.Duration    // this tree's binder replaced by another replica of it
	OldStop                     [3]time.Duration // webhook, binder, CSI side
	Webhook                     probeReport
	QuietWrites                 framework.APIWrites
	SwapWrites                  framework.APIWrites
	FinishInFlight              time.Duration
	Wall                        time.Duration
}

func (f *figures) log(t *testing.T) {
	t.Logf("figures: %s -> %s; build %s %s, this tree %s; old processes stopped in webhook %s, binder %s, CSI side %s; "+
		"Lease handover binder %s, CSI side %s, this tree to this tree %s; webhook during the swap: %s; snapshot writes in the %s quiet window: %s; "+
		"snapshot writes from the swap until the in-flight ones were ready (%s): %s; wall %s",
		f.From, f.To, f.From, f.BuildPrevious.Round(time.Second), f.BuildCurrent.Round(time.Second),
		f.OldStop[0].Round(time.Millisecond), f.OldStop[1].Round(time.Millisecond), f.OldStop[2].Round(time.Millisecond),
		f.BinderHandover.Round(time.Millisecond), f.CSIHandover.Round(time.Millisecond), f.AgainHandover.Round(time.Millisecond), f.Webhook, quiet,
		f.QuietWrites, f.FinishInFlight.Round(time.Millisecond), f.SwapWrites, f.Wall.Round(time.Second))
}

func contract(k framework.WriteKey) bool { return framework.IsContractWrite(k) }

// TestUpgradeFromPreviousRelease: the previous release's chart and
// binaries make snapshots; `helm upgrade` to this tree's chart and a
// rolling swap to this tree's binaries leave every ready snapshot alone,
// finish the ones in flight, and the upgraded release makes and deletes
// snapshots without leaking backend snapshots.
func TestUpgradeFromPreviousRelease(t *testing.T) {
	start := time.Now()
	rel := previousRelease(t)
	csitest.Binary(t) // skip (or fail with SNAPKEEPER_REQUIRE_MOCK_CSI=1) before any build without the driver
	h := framework.NewHelm(t, "")
	prev := buildPrevious(t, h, rel)
	cur := buildCurrent(t, h)
	fig := &figures{From: prev.Version, To: cur.Version, BuildPrevious: prev.BuildTime, BuildCurrent: cur.BuildTime}
	defer func() { fig.Wall = time.Since(start); fig.log(t) }()

	c := newCluster(t)
	h.Kubeconfig = c.env.Kubeconfig
	c.helm = h
	c.install(t, prev)
	old := c.startStack(t, prev, "old")
	c.routeWebhook(t, old.webhookAddr)
	c.classes(t)
	w := c.makeWorkload(t)
	c.upgrade(t, cur)
	sw := c.rollOut(t, old, cur, w, fig)
	c.finish(t, w, sw, fig)
	c.afterUpgrade(t)
	c.checkStable(t, sw)
	c.rollAgain(t, sw, cur, fig)
	c.deleteAll(t)
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	env := ownControlPlane(t)
	c := &cluster{env: env, ns: env.Namespace(t), drvNS: env.Namespace(t), apps: env.Namespace(t),
		installArgs:      []string{"--set", "certificates.mode=selfManaged"},
		driverChartValue: []string{"--set", "driver.name=" + framework.MockDriverName}}
	c.drv = env.StartCSIDriver(t, framework.CSIDriverOptions{})
	c.svc = framework.StartService(t)
	return c
}

// routeWebhook sends the chart's webhook configurations to the Service
// stand-in with addr as its one endpoint, and waits until the API server
// gets answers (the webhook has filled caBundle by then).
func (c *cluster) routeWebhook(t *testing.T, addr string) {
	t.Helper()
	c.svc.SetEndpoints(addr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := framework.PointWebhooksAt(ctx, c.env, webhookDeployment, c.svc.Addr); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, "the API server to send requests to the webhook", func() (bool, error) {
		o, err := judge(ctx, c.env)
		if o == admitted {
			t.Fatal("a class the webhook must deny was admitted")
		}
		return o == judged, err
	})
}

// classes: a default snapshot class and a default group class of the
// driver, created through the webhook.
func (c *cluster) classes(t *testing.T) {
	t.Helper()
	c.env.CreateSnapshotClass(t, framework.SnapshotClass("upgrade", framework.MockDriverName, snapv1.VolumeSnapshotContentDelete, true))
	createGroupClass(t, c.env)
	c.env.CreateBoundPVC(t, c.apps, "data", framework.PVCOptions{Driver: framework.MockDriverName})
	labelled(t, c.env, c.apps, "db-0", "db-1")
}

// names is prefix-00, prefix-01, ...
func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%02d", prefix, i)
	}
	return out
}

func (c *cluster) createSnapshots(t *testing.T, names []string) {
	t.Helper()
	for _, n := range names {
		c.env.CreateSnapshot(t, framework.DynamicSnapshot(c.apps, n, "data", nil))
	}
}
