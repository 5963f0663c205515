package main

import (
	"context"
	"fmt"
	"time"

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
// VolumeSnapshots (see writeProbes).
func measureCeilings(ctx context.Context, cl *clients, ops, conc int) (ceilings, error) {
	var c ceilings
	probes, err := newWriteProbes(ctx, cl, ceilingNamespace)
	if err != nil {
		return c, err
	}
	for _, k := range []struct {
		probe writeProbe
		into  *float64
	}{{probes.configMaps, &c.ConfigMaps}, {probes.snapshots, &c.Snapshots}} {
		if *k.into, err = createPatch(ctx, ops, conc, k.probe); err != nil {
			return c, fmt.Errorf("%s write ceiling: %w", k.probe.kind, err)
		}
	}
	return c, probes.removeSnapshots(ctx)
}

// writeProbes price the API server's writes with objects of a namespace of
// their own: ConfigMaps, a built-in type (the raw limit), and
// VolumeSnapshots, a CRD with CEL rules (what the scenarios write). The
// snapshots name a claim that does not exist and are removed again before
// any controller starts, so nothing ever acts on them.
type writeProbes struct {
	configMaps, snapshots writeProbe
	// removeSnapshots deletes the VolumeSnapshots and waits until they are gone.
	removeSnapshots func(context.Context) error
}

// writeProbe creates and merge-patches objects of one kind by name.
type writeProbe struct {
	kind   string
	create func(ctx context.Context, name string) error
	patch  func(ctx context.Context, name string, patch []byte) error
}

// newWriteProbes creates namespace ns for the probes.
func newWriteProbes(ctx context.Context, cl *clients, ns string) (*writeProbes, error) {
	if _, err := cl.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	cms := cl.kube.CoreV1().ConfigMaps(ns)
	vss := cl.snap.SnapshotV1().VolumeSnapshots(ns)
	return &writeProbes{
		configMaps: writeProbe{kind: "ConfigMap", create: func(ctx context.Context, name string) error {
			_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"a": "1"}}, metav1.CreateOptions{})
			return err
		}, patch: func(ctx context.Context, name string, patch []byte) error {
			_, err := cms.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
			return err
		}},
		snapshots: writeProbe{kind: "VolumeSnapshot", create: func(ctx context.Context, name string) error {
			_, err := vss.Create(ctx, framework.DynamicSnapshot(ns, name, "absent", nil), metav1.CreateOptions{})
			return err
		}, patch: func(ctx context.Context, name string, patch []byte) error {
			_, err := vss.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
			return err
		}},
		// No finalizer is ever added, so they are gone once deleted;
		// checked anyway, since a controller that saw one would act on it.
		removeSnapshots: func(ctx context.Context) error {
			if err := vss.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
				return err
			}
			return framework.PollContext(ctx, time.Minute, "the write probes' VolumeSnapshots to be gone", func() error {
				l, err := vss.List(ctx, metav1.ListOptions{Limit: 1})
				if err == nil && len(l.Items) > 0 {
					err = fmt.Errorf("%d+ VolumeSnapshots of namespace %s still exist", len(l.Items), ns)
				}
				return err
			})
		},
	}, nil
}

// createPatch creates then merge-patches ops objects of probe and returns
// writes/s.
func createPatch(ctx context.Context, ops, conc int, probe writeProbe) (float64, error) {
	patch := []byte(`{"metadata":{"labels":{"patched":"yes"}}}`)
	start := time.Now()
	err := parallel(ctx, ops, conc, func(ctx context.Context, i int) error {
		name := fmt.Sprintf("ceiling-%06d", i)
		if err := probe.create(ctx, name); err != nil {
			return err
		}
		return probe.patch(ctx, name, patch)
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
