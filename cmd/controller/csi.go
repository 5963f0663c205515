package main

import (
	"context"
	"fmt"

	snapinformers "github.com/kubernetes-csi/external-snapshotter/client/v8/informers/externalversions"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/snapkeeper/snapkeeper/pkg/cachetrim"
	"github.com/snapkeeper/snapkeeper/pkg/csi"
	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/sync/csiside"
	"github.com/snapkeeper/snapkeeper/pkg/writer"
)

// runCSI connects to the driver and runs the CSI side under the driver's
// Lease (none with --node-deployment: each node handles its own contents).
func (o *Options) runCSI(ctx context.Context, cl *clients, reg *prometheus.Registry, h *health, groups bool) error {
	drv, err := csi.Connect(ctx, o.CSIAddress, csi.Options{Timeout: o.Timeout, Registerer: reg})
	if err != nil {
		return fmt.Errorf("CSI driver at %s: %w", o.CSIAddress, err)
	}
	defer drv.Close()
	klog.FromContext(ctx).Info("Connected to CSI driver", "driver", drv.Name(), "capabilities", drv.Capabilities())
	opts := []snapinformers.SharedInformerOption{snapinformers.WithTransform(cachetrim.DropManagedFields)}
	if o.NodeName != "" {
		opts = append(opts, snapinformers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.LabelSelector = snapshot.LabelManagedBy + "=" + o.NodeName
		}))
	}
	// Only contents are filtered by node; classes are cluster-wide.
	snapInf := snapinformers.NewSharedInformerFactoryWithOptions(cl.watchSnap, 0, opts...)
	classInf := snapinformers.NewSharedInformerFactoryWithOptions(cl.watchSnap, 0, snapinformers.WithTransform(cachetrim.DropManagedFields))
	componentReg := prometheus.WrapRegistererWith(prometheus.Labels{"component": "csi"}, reg)
	w := writer.New(cl.kube, cl.snap, componentReg)
	registerCacheLag(componentReg, w.Lag())
	var groupCfg *csiside.GroupConfig
	switch {
	case groups && drv.Capabilities().GroupSnapshots:
		groupCfg = &csiside.GroupConfig{
			ContentInformer: snapInf.Groupsnapshot().V1().VolumeGroupSnapshotContents(),
			ClassInformer:   classInf.Groupsnapshot().V1().VolumeGroupSnapshotClasses(),
			NamePrefix:      o.GroupSnapshotNamePrefix,
			NameUUIDLength:  o.GroupSnapshotNameUUIDLength,
		}
	case groups:
		klog.FromContext(ctx).Info("Volume group snapshots are off: the CSI driver does not offer CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT", "driver", drv.Name())
	}
	ctrl := csiside.New(csiside.Config{
		Driver:                 drv,
		Kube:                   cl.kube,
		Snap:                   cl.snap,
		Writer:                 w,
		ContentInformer:        snapInf.Snapshot().V1().VolumeSnapshotContents(),
		ClassInformer:          classInf.Snapshot().V1().VolumeSnapshotClasses(),
		Recorder:               newRecorder(ctx, cl.kube, "csi-snapshotter "+drv.Name()),
		SnapshotNamePrefix:     o.SnapshotNamePrefix,
		SnapshotNameUUIDLength: o.SnapshotNameUUIDLength,
		ExtraCreateMetadata:    o.ExtraCreateMetadata,
		NodeName:               o.NodeName,
		Backoff:                o.backoff(),
		ResyncPeriod:           o.ResyncPeriod,
		Groups:                 groupCfg,
	})
	contents := snapInf.Snapshot().V1().VolumeSnapshotContents().Informer()
	classes := classInf.Snapshot().V1().VolumeSnapshotClasses().Informer()
	snapInf.Start(ctx.Done())
	classInf.Start(ctx.Done())
	h.addReady(func() bool { return contents.HasSynced() && classes.HasSynced() })
	run := untilDone(func(ctx context.Context) error { return ctrl.Run(ctx, o.Workers) })
	if o.NodeDeployment || !o.LeaderElection {
		go o.heartbeat(cl, drv.Name()).Run(ctx)
	}
	if o.NodeDeployment {
		return run(ctx)
	}
	return o.withLeaderElection(ctx, cl.kube, CSILeaseName(drv.Name()), h, run)
}
