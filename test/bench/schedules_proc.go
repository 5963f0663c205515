package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/snapkeeper/snapkeeper/pkg/apis/snapkeeper/v1alpha1"
	"github.com/snapkeeper/snapkeeper/pkg/schedclient"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

// What the schedule stages share: the schedule component as a process of
// its own, the benchmark's counted client of SnapshotSchedules, the
// schedule they create, and the scheduled times.

const (
	// benchSchedule is the name of the schedule of both schedule stages.
	benchSchedule = "bench-hourly"
	// scheduleQueue is the schedule component's work loop (the name label
	// of its workqueue_* series).
	scheduleQueue = `name="snapkeeper-schedule"`
	// nameTimeLayout is the time part of a scheduled snapshot's name
	// (pkg/schedule.SnapshotName): the scheduled minute in UTC.
	nameTimeLayout = "200601021504"
)

// scheduleClient is a client of SnapshotSchedules whose writes count as the
// benchmark's own (b.cl.own), so they are kept apart from the system's.
func scheduleClient(b *bed) (schedclient.Interface, error) {
	cfg := rest.CopyConfig(b.env.Config)
	cfg.QPS = -1
	own := b.cl.own
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return countingTransport{next: rt, own: own} }
	c, err := schedclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return c.Schedules(benchNamespace), nil
}

// hourlyAt is an hourly schedule over every claim of the bench namespace
// that runs at t's minute past each hour, keeping the keepLast newest.
func hourlyAt(t time.Time, keepLast int32) *v1alpha1.SnapshotSchedule {
	return &v1alpha1.SnapshotSchedule{
		ObjectMeta: metav1.ObjectMeta{Name: benchSchedule, Namespace: benchNamespace},
		Spec: v1alpha1.SnapshotScheduleSpec{
			Schedule:  cronAt(t),
			Retention: v1alpha1.RetentionPolicy{KeepLast: &keepLast},
		},
	}
}

// cronAt is the hourly cron line whose minute is t's (UTC).
func cronAt(t time.Time) string { return fmt.Sprintf("%d * * * *", t.UTC().Minute()) }

// nextMinute is the first full minute at least lead from now: an hourly
// schedule at that minute runs at "the top of its hour" in lead to
// lead + 1 minute.
func nextMinute(lead time.Duration) time.Time {
	return time.Now().Add(lead).Truncate(time.Minute).Add(time.Minute)
}

// sleepUntil waits until t (or ctx ends).
func sleepUntil(ctx context.Context, t time.Time) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Until(t)):
		return nil
	}
}

// reschedule sets the schedule's minute to t's (a spec change: the next
// run is then at t).
func reschedule(ctx context.Context, sc schedclient.Interface, t time.Time) error {
	patch := fmt.Sprintf(`{"spec":{"schedule":%q}}`, cronAt(t))
	_, err := sc.Patch(ctx, benchSchedule, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// startScheduleProcess starts the schedule component of sys (ours or the
// baseline) as a process of its own (`--components=schedules`; the chart
// runs it inside the binder's process, here it is apart so that its memory
// and CPU are its own) as the controller's ServiceAccount, which the chart
// binds to the schedule component's ClusterRole, and waits until it serves
// /readyz (its caches synced). With b.run set, the process joins it (stopped,
// checked and counted with the system); it returns the component and how
// long it took to serve.
func startScheduleProcess(b *bed, sys *system, oursArgs []string, timeout time.Duration) (*framework.Component, time.Duration, error) {
	var bin string
	var err error
	if sys.ID == sysOursBaseline {
		bin, err = baselineBinary()
	} else {
		bin, err = framework.OwnBinary("./cmd/controller")
		ownBuilt = "./cmd/controller"
	}
	if err != nil {
		return nil, 0, err
	}
	kc, err := kubeconfigFor(b.env, roleBinder)
	if err != nil {
		return nil, 0, err
	}
	addr, err := framework.FreeAddr()
	if err != nil {
		return nil, 0, err
	}
	args := []string{"--kubeconfig=" + kc, "--http-endpoint=" + addr, "--components=schedules"}
	if !controllersAsAdmin {
		args = append(args, "--leader-election-namespace="+accountNamespace(roleBinder))
	}
	start := time.Now()
	p, err := framework.StartProcess(b.dir, "snapkeeper-schedules", bin, append(args, oursArgs...))
	if err != nil {
		return nil, 0, err
	}
	c := &framework.Component{Name: "snapkeeper-schedules", HTTPAddr: addr, Proc: p}
	if err := c.WaitReady(timeout); err != nil {
		p.Stop(15 * time.Second)
		return nil, 0, err
	}
	serving := time.Since(start)
	if b.run != nil {
		b.run.procs, b.run.addrs, b.run.ours = append(b.run.procs, p), append(b.run.addrs, addr), append(b.run.ours, c)
	}
	return c, serving, nil
}

// queueWork is the schedule component's workqueue_work_duration_seconds:
// its syncs so far and their summed time.
type queueWork struct {
	Syncs float64
	Sum   time.Duration
}

func scheduleWork(ctx context.Context, c *framework.Component) (queueWork, error) {
	n, err := c.Metric(ctx, "workqueue_work_duration_seconds_count", scheduleQueue)
	if err != nil {
		return queueWork{}, err
	}
	s, err := c.Metric(ctx, "workqueue_work_duration_seconds_sum", scheduleQueue)
	return queueWork{Syncs: n, Sum: time.Duration(s * float64(time.Second))}, err
}

// sub is w − o.
func (w queueWork) sub(o queueWork) queueWork {
	return queueWork{Syncs: w.Syncs - o.Syncs, Sum: w.Sum - o.Sum}
}

// mean is the average sync time (0 without a sync).
func (w queueWork) mean() time.Duration {
	if w.Syncs <= 0 {
		return 0
	}
	return time.Duration(float64(w.Sum) / w.Syncs)
}

// runCounts counts in the watcher's cache the VolumeSnapshots of the run at
// scheduled time t (by the time in their names): how many exist, are
// ready, and are being deleted.
func runCounts(w *watcher, t time.Time) (exist, ready, deleting int) {
	suffix := "-" + t.UTC().Format(nameTimeLayout)
	for _, o := range w.snaps.GetStore().List() {
		vs := o.(*snapv1.VolumeSnapshot)
		if !strings.HasSuffix(vs.Name, suffix) {
			continue
		}
		exist++
		if framework.IsReady(vs) {
			ready++
		}
		if vs.DeletionTimestamp != nil {
			deleting++
		}
	}
	return exist, ready, deleting
}

// addCounts is a + b.
func addCounts(a, b writeCounts) writeCounts {
	out := newWriteCounts()
	for _, w := range []writeCounts{a, b} {
		for k, v := range w.ByKey {
			out.ByKey[k] += v
		}
		for k, v := range w.ByCode {
			out.ByCode[k] += v
		}
	}
	return out
}

// bindClaims binds n claims pvc-00000... in the bench namespace (which
// exists), without the class that prepare creates.
func bindClaims(ctx context.Context, env *framework.Env, n int) error {
	return parallel(ctx, n, 32, func(ctx context.Context, i int) error {
		_, err := env.BindPVC(ctx, benchNamespace, pvcName(i), framework.PVCOptions{Driver: framework.MockDriverName})
		return err
	})
}
