package main

import (
	"context"
	"fmt"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

const ceilingNamespace = "bench-ceiling"

// ceilings are the physical limits of one control plane, in accepted
// writes per second.
type ceilings struct {
	ConfigMaps float64 // built-in type: the raw limit
	Snapshots  float64 // VolumeSnapshot, a CRD with CEL rules: what the scenario writes
}

// measureCeilings creates and then merge-patches ops objects from conc
// goroutines with no client-side limit: ConfigMaps first, then
// VolumeSnapshots (removed again before any controller starts, so nothing
// ever acts on them).
func measureCeilings(ctx context.Context, cl *clients, ops, conc int) (ceilings, error) {
	var c ceilings
	if _, err := cl.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ceilingNamespace}}, metav1.CreateOptions{}); err != nil {
		return c, err
	}
	cms := cl.kube.CoreV1().ConfigMaps(ceilingNamespace)
	patch := []byte(`{"metadata":{"labels":{"patched":"yes"}}}`)
	var err error
	c.ConfigMaps, err = createPatch(ctx, ops, conc, func(ctx context.Context, name string) error {
		_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"a": "1"}}, metav1.CreateOptions{})
		return err
	}, func(ctx context.Context, name string) error {
		_, err := cms.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
	if err != nil {
		return c, fmt.Errorf("ConfigMap write ceiling: %w", err)
	}
	vss := cl.snap.SnapshotV1().VolumeSnapshots(ceilingNamespace)
	c.Snapshots, err = createPatch(ctx, ops, conc, func(ctx context.Context, name string) error {
		pvc := "ceiling"
		_, err := vss.Create(ctx, &snapv1.VolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{PersistentVolumeClaimName: &pvc}}}, metav1.CreateOptions{})
		return err
	}, func(ctx context.Context, name string) error {
		_, err := vss.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
	if err != nil {
		return c, fmt.Errorf("VolumeSnapshot write ceiling: %w", err)
	}
	if err := vss.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		return c, err
	}
	return c, framework.PollContext(ctx, time.Minute, "the ceiling's VolumeSnapshots to be gone", func() error {
		l, err := vss.List(ctx, metav1.ListOptions{Limit: 1})
		if err == nil && len(l.Items) > 0 {
			err = fmt.Errorf("%d+ ceiling VolumeSnapshots still exist", len(l.Items))
		}
		return err
	})
}

// createPatch runs create then patch for ops names and returns writes/s.
func createPatch(ctx context.Context, ops, conc int, create, patch func(context.Context, string) error) (float64, error) {
	start := time.Now()
	err := parallel(ctx, ops, conc, func(ctx context.Context, i int) error {
		name := fmt.Sprintf("ceiling-%06d", i)
		if err := create(ctx, name); err != nil {
			return err
		}
		return patch(ctx, name)
	})
	return float64(2*ops) / time.Since(start).Seconds(), err
}

// ceilings measures the write ceilings of b's control plane (see
// measureCeilings), before anything else runs on it, and logs them.
func (b *bed) ceilings(ctx context.Context, ops, conc int) (ceilings, error) {
	logf("[%s] write ceiling: %d ConfigMaps, then VolumeSnapshots, created+patched from %d goroutines", b.tag, ops, conc)
	c, err := measureCeilings(ctx, b.cl, ops, conc)
	if err != nil {
		return c, fmt.Errorf("write ceiling: %w", err)
	}
	logf("[%s] ceiling %.0f writes/s (ConfigMaps), %.0f writes/s (VolumeSnapshots)", b.tag, c.ConfigMaps, c.Snapshots)
	return c, nil
}
