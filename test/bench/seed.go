package main

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/snapkeeper/snapkeeper/pkg/csi"
	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

// seedStats is how M ready snapshots were made directly in the API server,
// without any controller, and what that cost the control plane.
type seedStats struct {
	M      int
	Took   time.Duration
	Writes float64 // the benchmark's own writes (4 per snapshot)
	// Driver: the mock driver holds every handle (CreateSnapshot by the
	// benchmark under the name a controller would use), so a system that
	// polled or listed would find them.
	Driver bool
	// Plane: kube-apiserver + etcd, RSS before and after seeding, and
	// their peak so far.
	PlaneBeforekB, PlaneRSSkB, PlaneHWMkB int64
	// APIServerkB, EtcdkB: the two parts of PlaneRSSkB.
	APIServerkB, EtcdkB int64
}

// planeGrowth is how much kube-apiserver + etcd grew per seeded snapshot
// (its VolumeSnapshot and content), in bytes.
func (s seedStats) planeGrowth() float64 {
	if s.M == 0 || s.PlaneBeforekB == 0 {
		return 0
	}
	return float64(s.PlaneRSSkB-s.PlaneBeforekB) * 1024 / float64(s.M)
}

// seedReady makes m ready dynamic snapshots of the bench class as a
// controller would have left them: each VolumeSnapshot with its two
// finalizers, class and status (bound, ready), its content
// snapcontent-<uid> with its finalizer, the snapshot's UID in its
// reference and a status with the driver's handle. The claims they were
// cut from are not there (deleted since), so nothing here asks for a cut.
// Writes go through the counted admin client (exempt from APF, no
// client-side limit) from conc goroutines, statuses through the status
// subresource.
func seedReady(ctx context.Context, b *bed, m, conc int) (seedStats, error) {
	return seedReadyAs(ctx, b, m, conc, func(i int) *snapv1.VolumeSnapshot {
		class := className
		return framework.DynamicSnapshot(benchNamespace, snapName(i), pvcName(i), &class)
	})
}

// seedReadyAs is seedReady with the i-th VolumeSnapshot shaped by shape
// (its name, claim, class, labels and annotations; the rest as above).
func seedReadyAs(ctx context.Context, b *bed, m, conc int, shape func(i int) *snapv1.VolumeSnapshot) (seedStats, error) {
	st := seedStats{M: m, Driver: true}
	if err := prepare(ctx, b.env, 0); err != nil {
		return st, fmt.Errorf("namespace and class: %w", err)
	}
	// The client's connect log line would interleave with the benchmark's.
	drv, err := csi.Connect(klog.NewContext(ctx, logr.Discard()), b.drv.Socket, csi.Options{})
	if err != nil {
		return st, err
	}
	defer drv.Close()
	if ps, err := readProcs(b.plane); err == nil {
		st.PlaneBeforekB = ps.RSSkB
	}
	own := b.cl.own.Snapshot()
	logf("[%s] seeding %d ready VolumeSnapshots and contents from %d goroutines", b.tag, m, conc)
	start := time.Now()
	done := newProgress(b.tag, "seeded", m)
	err = parallel(ctx, m, conc, func(ctx context.Context, i int) error {
		vs := shape(i)
		if err := seedOne(ctx, b.cl, drv, vs); err != nil {
			return fmt.Errorf("seed %s: %w", vs.Name, err)
		}
		done.add()
		return nil
	})
	st.Took = time.Since(start)
	st.Writes = b.cl.own.Snapshot().Sub(own).Total(nil)
	if ps, perr := readProcs(b.plane); perr == nil {
		st.PlaneRSSkB, st.PlaneHWMkB = ps.RSSkB, ps.HWMkB
	}
	if ps, perr := readProcs(b.apiPids); perr == nil {
		st.APIServerkB = ps.RSSkB
	}
	if ps, perr := readProcs(b.etcdPids); perr == nil {
		st.EtcdkB = ps.RSSkB
	}
	if err == nil {
		logf("[%s] seeded %d in %s (%.0f writes/s)", b.tag, m, st.Took.Round(time.Millisecond), st.Writes/st.Took.Seconds())
	}
	return st, err
}

func seedOne(ctx context.Context, cl *clients, drv *csi.Client, vs *snapv1.VolumeSnapshot) error {
	pvc, class, ready := *vs.Spec.Source.PersistentVolumeClaimName, *vs.Spec.VolumeSnapshotClassName, true
	vss := cl.snap.SnapshotV1().VolumeSnapshots(benchNamespace)
	vs.Finalizers = []string{snapshot.FinalizerSnapshotAsSource, snapshot.FinalizerSnapshotBound}
	vs, err := vss.Create(ctx, vs, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	volume := "vol-" + benchNamespace + "-" + pvc // as framework.BindPVC names it
	cut, err := drv.CreateSnapshot(ctx, csi.CreateRequest{Name: snapshot.CSIName("snapshot", vs.UID, -1), SourceVolumeID: volume})
	if err != nil {
		return err
	}
	mode := corev1.PersistentVolumeFilesystem
	contents := cl.snap.SnapshotV1().VolumeSnapshotContents()
	content, err := contents.Create(ctx, &snapv1.VolumeSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{Name: snapshot.ContentNameFor(vs.UID), Finalizers: []string{snapshot.FinalizerContentBound}},
		Spec: snapv1.VolumeSnapshotContentSpec{
			VolumeSnapshotRef: corev1.ObjectReference{Kind: "VolumeSnapshot", APIVersion: snapv1.SchemeGroupVersion.String(),
				Namespace: benchNamespace, Name: vs.Name, UID: vs.UID, ResourceVersion: vs.ResourceVersion},
			DeletionPolicy:          snapv1.VolumeSnapshotContentDelete,
			Driver:                  framework.MockDriverName,
			VolumeSnapshotClassName: &class,
			Source:                  snapv1.VolumeSnapshotContentSource{VolumeHandle: &volume},
			SourceVolumeMode:        &mode,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	created, size := cut.CreationTime.UnixNano(), cut.SizeBytes
	content.Status = &snapv1.VolumeSnapshotContentStatus{SnapshotHandle: &cut.ID, CreationTime: &created, ReadyToUse: &ready, RestoreSize: &size}
	if _, err := contents.UpdateStatus(ctx, content, metav1.UpdateOptions{}); err != nil {
		return err
	}
	at, restore := metav1.NewTime(cut.CreationTime), resource.NewQuantity(size, resource.BinarySI)
	vs.Status = &snapv1.VolumeSnapshotStatus{BoundVolumeSnapshotContentName: &content.Name, CreationTime: &at, ReadyToUse: &ready, RestoreSize: restore}
	_, err = vss.UpdateStatus(ctx, vs, metav1.UpdateOptions{})
	return err
}
