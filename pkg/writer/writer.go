package writer

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/snapkeeper/snapkeeper/pkg/cachelag"
	"github.com/snapkeeper/snapkeeper/pkg/schedclient"
)

// Writer performs and counts every write of the controller, and records
// each in its cache-lag tracker (Lag).
type Writer struct {
	snap   snapclient.Interface
	kube   kubernetes.Interface
	writes *prometheus.CounterVec
	lag    *cachelag.Tracker
	// sched is set for the schedule component only (SetSchedules).
	sched *schedclient.Client
}

// New returns a Writer; reg may be nil (tests).
func New(kube kubernetes.Interface, snap snapclient.Interface, reg prometheus.Registerer) *Writer {
	w := &Writer{snap: snap, kube: kube, lag: cachelag.New(), writes: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "snapkeeper_api_writes_total",
		Help: "API writes sent by the controller, by resource, verb and result.",
	}, []string{"resource", "verb", "result"})}
	if reg != nil {
		delay := prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "snapkeeper_watch_delay_seconds",
			Help:    "Time from the API server's answer to one of the component's writes until its informer cache showed the write.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
		})
		w.lag.SetCaughtUp(func(d time.Duration) { delay.Observe(d.Seconds()) })
		reg.MustRegister(w.writes, delay)
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

// kind is how the Writer sends the writes of one resource; kinds.go has one
// per resource the controllers write.
type kind[T metav1.Object] struct {
	// resource names the resource in the write metric; what names the
	// kind in errors.
	resource, what string
	patch          func(ctx context.Context, ns, name string, data []byte, sub ...string) (T, error)
	create         func(ctx context.Context, obj T) (T, error)
	delete         func(ctx context.Context, ns, name string, opts metav1.DeleteOptions) error
}

func describe(what string, obj metav1.Object) string {
	if ns := obj.GetNamespace(); ns != "" {
		return what + " " + ns + "/" + obj.GetName()
	}
	return what + " " + obj.GetName()
}

// patchObject merge-patches obj; an empty patch is no write.
func patchObject[T metav1.Object](ctx context.Context, w *Writer, k kind[T], obj T, p *Patch) (T, error) {
	var zero T
	if p.Empty() {
		return obj, nil
	}
	data, err := p.JSON()
	if err != nil {
		return zero, err
	}
	lw := w.lag.Begin(metaOp(obj, &p.Meta), obj)
	out, err := k.patch(ctx, obj.GetNamespace(), obj.GetName(), data)
	lw.Done(out, err)
	w.count(k.resource, "patch", err)
	if err != nil {
		return zero, fmt.Errorf("patch %s: %w", describe(k.what, obj), err)
	}
	return out, nil
}

// patchStatus merge-patches the status subresource of obj with status.
func patchStatus[T metav1.Object](ctx context.Context, w *Writer, k kind[T], obj T, status map[string]any) (T, error) {
	var zero T
	data, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return zero, err
	}
	lw := w.lag.Begin(cachelag.Update, obj)
	out, err := k.patch(ctx, obj.GetNamespace(), obj.GetName(), data, "status")
	lw.Done(out, err)
	w.count(k.resource+"/status", "patch", err)
	if err != nil {
		return zero, fmt.Errorf("patch status of %s: %w", describe(k.what, obj), err)
	}
	return out, nil
}

// createObject creates obj; until the cache has it, cachelag.Created finds
// it by name.
func createObject[T metav1.Object](ctx context.Context, w *Writer, k kind[T], obj T) (T, error) {
	var zero T
	lw := w.lag.Begin(cachelag.Create, obj)
	out, err := k.create(ctx, obj)
	lw.Done(out, err)
	w.count(k.resource, "create", err)
	if err != nil {
		return zero, fmt.Errorf("create %s: %w", describe(k.what, obj), err)
	}
	return out, nil
}

// deleteObject deletes obj, only if its UID still matches (never a namesake
// created in between). An accepted delete is remembered until the cache
// shows it (Tracker.DeleteSent).
func deleteObject[T metav1.Object](ctx context.Context, w *Writer, k kind[T], obj T) error {
	uid := obj.GetUID()
	lw := w.lag.Begin(cachelag.Delete, obj)
	err := k.delete(ctx, obj.GetNamespace(), obj.GetName(), metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &uid},
	})
	// NotFound is not remembered: the object is gone, and its delete event
	// may have passed already.
	lw.Done(nil, err)
	w.count(k.resource, "delete", err)
	if err != nil {
		return fmt.Errorf("delete %s: %w", describe(k.what, obj), err)
	}
	return nil
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
