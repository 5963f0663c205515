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
)

// Writer performs and counts every write of the controller.
type Writer struct {
	snap   snapclient.Interface
	kube   kubernetes.Interface
	writes *prometheus.CounterVec
	stale  staleness
}

// New returns a Writer; reg may be nil (tests).
func New(kube kubernetes.Interface, snap snapclient.Interface, reg prometheus.Registerer) *Writer {
	w := &Writer{snap: snap, kube: kube, writes: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "snapkeeper_api_writes_total",
		Help: "API writes sent by the controller, by resource, verb and result.",
	}, []string{"resource", "verb", "result"})}
	if reg != nil {
		reg.MustRegister(w.writes)
	}
	return w
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
	out, err := w.snap.SnapshotV1().VolumeSnapshots(vs.Namespace).Patch(ctx, vs.Name, types.MergePatchType, data, metav1.PatchOptions{})
	w.count("volumesnapshots", "patch", err)
	if err != nil {
		return nil, fmt.Errorf("patch VolumeSnapshot %s/%s: %w", vs.Namespace, vs.Name, err)
	}
	w.stale.wrote(vs)
	return out, nil
}

// PatchSnapshotStatus merge-patches the status subresource with status.
func (w *Writer) PatchSnapshotStatus(ctx context.Context, vs *snapv1.VolumeSnapshot, status map[string]any) (*snapv1.VolumeSnapshot, error) {
	data, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return nil, err
	}
	out, err := w.snap.SnapshotV1().VolumeSnapshots(vs.Namespace).Patch(ctx, vs.Name, types.MergePatchType, data, metav1.PatchOptions{}, "status")
	w.count("volumesnapshots/status", "patch", err)
	if err != nil {
		return nil, fmt.Errorf("patch status of VolumeSnapshot %s/%s: %w", vs.Namespace, vs.Name, err)
	}
	w.stale.wrote(vs)
	return out, nil
}

// CreateContent creates a VolumeSnapshotContent.
func (w *Writer) CreateContent(ctx context.Context, c *snapv1.VolumeSnapshotContent) (*snapv1.VolumeSnapshotContent, error) {
	out, err := w.snap.SnapshotV1().VolumeSnapshotContents().Create(ctx, c, metav1.CreateOptions{})
	w.count("volumesnapshotcontents", "create", err)
	if err != nil {
		return nil, fmt.Errorf("create VolumeSnapshotContent %s: %w", c.Name, err)
	}
	return out, nil
}

// DeleteContent deletes a VolumeSnapshotContent, only if its UID still
// matches (never a namesake created in between).
func (w *Writer) DeleteContent(ctx context.Context, c *snapv1.VolumeSnapshotContent) error {
	err := w.snap.SnapshotV1().VolumeSnapshotContents().Delete(ctx, c.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &c.UID},
	})
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
	out, err := w.snap.SnapshotV1().VolumeSnapshotContents().Patch(ctx, c.Name, types.MergePatchType, data, metav1.PatchOptions{})
	w.count("volumesnapshotcontents", "patch", err)
	if err != nil {
		return nil, fmt.Errorf("patch VolumeSnapshotContent %s: %w", c.Name, err)
	}
	w.stale.wrote(c)
	return out, nil
}

// PatchContentStatus merge-patches the status subresource of a content.
func (w *Writer) PatchContentStatus(ctx context.Context, c *snapv1.VolumeSnapshotContent, status map[string]any) (*snapv1.VolumeSnapshotContent, error) {
	data, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return nil, err
	}
	out, err := w.snap.SnapshotV1().VolumeSnapshotContents().Patch(ctx, c.Name, types.MergePatchType, data, metav1.PatchOptions{}, "status")
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
	out, err := w.kube.CoreV1().PersistentVolumeClaims(pvc.Namespace).Update(ctx, next, metav1.UpdateOptions{})
	w.count("persistentvolumeclaims", "update", err)
	if err != nil {
		return nil, fmt.Errorf("update PersistentVolumeClaim %s/%s: %w", pvc.Namespace, pvc.Name, err)
	}
	w.stale.wrote(pvc)
	return out, nil
}
