package migration

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

// world is one run's framework.Scenario (a driver named mig-*, its class,
// no controller: the run starts its pairs) and process directory.
type world struct {
	*framework.Scenario
	api *apiServer
	dir string
	// prefix and uuidLen are the CSI naming flags both CSI sides get
	// (nameArgs); uuidLen -1 is the default (whole UID).
	prefix   string
	uuidLen  int
	nameArgs []string
	// uids of every snapshot the run created, by name.
	uids map[string]types.UID
}

func newWorld(t *testing.T, prefix string, uuidLen int) *world {
	t.Helper()
	sc := framework.NewScenario(t, framework.ScenarioOptions{DriverPrefix: "mig", NoController: true})
	w := &world{Scenario: sc, api: newAPIServer(sc.Env), dir: sc.Env.TempDir(t, t.Name()),
		prefix: "snapshot", uuidLen: -1, uids: map[string]types.UID{}}
	if prefix != "" {
		w.prefix, w.uuidLen = prefix, uuidLen
		w.nameArgs = []string{"--snapshot-name-prefix=" + prefix, fmt.Sprintf("--snapshot-name-uuid-length=%d", uuidLen)}
	}
	return w
}

// csiName is the name a snapshot is cut with, computed here from the
// contract's rule (docs/contract.md, "Names") rather than by our code under
// test: "<prefix>-<uid>", or with a length N >= 0 the UID without its dashes
// cut to N characters.
func (w *world) csiName(uid types.UID) string {
	id := string(uid)
	if w.uuidLen >= 0 {
		id = strings.ReplaceAll(id, "-", "")
		if len(id) > w.uuidLen {
			id = id[:w.uuidLen]
		}
	}
	return w.prefix + "-" + id
}

// createSnapshots creates count bound claims and one VolumeSnapshot of each,
// named <base>-NNNN (the claims pvc-<base>-NNNN), a few at a time.
func (w *world) createSnapshots(t *testing.T, base string, count int) []string {
	t.Helper()
	names := make([]string, count)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%04d", base, i)
	}
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
		sem  = make(chan struct{}, 8)
	)
	for _, name := range names {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			pvc := "pvc-" + name
			if _, err := w.Env.BindPVC(ctx, w.NS, pvc, framework.PVCOptions{Driver: w.Drv.Name}); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				return
			}
			vs := framework.DynamicSnapshot(w.NS, name, pvc, &w.Class)
			out, err := w.Env.Snap.SnapshotV1().VolumeSnapshots(w.NS).Create(ctx, vs, metav1.CreateOptions{})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			w.uids[name] = out.UID
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("creating %d snapshots: %d failed, first: %v", count, len(errs), errs[0])
	}
	return names
}

// state is what the run reads of the API server at one moment.
type state struct {
	snaps    map[string]*snapv1.VolumeSnapshot        // by name, this namespace
	contents map[string]*snapv1.VolumeSnapshotContent // by snapshot name (spec.volumeSnapshotRef), this driver
	pvcs     map[string]*corev1.PersistentVolumeClaim // by name, this namespace
	// listRV is the highest resourceVersion of the three lists: every write
	// that landed before the read has a resourceVersion up to it.
	listRV uint64
}

