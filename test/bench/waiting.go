package main

import (
	"context"
	"hash/fnv"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

// waitStats is what a system spent per snapshot while the driver answered
// "not ready" (-waiting): from the driver's first answer about a snapshot
// until the moment the driver turned ready, and how late the VolumeSnapshot
// showed it.
//
// The interval has two parts. The cut's record runs from the first answer
// until the VolumeSnapshot shows the cut (status.creationTime) and the
// content has lost its being-created mark: the writes that store the
// handle, clear the in-flight mark and tell the user the snapshot is cut
// happen once there, whatever the upload takes. The wait
// proper runs from then until the driver turns ready: polling is all that
// should happen in it, and every write there is a cost per poll.
type waitStats struct {
	Snapshots int // snapshots whose first answer and turn were seen
	// CallsMean, CallsMax: CSI calls about the snapshot after the first
	// answer and before the driver turned ready (polls).
	CallsMean, CallsMax float64
	// CutWrites: changes to the VolumeSnapshot and its content from the
	// first answer until the VolumeSnapshot showed the cut (at the latest
	// when the driver turned ready), by kind, summed over the snapshots,
	// without the status write that records the handle.
	CutWrites map[string]int
	// Writes: the same changes from then until the driver turned ready.
	Writes    map[string]int
	WritesMax int // most such writes for one snapshot
	// CutShown: snapshots whose VolumeSnapshot showed the cut before the
	// driver turned ready.
	CutShown int
	// Lag: from the driver turning ready until the VolumeSnapshot showed
	// readyToUse (median, 99th percentile, last).
	LagP50, LagP99, LagMax time.Duration
	Dropped                int64 // call log entries the driver dropped (figures then partial)
}

func (s *waitStats) writesTotal() int { return sum(s.Writes) }

func (s *waitStats) cutWritesTotal() int { return sum(s.CutWrites) }

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// objUpdate is one change of a snapshot's objects seen by the watcher.
type objUpdate struct {
	at   time.Time
	kind string
}

const handleRecorded = "content status with the handle" // not counted: the first answer's record

// waitRecorder collects the changes of every VolumeSnapshot and content
// and the driver's call log during a create phase.
type waitRecorder struct {
	w       *watcher
	drv     *framework.CSIDriver
	mu      sync.Mutex
	updates map[string][]objUpdate // VolumeSnapshot name -> its changes
	cutAt   map[string]time.Time   // VolumeSnapshot name -> when its status first showed creationTime
	unmark  map[string]time.Time   // VolumeSnapshot name -> when its content lost the being-created mark
	regs    []cache.ResourceEventHandlerRegistration
	log     []framework.CallLogEntry
	since   int64
	dropped int64
	stop    context.CancelFunc
	done    chan struct{}
}

func startWaitRecorder(ctx context.Context, w *watcher, drv *framework.CSIDriver) *waitRecorder {
	r := &waitRecorder{w: w, drv: drv, updates: map[string][]objUpdate{}, cutAt: map[string]time.Time{}, unmark: map[string]time.Time{}, done: make(chan struct{})}
	if l, err := drv.GetCallLog(ctx, 0); err == nil {
		r.since = l.Last
	}
	snaps, _ := w.snaps.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(o, n any) {
		old, cur := o.(*snapv1.VolumeSnapshot), n.(*snapv1.VolumeSnapshot)
		if old.ResourceVersion != cur.ResourceVersion {
			r.add(cur.Name, "VolumeSnapshot "+changed(old.Status, cur.Status))
		}
		if cutShown(cur) && !cutShown(old) {
			r.first(r.cutAt, cur.Name)
		}
	}})
	contents, _ := w.contents.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(o, n any) {
		old, cur := o.(*snapv1.VolumeSnapshotContent), n.(*snapv1.VolumeSnapshotContent)
		if old.ResourceVersion == cur.ResourceVersion {
			return
		}
		kind := "content " + changed(old.Status, cur.Status)
		if knownHandleOf(old) == "" && knownHandleOf(cur) != "" {
			kind = handleRecorded
		}
		r.add(cur.Spec.VolumeSnapshotRef.Name, kind)
		if beingCreated(old) && !beingCreated(cur) {
			r.first(r.unmark, cur.Spec.VolumeSnapshotRef.Name)
		}
	}})
	r.regs = []cache.ResourceEventHandlerRegistration{snaps, contents}
	ctx, r.stop = context.WithCancel(ctx)
	go func() {
		defer close(r.done)
		for {
			r.readLog(ctx) // the driver keeps only its last 20000 calls: read as they come
			select {
			case <-ctx.Done():
				return
			case <-time.After(2 * time.Second):
			}
		}
	}()
	return r
}

func changed[T any](old, cur *T) string {
	if reflect.DeepEqual(old, cur) {
		return "metadata or spec"
	}
	return "status"
}

func knownHandleOf(c *snapv1.VolumeSnapshotContent) string {
	if c.Status != nil && c.Status.SnapshotHandle != nil {
		return *c.Status.SnapshotHandle
	}
	return ""
}

