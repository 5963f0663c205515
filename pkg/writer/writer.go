package writer

import (
	"context"
	"encoding/json"
	"fmt"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/snapkeeper/snapkeeper/pkg/cachelag"
)

// Writer performs and counts every write of the controller, and records
// each in its cache-lag tracker (Lag).
type Writer struct {
	snap   snapclient.Interface
	kube   kubernetes.Interface
	writes *prometheus.CounterVec
	lag    *cachelag.Tracker
}

// New returns a Writer; reg may be nil (tests).
func New(kube kubernetes.Interface, snap snapclient.Interface, reg prometheus.Registerer) *Writer {
	w := &Writer{snap: snap, kube: kube, lag: cachelag.New(), writes: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "snapkeeper_api_writes_total",
		Help: "API writes sent by the controller, by resource, verb and result.",
	}, []string{"resource", "verb", "result"})}
	if reg != nil {
		reg.MustRegister(w.writes)
	}
	return w
}

// Lag is the tracker of what this Writer's writes did that the informer
// cache may not show yet. The component that owns the Writer feeds it the
// informer events of every kind it writes (Observe, Deleted).
func (w *Writer) Lag() *cachelag.Tracker { return w.lag }

// Stale reports whether obj is a cached copy that predates one of our
// writes to it (Tracker.Stale).
func (w *Writer) Stale(obj metav1.Object) bool { return w.lag.Stale(obj) }

// metaOp is the tracker's kind of a metadata write of obj: Finalize when it
// removes the last finalizer of an object being deleted.
func metaOp(obj metav1.Object, p *MetaPatch) cachelag.Op {
	if p.setFinalizers && len(p.finalizers) == 0 && obj.GetDeletionTimestamp() != nil {
		return cachelag.Finalize
	}
	return cachelag.Update
}

func (w *Writer) count(resource, verb string, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	w.writes.WithLabelValues(resource, verb, result).Inc()
}

// PatchSnapshot merge-patches a VolumeSnapshot; an empty patch is no write.
func (w *Writer) PatchSnapshot(ctx context.Context, vs *snapv1.VolumeSnapshot, p *Patch) (*snapv1.VolumeSnapshot, error) {
	if p.Empty() {
		return vs, nil
	}
	data, err := p.JSON()
	if err != nil {
		return nil, err
	}
	lw := w.lag.Begin(metaOp(vs, &p.Meta), vs)
	out, err := w.snap.SnapshotV1().VolumeSnapshots(vs.Namespace).Patch(ctx, vs.Name, types.MergePatchType, data, metav1.PatchOptions{})
	lw.Done(out, err)
	w.count("volumesnapshots", "patch", err)
	if err != nil {
		return nil, fmt.Errorf("patch VolumeSnapshot %s/%s: %w", vs.Namespace, vs.Name, err)
	}
	return out, nil
}

// PatchSnapshotStatus merge-patches the status subresource with status.
func (w *Writer) PatchSnapshotStatus(ctx context.Context, vs *snapv1.VolumeSnapshot, status map[string]any) (*snapv1.VolumeSnapshot, error) {
	data, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return nil, err
	}
	lw := w.lag.Begin(cachelag.Update, vs)
	out, err := w.snap.SnapshotV1().VolumeSnapshots(vs.Namespace).Patch(ctx, vs.Name, types.MergePatchType, data, metav1.PatchOptions{}, "status")
	lw.Done(out, err)
	w.count("volumesnapshots/status", "patch", err)
	if err != nil {
		return nil, fmt.Errorf("patch status of VolumeSnapshot %s/%s: %w", vs.Namespace, vs.Name, err)
	}
	return out, nil
}

// CreateContent creates a VolumeSnapshotContent; until the cache has it,
// cachelag.Created finds it by name.
func (w *Writer) CreateContent(ctx context.Context, c *snapv1.VolumeSnapshotContent) (*snapv1.VolumeSnapshotContent, error) {
	lw := w.lag.Begin(cachelag.Create, c)
	out, err := w.snap.SnapshotV1().VolumeSnapshotContents().Create(ctx, c, metav1.CreateOptions{})
	lw.Done(out, err)
	w.count("volumesnapshotcontents", "create", err)
	if err != nil {
		return nil, fmt.Errorf("create VolumeSnapshotContent %s: %w", c.Name, err)
	}
	return out, nil
}