func (w *world) read(ctx context.Context) (*state, error) {
	s := &state{snaps: map[string]*snapv1.VolumeSnapshot{}, contents: map[string]*snapv1.VolumeSnapshotContent{},
		pvcs: map[string]*corev1.PersistentVolumeClaim{}}
	vss, err := w.Env.Snap.SnapshotV1().VolumeSnapshots(w.NS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range vss.Items {
		s.snaps[vss.Items[i].Name] = &vss.Items[i]
	}
	s.listRV = max(s.listRV, parseRV(vss.ResourceVersion))
	vscs, err := w.Env.Snap.SnapshotV1().VolumeSnapshotContents().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	s.listRV = max(s.listRV, parseRV(vscs.ResourceVersion))
	for i := range vscs.Items {
		c := &vscs.Items[i]
		if c.Spec.Driver == w.Drv.Name && c.Spec.VolumeSnapshotRef.Namespace == w.NS {
			s.contents[c.Spec.VolumeSnapshotRef.Name] = c
		}
	}
	pvcs, err := w.Env.Kube.CoreV1().PersistentVolumeClaims(w.NS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	s.listRV = max(s.listRV, parseRV(pvcs.ResourceVersion))
	for i := range pvcs.Items {
		s.pvcs[pvcs.Items[i].Name] = &pvcs.Items[i]
	}
	return s, nil
}

func (w *world) mustRead(t *testing.T) *state {
	t.Helper()
	s, err := w.read(context.Background())
	if err != nil {
		t.Fatalf("read objects: %v", err)
	}
	return s
}

// waitFor polls the state until cond holds for every name, or timeout; it
// returns how long that took and, on timeout, the names still waiting with
// cond's reason for the first few.
func (w *world) waitFor(names []string, timeout time.Duration, cond func(s *state, name string) (bool, string)) (time.Duration, error) {
	start := time.Now()
	for {
		s, err := w.read(context.Background())
		var pending []string
		if err == nil {
			for _, n := range names {
				if ok, why := cond(s, n); !ok {
					if len(pending) < 5 {
						n += " (" + why + ")"
					}
					pending = append(pending, n)
				}
			}
			if len(pending) == 0 {
				return time.Since(start), nil
			}
		}
		if time.Since(start) > timeout {
			if err != nil {
				return time.Since(start), err
			}
			return time.Since(start), fmt.Errorf("after %s, %d of %d not there yet: %s", timeout.Round(time.Second),
				len(pending), len(names), strings.Join(pending[:min(5, len(pending))], "; "))
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// Conditions for waitFor.

func snapReady(s *state, name string) (bool, string) {
	vs := s.snaps[name]
	if vs == nil {
		return false, "no VolumeSnapshot"
	}
	ok := vs.Status != nil && vs.Status.ReadyToUse != nil && *vs.Status.ReadyToUse
	return ok, "status " + framework.JSON(vs.Status)
}

// cutNotReady: the backend snapshot exists and its handle is stored, but it
// is not ready yet: the CSI side polls it.
func cutNotReady(s *state, name string) (bool, string) {
	c := s.contents[name]
	if c == nil {
		return false, "no content"
	}
	ok := c.Status != nil && c.Status.SnapshotHandle != nil && c.Status.ReadyToUse != nil && !*c.Status.ReadyToUse
	return ok, "content status " + framework.JSON(c.Status)
}

// createInFlight: CreateSnapshot was called (the being-created mark is set)
// and has not answered (no handle).
func createInFlight(s *state, name string) (bool, string) {
	c := s.contents[name]
	if c == nil {
		return false, "no content"
	}
	ok := c.Annotations[snapshot.AnnBeingCreated] == snapshot.ValueYes && (c.Status == nil || c.Status.SnapshotHandle == nil)
	return ok, fmt.Sprintf("annotations %v, status %s", c.Annotations, framework.JSON(c.Status))
}

func snapGone(s *state, name string) (bool, string) {
	if vs := s.snaps[name]; vs != nil {
		return false, "still there, finalizers " + strings.Join(vs.Finalizers, ",")
	}
	if c := s.contents[name]; c != nil {
		return false, "content " + c.Name + " still there, finalizers " + strings.Join(c.Finalizers, ",")
	}
	return true, ""
}

// objVersion is an object's resourceVersion and the parts a controller
// writes, to say what changed.
type objVersion struct {
	RV          string
	Finalizers  []string
	Annotations map[string]string
	Status      string
}

// versions records every object of the given snapshots: the snapshot, its
// content and its claim, keyed "kind/name".
func (s *state) versions(names []string) map[string]objVersion {
	out := map[string]objVersion{}
	for _, n := range names {
		if vs := s.snaps[n]; vs != nil {
			out["VolumeSnapshot/"+n] = objVersion{vs.ResourceVersion, vs.Finalizers, vs.Annotations, framework.JSON(vs.Status)}
		}
		if c := s.contents[n]; c != nil {
			out["VolumeSnapshotContent/"+c.Name] = objVersion{c.ResourceVersion, c.Finalizers, c.Annotations, framework.JSON(c.Status)}
		}
		if p := s.pvcs["pvc-"+n]; p != nil {
			out["PersistentVolumeClaim/"+p.Name] = objVersion{p.ResourceVersion, p.Finalizers, p.Annotations, framework.JSON(p.Status)}
		}
	}
	return out
}

// changed lists the objects whose resourceVersion differs (or that went),
// with what changed.
func changed(before, after map[string]objVersion) []string {
	var out []string
	for k, b := range before {
		a, ok := after[k]
		switch {
		case !ok:
			out = append(out, k+": gone")
		case a.RV != b.RV:
			var what []string
			if !slices.Equal(a.Finalizers, b.Finalizers) {
				what = append(what, fmt.Sprintf("finalizers %v -> %v", b.Finalizers, a.Finalizers))
			}
			if framework.JSON(a.Annotations) != framework.JSON(b.Annotations) {
				what = append(what, fmt.Sprintf("annotations %v -> %v", b.Annotations, a.Annotations))
			}
			if a.Status != b.Status {
				what = append(what, fmt.Sprintf("status %s -> %s", b.Status, a.Status))
			}
			if len(what) == 0 {
				what = append(what, "spec or other metadata")
			}
			out = append(out, k+": "+strings.Join(what, "; "))
		}
	}
	sort.Strings(out)
	return out
}

// handles maps snapshot names to their stored handles.
func (s *state) handles(names []string) map[string]string {
	out := map[string]string{}
	for _, n := range names {
		if c := s.contents[n]; c != nil && c.Status != nil && c.Status.SnapshotHandle != nil {
			out[n] = *c.Status.SnapshotHandle
		}
	}
	return out
}

// backend returns the driver's snapshots (without the mock's built-ins) by
// CSI name; dup lists names held more than once.
func (w *world) backend(t *testing.T) (byName map[string]framework.BackendSnapshot, dup []string) {
	t.Helper()
	byName = map[string]framework.BackendSnapshot{}
	for _, b := range w.Drv.Created(t) {
		if _, ok := byName[b.Name]; ok {
			dup = append(dup, b.Name)
		}
		byName[b.Name] = b
	}
	return byName, dup
}

// setFaults replaces the driver's faults.
func (w *world) setFaults(t *testing.T, rules ...framework.FaultRule) {
	t.Helper()
	w.Drv.SetFaults(t, framework.Faults{Rules: rules})
}

func (w *world) callLog(t *testing.T, since int64) framework.CallLog {
	t.Helper()
	log := w.Drv.CallLog(t, since)
	if log.Dropped > 0 {
		t.Fatalf("the driver's call log dropped %d entries: per-snapshot call counts would be wrong", log.Dropped)
	}
	return log
}

func countMethod(entries []framework.CallLogEntry, method string) int {
	n := 0
	for _, e := range entries {
		if e.Method == method {
			n++
		}
	}
	return n
}

// byMethod renders call counts by method and code: "CreateSnapshot 5 (OK 5)".
func byMethod(entries []framework.CallLogEntry) string {
	counts := map[string]map[string]int{}
	for _, e := range entries {
		if counts[e.Method] == nil {
			counts[e.Method] = map[string]int{}
		}
		counts[e.Method][e.Code]++
	}
	methods := slices.Sorted(maps.Keys(counts))
	var parts []string
	for _, m := range methods {
		var codes []string
		total := 0
		for c, n := range counts[m] {
			codes = append(codes, fmt.Sprintf("%s %d", c, n))
			total += n
		}
		sort.Strings(codes)
		parts = append(parts, fmt.Sprintf("%s %d (%s)", m, total, strings.Join(codes, ", ")))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}

// deleteSnapshots deletes the VolumeSnapshots by name.
func (w *world) deleteSnapshots(t *testing.T, names []string) {
	t.Helper()
	for _, n := range names {
		err := w.Env.Snap.SnapshotV1().VolumeSnapshots(w.NS).Delete(context.Background(), n, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("delete snapshot %s: %v", n, err)
		}
	}
}

// pvcsWithSourceFinalizer lists the claims still holding the
// pvc-as-source finalizer.
func (s *state) pvcsWithSourceFinalizer() []string {
	var out []string
	for n, p := range s.pvcs {
		if slices.Contains(p.Finalizers, snapshot.FinalizerPVCAsSource) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// eventReasons counts the namespace's Events by type, reason and object
// kind: "Normal SnapshotReady VolumeSnapshot x40 (count 40)", where count
// adds up repeats the API server folded into one Event.
func (w *world) eventReasons(t *testing.T) string {
	t.Helper()
	list, err := w.Env.Kube.CoreV1().Events(w.NS).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list events: %v", err)
	}
	type agg struct {
		objects, count int
		sample         string
	}
	by := map[string]*agg{}
	for _, e := range list.Items {
		k := e.Type + " " + e.Reason + " " + e.InvolvedObject.Kind
		if by[k] == nil {
			by[k] = &agg{}
		}
		by[k].objects++
		by[k].count += int(max(e.Count, 1))
		if e.Type != corev1.EventTypeNormal && by[k].sample == "" {
			by[k].sample = e.InvolvedObject.Name + ": " + e.Message
		}
	}
	keys := slices.Sorted(maps.Keys(by))
	var out []string
	for _, k := range keys {
		line := fmt.Sprintf("%s x%d (count %d)", k, by[k].objects, by[k].count)
		if by[k].sample != "" {
			line += fmt.Sprintf(" [e.g. %s]", by[k].sample)
		}
		out = append(out, line)
	}
	return strings.Join(out, "; ")
}