func cutShown(vs *snapv1.VolumeSnapshot) bool {
	return vs.Status != nil && vs.Status.CreationTime != nil
}

func beingCreated(c *snapv1.VolumeSnapshotContent) bool {
	return c.Annotations[snapshot.AnnBeingCreated] == snapshot.ValueYes
}

// first records now under name in m unless something is there already.
func (r *waitRecorder) first(m map[string]time.Time, name string) {
	r.mu.Lock()
	if _, ok := m[name]; !ok {
		m[name] = time.Now()
	}
	r.mu.Unlock()
}

func (r *waitRecorder) add(snapshot, kind string) {
	r.mu.Lock()
	r.updates[snapshot] = append(r.updates[snapshot], objUpdate{time.Now(), kind})
	r.mu.Unlock()
}

func (r *waitRecorder) readLog(ctx context.Context) {
	l, err := r.drv.GetCallLog(ctx, r.since)
	if err != nil {
		return
	}
	r.mu.Lock()
	r.log = append(r.log, l.Entries...)
	r.since = max(r.since, l.Last)
	if len(l.Entries) > 0 && l.Entries[0].Seq > r.since+1 {
		r.dropped += l.Entries[0].Seq - r.since - 1
	}
	r.mu.Unlock()
}

// finish stops recording and computes the figures; readyAfter is the
// -csi-ready-after range the driver was started with.
func (r *waitRecorder) finish(ctx context.Context, readyAfter string) (*waitStats, error) {
	r.readLog(ctx)
	r.stop()
	<-r.done
	for i, reg := range r.regs {
		_ = []cache.SharedIndexInformer{r.w.snaps, r.w.contents}[i].RemoveEventHandler(reg)
	}
	lo, hi := readyRange(readyAfter)
	r.mu.Lock()
	defer r.mu.Unlock()
	// The driver's first answer about each snapshot id, and every call about it.
	first, calls := map[string]time.Time{}, map[string][]time.Time{}
	for _, e := range r.log {
		if e.SnapshotID == "" || e.Code != "OK" || !strings.Contains(e.Method, "Snapshot") {
			continue
		}
		if _, ok := first[e.SnapshotID]; !ok {
			first[e.SnapshotID] = e.Time
		}
		calls[e.SnapshotID] = append(calls[e.SnapshotID], e.Time)
	}
	st := &waitStats{CutWrites: map[string]int{}, Writes: map[string]int{}, Dropped: r.dropped}
	var lags []time.Duration
	var callSum float64
	for _, o := range r.w.contents.GetStore().List() {
		c := o.(*snapv1.VolumeSnapshotContent)
		id, name := knownHandleOf(c), c.Spec.VolumeSnapshotRef.Name
		t0, ok := first[id]
		if id == "" || !ok {
			continue
		}
		turned := t0.Add(mockReadyDelay(id, lo, hi))
		st.Snapshots++
		n := 0
		for _, t := range calls[id] {
			if t.After(t0) && t.Before(turned) {
				n++
			}
		}
		callSum += float64(n)
		st.CallsMax = max(st.CallsMax, float64(n))
		cut, ok := r.cutAt[name]
		if u, marked := r.unmark[name]; ok && marked && u.After(cut) {
			cut = u
		}
		if ok && cut.Before(turned) {
			st.CutShown++
		} else {
			cut = turned
		}
		w := 0
		for _, u := range r.updates[name] {
			switch {
			case !u.at.After(t0) || !u.at.Before(turned) || u.kind == handleRecorded:
			case !u.at.After(cut):
				// The write that shows the cut is its record's last.
				st.CutWrites[u.kind]++
			default:
				st.Writes[u.kind]++
				w++
			}
		}
		st.WritesMax = max(st.WritesMax, w)
		if at, ok := r.w.timeline.at(stageSnapshotReady, name); ok {
			lags = append(lags, max(at.Sub(turned), 0))
		}
	}
	if st.Snapshots > 0 {
		st.CallsMean = callSum / float64(st.Snapshots)
	}
	if len(lags) > 0 {
		slices.Sort(lags)
		st.LagP50, st.LagP99, st.LagMax = lags[len(lags)/2], lags[len(lags)*99/100], lags[len(lags)-1]
	}
	return st, nil
}

// readyRange parses -csi-ready-after ("5s-30s" or "5s").
func readyRange(s string) (lo, hi time.Duration) {
	a, b, _ := strings.Cut(s, "-")
	lo, _ = time.ParseDuration(a)
	hi, _ = time.ParseDuration(b)
	return lo, hi
}

// mockReadyDelay is how long the mock driver keeps snapshot id not ready
// after its first answer: the same spread by an FNV-1a hash of the id as
// readyDelay in hack/tools/kube/mockcsi/faults.go (keep the two equal).
func mockReadyDelay(id string, lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	h := fnv.New64a()
	h.Write([]byte(id))
	return lo + time.Duration(h.Sum64()%uint64(hi-lo+1))
}
