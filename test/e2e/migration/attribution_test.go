package migration

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// The API server counts writes but not whose object they hit. A watch from
// the switch on tells which objects each effective write changed: every
// write that changes an object is one watch event with the new
// resourceVersion. Writes the API server counted beyond those events changed
// nothing (a no-op patch) or were refused (a conflict): with the counts
// taken at the same moment, "writes - events" are writes for nothing, and
// events on ready snapshots are writes on them.

// objEvent is one change of a snapshot's object.
type objEvent struct {
	Snapshot string // the VolumeSnapshot the object belongs to
	Object   string // "VolumeSnapshotContent/snapcontent-..."
	Type     watch.EventType
	RV       uint64
}

// recorder watches the VolumeSnapshots and claims of the namespace and the
// contents of the driver from a read on.
type recorder struct {
	mu     sync.Mutex
	events []objEvent
	seen   map[string]uint64 // object -> highest resourceVersion seen
	errs   []string
	cancel context.CancelFunc
}

func (w *world) record(t *testing.T, from *state) *recorder {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &recorder{seen: map[string]uint64{}, cancel: cancel}
	t.Cleanup(cancel)
	opts := metav1.ListOptions{ResourceVersion: strconv.FormatUint(from.listRV, 10)}
	start := func(kind string, wi watch.Interface, err error, owner func(any) (string, string, bool)) {
		if err != nil {
			t.Fatalf("watch %s: %v", kind, err)
		}
		go func() {
			defer wi.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case ev, ok := <-wi.ResultChan():
					if !ok {
						r.mu.Lock()
						if ctx.Err() == nil {
							r.errs = append(r.errs, kind+" watch closed")
						}
						r.mu.Unlock()
						return
					}
					if ev.Type == watch.Error || ev.Type == watch.Bookmark {
						r.mu.Lock()
						r.errs = append(r.errs, fmt.Sprintf("%s watch: %s %v", kind, ev.Type, ev.Object))
						r.mu.Unlock()
						continue
					}
					obj, err := metaOf(ev.Object)
					if err != nil {
						continue
					}
					snap, name, ok := owner(ev.Object)
					if !ok {
						continue
					}
					rv := parseRV(obj.GetResourceVersion())
					key := kind + "/" + name
					r.mu.Lock()
					r.events = append(r.events, objEvent{Snapshot: snap, Object: key, Type: ev.Type, RV: rv})
					r.seen[key] = max(r.seen[key], rv)
					r.mu.Unlock()
				}
			}
		}()
	}
	vsw, err := w.Env.Snap.SnapshotV1().VolumeSnapshots(w.NS).Watch(ctx, opts)
	start("VolumeSnapshot", vsw, err, func(o any) (string, string, bool) {
		vs, ok := o.(*snapv1.VolumeSnapshot)
		if !ok {
			return "", "", false
		}
		return vs.Name, vs.Name, true
	})
	vscw, err := w.Env.Snap.SnapshotV1().VolumeSnapshotContents().Watch(ctx, opts)
	start("VolumeSnapshotContent", vscw, err, func(o any) (string, string, bool) {
		c, ok := o.(*snapv1.VolumeSnapshotContent)
		if !ok || c.Spec.Driver != w.Drv.Name || c.Spec.VolumeSnapshotRef.Namespace != w.NS {
			return "", "", false
		}
		return c.Spec.VolumeSnapshotRef.Name, c.Name, true
	})
	pvcw, err := w.Env.Kube.CoreV1().PersistentVolumeClaims(w.NS).Watch(ctx, opts)
	start("PersistentVolumeClaim", pvcw, err, func(o any) (string, string, bool) {
		p, ok := o.(*corev1.PersistentVolumeClaim)
		if !ok {
			return "", "", false
		}
		return strings.TrimPrefix(p.Name, "pvc-"), p.Name, true
	})
	return r
}

func metaOf(o any) (metav1.Object, error) {
	m, ok := o.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("not an object: %T", o)
	}
	return m, nil
}

// upTo returns the events up to the read s, once the watch delivered every
// change s shows.
func (r *recorder) upTo(s *state, since uint64) ([]objEvent, error) {
	want := map[string]uint64{}
	add := func(key string, m metav1.Object) {
		if rv := parseRV(m.GetResourceVersion()); rv > since {
			want[key] = rv
		}
	}
	for _, vs := range s.snaps {
		add("VolumeSnapshot/"+vs.Name, vs)
	}
	for _, c := range s.contents {
		add("VolumeSnapshotContent/"+c.Name, c)
	}
	for _, p := range s.pvcs {
		add("PersistentVolumeClaim/"+p.Name, p)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		r.mu.Lock()
		var missing []string
		for k, rv := range want {
			if r.seen[k] < rv {
				missing = append(missing, k)
			}
		}
		var out []objEvent
		if len(missing) == 0 {
			for _, e := range r.events {
				if e.RV <= s.listRV {
					out = append(out, e)
				}
			}
		}
		errs := append([]string(nil), r.errs...)
		r.mu.Unlock()
		if len(errs) > 0 {
			return nil, fmt.Errorf("watch: %s", strings.Join(errs, "; "))
		}
		if len(missing) == 0 {
			return out, nil
		}
		if time.Now().After(deadline) {
			sort.Strings(missing)
			return nil, fmt.Errorf("the watch did not deliver %d changes: %v", len(missing), firstN(missing, 5))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (r *recorder) stop() { r.cancel() }

// snapshotAt reads the write counters and the objects at one moment: the
// lists between two scrapes that agree, so no write landed in between.
func (w *world) snapshotAt(t *testing.T) (writes, *state) {
	t.Helper()
	for range 50 {
		a := w.mustWrites(t)
		s := w.mustRead(t)
		b := w.mustWrites(t)
		if a.Total(nil) == b.Total(nil) {
			return b, s
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("writes never paused long enough to read the objects between two scrapes")
	return nil, nil
}

// split counts events on the given snapshots and on the others.
func split(events []objEvent, of map[string]bool) (in, out []objEvent) {
	for _, e := range events {
		if of[e.Snapshot] {
			in = append(in, e)
		} else {
			out = append(out, e)
		}
	}
	return in, out
}

func describeEvents(events []objEvent) string {
	count := map[string]int{}
	for _, e := range events {
		count[string(e.Type)+" "+e.Object]++
	}
	var out []string
	for k, n := range count {
		out = append(out, fmt.Sprintf("%s x%d", k, n))
	}
	sort.Strings(out)
	return strings.Join(firstN(out, 20), "; ")
}

func parseRV(s string) uint64 {
	n, _ := strconv.ParseUint(s, 10, 64)
	return n
}
