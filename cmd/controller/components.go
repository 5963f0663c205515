package main

import (
	"context"
	"time"

	snapinformers "github.com/kubernetes-csi/external-snapshotter/client/v8/informers/externalversions"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/informers"
	"k8s.io/klog/v2"

	"github.com/snapkeeper/snapkeeper/pkg/cachetrim"
	"github.com/snapkeeper/snapkeeper/pkg/sync/binder"
	"github.com/snapkeeper/snapkeeper/pkg/sync/workloop"
	"github.com/snapkeeper/snapkeeper/pkg/writer"
)

func (o *Options) backoff() workloop.Backoff {
	b := workloop.Backoff{Start: o.RetryStart, Max: o.RetryMax}
	if retryBackoff != nil {
		b.Waited = func(loop string, d time.Duration) { retryBackoff.WithLabelValues(loop).Observe(d.Seconds()) }
	}
	return b
}

// runBinder runs the cluster-wide binder under the snapshot-controller Lease.
func (o *Options) runBinder(ctx context.Context, cl *clients, reg *prometheus.Registry, h *health, groups bool) error {
	kubeInf := informers.NewSharedInformerFactoryWithOptions(cl.watchKube, o.ResyncPeriod, informers.WithTransform(cachetrim.DropManagedFields))
	snapInf := snapinformers.NewSharedInformerFactoryWithOptions(cl.watchSnap, o.ResyncPeriod, snapinformers.WithTransform(cachetrim.DropManagedFields))
	leaseInf, leases := o.csiLeases(ctx, cl)
	componentReg := prometheus.WrapRegistererWith(prometheus.Labels{"component": "binder"}, reg)
	w := writer.New(cl.kube, cl.snap, componentReg)
	registerCacheLag(componentReg, w.Lag())
	b, err := binder.New(binder.Config{
		Snap:                    cl.snap,
		Kube:                    cl.kube,
		Writer:                  w,
		KubeInformers:           kubeInf,
		SnapInformers:           snapInf,
		Recorder:                newRecorder(ctx, cl.kube, "snapshot-controller"),
		Metrics:                 binder.NewMetrics(reg),
		Workers:                 o.Workers,
		Backoff:                 o.backoff(),
		Recheck:                 o.Recheck,
		DistributedSnapshotting: o.DistributedSnapshotting,
		SourceVolumeMode:        o.SourceVolumeMode && o.PreventVolumeModeConversion,
		Groups:                  groups,
		Leases:                  leases,
		NoCSISideAfter:          o.NoCSISideAfter,
	})
	if err != nil {
		return err
	}
	if err := registerBinderGauges(componentReg, b); err != nil {
		return err
	}
	h.addReady(b.HasSynced)
	// Caches fill before leadership, so a standby is ready and takes over
	// without a cold start.
	kubeInf.Start(ctx.Done())
	snapInf.Start(ctx.Done())
	if leaseInf != nil {
		leaseInf.Start(ctx.Done())
	}
	return o.withLeaderElection(ctx, cl.kube, BinderLease, h, untilDone(b.Run))
}

// groupsOn reports whether group snapshots run: the feature gate is on (the
// default) and their CRDs are served. Each "no" is logged once with its
// reason; CRDs missing while the gate is on is a warning, as the community
// binaries give one, and the process runs on without groups.
func (o *Options) groupsOn(ctx context.Context, served bool) bool {
	logger := klog.FromContext(ctx)
	switch {
	case !o.GroupSnapshots():
		logger.Info("Volume group snapshots are off (--feature-gates=" + FeatureGroupSnapshots + "=false)")
		return false
	case !served:
		check := "restart the controller once they are installed"
		if o.GroupCRDCheckInterval > 0 {
			check = "the controller checks every " + o.GroupCRDCheckInterval.String() + " (--group-crd-check-interval) and restarts itself once they are served"
		}
		klog.Warningf("Volume group snapshot CRDs (%s) are not served: running without volume group snapshots; install them (charts/snapkeeper/files/crds) to serve VolumeGroupSnapshots: %s", groupVersion, check)
		return false
	}
	return true
}
