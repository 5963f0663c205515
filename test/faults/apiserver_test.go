package faults

import (
	"context"
	"fmt"
	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	"strings"
	"sync"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// TestAPIServerRestarts SIGKILLs kube-apiserver (of a control plane of the
// test's own) while a workload creates and deletes snapshots through the
// webhook, compacts etcd while it is down, so that every watch resuming
// from before the kill is answered "too old resource version", and starts
// it again on the same etcd and port. The controller and the webhook must
// recover on their own: same processes, nothing restarted. After each
// restart a probe snapshot measures how long until the controller cuts
// again, and the webhook must judge again.
func TestAPIServerRestarts(t *testing.T) {
	rng := newRand(t)
	full := runSizes().full
	n, restarts := shortOrFull(20, 200), shortOrFull(1, 8)
	s := privateScenario(t, slowCalls(300*time.Millisecond, "", snapshotCalls...))
	w := newWorld(s)
	s.Ctrl = s.StartController(t, append(s.Args, "--retry-interval-max=2s")...)
	w.addController(s.Ctrl)
	wh := s.Env.StartWebhook(t)
	ctrlPid, whPid := s.Ctrl.Proc.Pid(), wh.Proc.Pid()

	wl := &workload{Creates: n + max(3, n/10), Deletes: n, Claims: 3}
	// A restart and the recovery after it take 10-40 s.
	wl.Pause = time.Duration(restarts) * 20 * time.Second / time.Duration(wl.ops())
	claims := wl.claims(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	// The short variant holds deletes back from each kill until a new
	// snapshot is ready again: a snapshot created and deleted while the
	// controller's informers are still relisting leaves the binder waiting
	// for a content that is gone (docs/history/runs.md, Findings). The full
	// variant deletes throughout and shows that bug.
	var gate sync.RWMutex
	loadDone := wl.runRetrying(ctx, w, child(rng), claims, &gate)

	var downs, readies, recoveries, judges []time.Duration
	for i := range restarts {
		time.Sleep(time.Second + time.Duration(rng.Int64N(int64(2*time.Second))))
		list, err := s.Env.Snap.SnapshotV1().VolumeSnapshots(s.NS).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		oldRV := list.ResourceVersion
		before := s.Drv.CallLog(t, 0).Last
		if !full {
			gate.Lock()
		}
		killed := time.Now()
		if err := s.Env.KillAPIServer(); err != nil {
			t.Fatal(err)
		}
		down := 500*time.Millisecond + time.Duration(rng.Int64N(int64(2500*time.Millisecond)))
		time.Sleep(down / 2)
		rev, err := s.Env.CompactEtcd(ctx)
		if err != nil {
			t.Fatalf("compact etcd: %v", err)
		}
		time.Sleep(down / 2)
		if err := s.Env.StartAPIServerAgain(ctx); err != nil {
			t.Fatal(err)
		}
		ready := time.Since(killed)
		expired := watchExpired(ctx, s.Env.Snap, s.NS, oldRV)
		judge := webhookJudges(t, s, 30*time.Second)
		// Up to a minute and a half: client-go's reflectors back off up to
		// 30 s with as much jitter again, restarts within 2 minutes keep
		// them there, and the full run saw 94 s once (docs/history/runs.md,
		// Measured).
		rec := w.probeReady(t, fmt.Sprintf("probe-%d", i), claims[0], 2*time.Minute)
		if !full {
			gate.Unlock()
		}
		downs, readies, judges, recoveries = append(downs, down), append(readies, ready), append(judges, judge), append(recoveries, rec)
		t.Logf("restart %d at %d/%d operations: down %v, etcd compacted at revision %d, ready %v after the kill; a watch from rv %s: %s; webhook judging %v and a new snapshot ready %v after ready; %d driver calls meanwhile",
			i+1, wl.done.Load(), wl.ops(), down.Round(time.Millisecond), rev, ready.Round(time.Millisecond), oldRV, expired,
			judge.Round(time.Millisecond), rec.Round(time.Millisecond), len(s.Drv.CallLog(t, before).Entries))
	}
	if err := <-loadDone; err != nil {
		t.Fatalf("workload: %v", err)
	}
	t.Logf("workload of %d operations and %d restarts in %v", wl.ops(), restarts, time.Since(start).Round(time.Millisecond))
	w.checkInvariants(t, 2*time.Minute)
	noPhantoms(t, s.Ctrl)
	stillRunning(t, s.Ctrl.Proc, ctrlPid)
	stillRunning(t, wh.Proc, whPid)
	t.Logf("down %v; API server ready after kill %v; webhook judging after ready %v; new snapshot ready after ready %v", downs, readies, judges, recoveries)
}

// watchExpired opens a watch of namespace ns's snapshots from rv through
// snap and returns what the API server answers first.
func watchExpired(ctx context.Context, snap snapclient.Interface, ns, rv string) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	wi, err := snap.SnapshotV1().VolumeSnapshots(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
	if err != nil {
		return "refused: " + err.Error()
	}
	defer wi.Stop()
	select {
	case ev, ok := <-wi.ResultChan():
		if !ok {
			return "closed"
		}
		if ev.Type == watch.Error {
			if st, ok := ev.Object.(*metav1.Status); ok {
				return fmt.Sprintf("error %d %s", st.Code, st.Message)
			}
		}
		return string(ev.Type) + " event"
	case <-ctx.Done():
		return "no event within 5s"
	}
}

// webhookJudges waits until the API server has the webhook deny a
// dry-run class with an unknown reserved parameter, and returns how long
// that took.
func webhookJudges(t *testing.T, s *framework.Scenario, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	c := framework.SnapshotClass("probe-"+s.NS, s.Drv.Name, snapv1.VolumeSnapshotContentDelete, false)
	c.Parameters = map[string]string{"csi.storage.k8s.io/not-a-known-key": "x"}
	var last error
	for time.Since(start) < timeout {
		_, last = s.Env.Snap.SnapshotV1().VolumeSnapshotClasses().Create(context.Background(), c, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if last != nil && strings.Contains(last.Error(), "denied the request") {
			return time.Since(start)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the webhook did not judge within %v (last: %v)", timeout, last)
	return 0
}