// DeleteContent deletes a VolumeSnapshotContent, only if its UID still
// matches (never a namesake created in between). An accepted delete is
// remembered until the cache shows it (Tracker.DeleteSent).
func (w *Writer) DeleteContent(ctx context.Context, c *snapv1.VolumeSnapshotContent) error {
	lw := w.lag.Begin(cachelag.Delete, c)
	err := w.snap.SnapshotV1().VolumeSnapshotContents().Delete(ctx, c.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &c.UID},
	})
	// NotFound is not remembered: the object is gone, and its delete
	// event may have passed already.
	lw.Done(nil, err)
	w.count("volumesnapshotcontents", "delete", err)
	if err != nil {
		return fmt.Errorf("delete VolumeSnapshotContent %s: %w", c.Name, err)
	}
	return nil
}

// PatchContent merge-patches a VolumeSnapshotContent.
func (w *Writer) PatchContent(ctx context.Context, c *snapv1.VolumeSnapshotContent, p *Patch) (*snapv1.VolumeSnapshotContent, error) {
	if p.Empty() {
		return c, nil
	}
	data, err := p.JSON()
	if err != nil {
		return nil, err
	}
	lw := w.lag.Begin(metaOp(c, &p.Meta), c)
	out, err := w.snap.SnapshotV1().VolumeSnapshotContents().Patch(ctx, c.Name, types.MergePatchType, data, metav1.PatchOptions{})
	lw.Done(out, err)
	w.count("volumesnapshotcontents", "patch", err)
	if err != nil {
		return nil, fmt.Errorf("patch VolumeSnapshotContent %s: %w", c.Name, err)
	}
	return out, nil
}

// PatchContentStatus merge-patches the status subresource of a content.
func (w *Writer) PatchContentStatus(ctx context.Context, c *snapv1.VolumeSnapshotContent, status map[string]any) (*snapv1.VolumeSnapshotContent, error) {
	data, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return nil, err
	}
	lw := w.lag.Begin(cachelag.Update, c)
	out, err := w.snap.SnapshotV1().VolumeSnapshotContents().Patch(ctx, c.Name, types.MergePatchType, data, metav1.PatchOptions{}, "status")
	lw.Done(out, err)
	w.count("volumesnapshotcontents/status", "patch", err)
	if err != nil {
		return nil, fmt.Errorf("patch status of VolumeSnapshotContent %s: %w", c.Name, err)
	}
	return out, nil
}

// UpdatePVC writes a change of a PersistentVolumeClaim's metadata
// (finalizers, annotations, labels) as an Update of the copy the caller
// read, carrying that copy's resourceVersion: a claim changed in between
// makes it conflict, and the caller's loop retries on a fresh copy. It is an
// update, not a patch, because the community snapshot-controller role grants
// only update on claims, and a drop-in replacement must run under it.
func (w *Writer) UpdatePVC(ctx context.Context, pvc *corev1.PersistentVolumeClaim, p *Patch) (*corev1.PersistentVolumeClaim, error) {
	if p.Empty() {
		return pvc, nil
	}
	if len(p.Fields) > 0 {
		return nil, fmt.Errorf("update PersistentVolumeClaim %s/%s: only metadata changes are supported", pvc.Namespace, pvc.Name)
	}
	next := pvc.DeepCopy()
	p.Meta.apply(next)
	if p.Precondition != "" {
		next.ResourceVersion = p.Precondition
	}
	lw := w.lag.Begin(metaOp(pvc, &p.Meta), pvc)
	out, err := w.kube.CoreV1().PersistentVolumeClaims(pvc.Namespace).Update(ctx, next, metav1.UpdateOptions{})
	lw.Done(out, err)
	w.count("persistentvolumeclaims", "update", err)
	if err != nil {
		return nil, fmt.Errorf("update PersistentVolumeClaim %s/%s: %w", pvc.Namespace, pvc.Name, err)
	}
	return out, nil
}
