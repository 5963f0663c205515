package binder

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/sync/testkit"
)

func withPresence(after time.Duration) func(*Config) {
	return func(cfg *Config) {
		cfg.Leases = cfg.KubeInformers.Coordination().V1().Leases()
		cfg.NoCSISideAfter = after
	}
}

func csiLease(name string, renewed time.Time, labels map[string]string) *coordinationv1.Lease {
	t := metav1.NewMicroTime(renewed)
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system", Labels: labels},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("pod-1"), LeaseDurationSeconds: ptr.To(int32(15)), RenewTime: &t},
	}
}

func TestNoCSISideErrorIsWrittenOnceAndClearsWhenALeaseAppears(t *testing.T) {
	pvc, pv := testkit.BoundClaim("pvc1")
	vs := testkit.Snapshot("s1", testkit.ClassName("gold"), testkit.Finalizers(snapshot.FinalizerSnapshotAsSource, snapshot.FinalizerSnapshotBound))
	content := newContent(vs)
	content.CreationTimestamp = metav1.NewTime(time.Now().Add(-2 * time.Minute))
	h := newHarnessWith(t, withPresence(time.Minute), vs, content, pvc, pv, testkit.SnapshotClass("gold"))
	for !h.c.presence.synced() {
		time.Sleep(time.Millisecond)
	}
	if _, err := h.syncSnapshot("s1"); err != nil {
		t.Fatal(err)
	}
	got := h.getSnapshot("s1")
	if got.Status == nil || got.Status.Error == nil || *got.Status.Error.Message != NoCSISideMessage(testDriver) {
		t.Fatalf("status = %+v, want the no-CSI-side error", got.Status)
	}
	if ev := h.events(); len(ev) != 1 || !strings.Contains(ev[0], "Warning "+snapshot.ReasonNoCSISide) {
		t.Errorf("events = %v, want one %s", ev, snapshot.ReasonNoCSISide)
	}
	h.api.ClearActions()
	if _, err := h.c.bound(context.Background(), h.c.snap(got), snap{h.c, got}.bindTo(content)); err != nil {
		t.Fatal(err)
	}
	if w := h.writes(); len(w) != 0 {
		t.Fatalf("a re-sync wrote again: %v", w)
	}
	waiting := func() int {
		h.c.presence.mu.Lock()
		defer h.c.presence.mu.Unlock()
		return len(h.c.presence.waiting)
	}
	if waiting() != 1 {
		t.Fatal("the snapshot is not among those waiting for a CSI side")
	}
	// A CSI side starts: the community-named Lease appears.
	lease := csiLease(snapshot.CSILeaseName(testDriver), time.Now(), nil)
	if _, err := h.api.Kube.CoordinationV1().Leases("kube-system").Create(context.Background(), lease, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for waiting() != 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if waiting() != 0 {
		t.Fatal("the Lease did not re-queue the waiting snapshot")
	}
	for !h.c.presence.servedNow(testDriver) {
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := h.syncSnapshot("s1"); err != nil {
		t.Fatal(err)
	}
	if st := h.getSnapshot("s1").Status; st.Error != nil {
		t.Fatalf("error not cleared: %v", *st.Error.Message)
	}
}

func TestPresenceCheck(t *testing.T) {
	now := time.Now()
	vs := testkit.Snapshot("s1")
	young := newContent(vs)
	young.CreationTimestamp = metav1.NewTime(now.Add(-10 * time.Second))
	old := newContent(vs)
	old.CreationTimestamp = metav1.NewTime(now.Add(-10 * time.Minute))
	touched := newContent(vs, testkit.Status(testkit.Cut("h", false)))
	touched.CreationTimestamp = old.CreationTimestamp
	heartbeat := map[string]string{snapshot.LabelCSIHeartbeatDriver: testDriver}
	cases := []struct {
		name      string
		leases    []*coordinationv1.Lease
		content   string
		wantError bool
		wantAgain bool
	}{
		{name: "young content waits", content: "young", wantAgain: true},
		{name: "old content without lease", content: "old", wantError: true},
		{name: "content touched by a CSI side", content: "touched"},
		{name: "fresh community lease", content: "old", wantAgain: true,
			leases: []*coordinationv1.Lease{csiLease(snapshot.CSILeaseName(testDriver), now, nil)}},
		{name: "fresh heartbeat", content: "old", wantAgain: true,
			leases: []*coordinationv1.Lease{csiLease(snapshot.HeartbeatLeaseName(testDriver, "node-1"), now, heartbeat)}},
		{name: "stale heartbeat, gone long ago", content: "old", wantError: true,
			leases: []*coordinationv1.Lease{csiLease(snapshot.HeartbeatLeaseName(testDriver, "node-1"), now.Add(-5*time.Minute), heartbeat)}},
		{name: "stale lease, gone a moment ago", content: "old", wantAgain: true,
			leases: []*coordinationv1.Lease{csiLease(snapshot.CSILeaseName(testDriver), now.Add(-40*time.Second), nil)}},
		{name: "lease of another driver", content: "old", wantError: true,
			leases: []*coordinationv1.Lease{csiLease(snapshot.CSILeaseName("other.driver"), now, nil)}},
	}
	contents := map[string]*contentT{"young": young, "old": old, "touched": touched}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var objs []any
			for _, l := range tc.leases {
				objs = append(objs, l)
			}
			p := testPresence(t, time.Minute, objs...)
			gotErr, again := p.check(vs, contents[tc.content], now)
			if (gotErr != nil) != tc.wantError || (again > 0) != tc.wantAgain {
				t.Fatalf("check = %v, %v; want error %v, look again %v", gotErr, again, tc.wantError, tc.wantAgain)
			}
		})
	}
}

func TestPresenceOffOrUnsynced(t *testing.T) {
	vs := testkit.Snapshot("s1")
	c := newContent(vs)
	var nilP *csiPresence
	if e, d := nilP.check(vs, c, time.Now()); e != nil || d != 0 {
		t.Fatal("a nil presence reported")
	}
	p := testPresence(t, time.Minute)
	p.synced = func() bool { return false }
	if e, _ := p.check(vs, c, time.Now().Add(time.Hour)); e != nil {
		t.Fatal("an unsynced presence (Leases not readable) reported")
	}
	if !slices.Equal([]int{int(minPositive(time.Second, 0)), int(minPositive(2, 1))}, []int{int(time.Second), 1}) {
		t.Fatal("minPositive")
	}
}

type contentT = snapv1.VolumeSnapshotContent

// testPresence is a csiPresence over an indexer that holds leases.
func testPresence(t *testing.T, after time.Duration, leases ...any) *csiPresence {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{indexByDriverLease: leaseDriverIndex})
	for _, l := range leases {
		if err := idx.Add(l); err != nil {
			t.Fatal(err)
		}
	}
	return &csiPresence{index: idx, synced: func() bool { return true }, after: after, enqueue: func(string) {},
		waiting: map[string]map[string]struct{}{}}
}
