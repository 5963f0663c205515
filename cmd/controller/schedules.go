package main

import (
	"context"
	"time"

	snapinformers "github.com/kubernetes-csi/external-snapshotter/client/v8/informers/externalversions"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	"k8s.io/klog/v2"

	"github.com/snapkeeper/snapkeeper/pkg/apis/snapkeeper/v1alpha1"
	"github.com/snapkeeper/snapkeeper/pkg/cachetrim"
	"github.com/snapkeeper/snapkeeper/pkg/schedclient"
	"github.com/snapkeeper/snapkeeper/pkg/schedule"
	"github.com/snapkeeper/snapkeeper/pkg/sync/scheduler"
	"github.com/snapkeeper/snapkeeper/pkg/writer"
)

// SchedulesLease is the schedule component's Lease: one leader cuts and
// prunes, so a scheduled time is cut once.
const SchedulesLease = "snapkeeper-schedules-leader"

// runSchedules runs the schedule component under its own Lease. It waits
// for the SnapshotSchedule CRD (the chart installs it with the others).
func (o *Options) runSchedules(ctx context.Context, cl *clients, reg *prometheus.Registry, h *health, groups bool) error {
	if err := waitForScheduleCRD(ctx, cl.kube.Discovery(), o.RetryCRDIntervalMax); err != nil {
		return err
	}
	sched, err := schedclient.NewForConfig(cl.config)
	if err != nil {
		return err
	}
	kubeInf := informers.NewSharedInformerFactoryWithOptions(cl.watchKube, o.ResyncPeriod, informers.WithTransform(cachetrim.DropManagedFields))
	// Only scheduled snapshots are the component's business: the label
	// keeps every other snapshot of the cluster out of its cache.
	snapInf := snapinformers.NewSharedInformerFactoryWithOptions(cl.watchSnap, o.ResyncPeriod,
		snapinformers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = schedule.LabelSchedule }))
	schedInf := schedclient.NewInformer(sched, o.ResyncPeriod, nil)
	componentReg := prometheus.WrapRegistererWith(prometheus.Labels{"component": "schedules"}, reg)
	w := writer.New(cl.kube, cl.snap, componentReg)
	w.SetSchedules(sched)
	registerCacheLag(componentReg, w.Lag())
	c, err := scheduler.New(scheduler.Config{
		Writer:        w,
		KubeInformers: kubeInf,
		SnapInformers: snapInf,
		Schedules:     schedInf,
		Recorder:      newRecorder(ctx, cl.kube, "snapkeeper-schedules"),
		Metrics:       scheduler.NewMetrics(reg),
		Workers:       max(1, o.Workers/10),
		Backoff:       o.backoff(),
		Groups:        groups,
	})
	if err != nil {
		return err
	}
	h.addReady(c.HasSynced)
	kubeInf.Start(ctx.Done())
	snapInf.Start(ctx.Done())
	go schedInf.Run(ctx.Done())
	return o.withLeaderElection(ctx, cl.kube, SchedulesLease, h, untilDone(c.Run))
}

// waitForScheduleCRD waits until snapkeeper.io/v1alpha1 is served, saying
// once why the component does not start yet.
func waitForScheduleCRD(ctx context.Context, dc discovery.DiscoveryInterface, intervalMax time.Duration) error {
	delay := 100 * time.Millisecond
	warned := false
	for {
		_, err := dc.ServerResourcesForGroupVersion(v1alpha1.SchemeGroupVersion.String())
		if err == nil {
			return nil
		}
		if !warned {
			klog.Warningf("The SnapshotSchedule CRD (%s) is not served: the schedule component waits for it; install it (charts/snapkeeper/files/crds/snapkeeper.io_snapshotschedules.yaml): %v", v1alpha1.SchemeGroupVersion, err)
			warned = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, max(intervalMax, time.Second))
	}
}
