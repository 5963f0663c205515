package migration

import (
	"fmt"
	"testing"
	"time"

	"github.com/snapkeeper/snapkeeper/pkg/csi/csitest"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

// TestMigrationIn switches a cluster from the community pair to ours.
func TestMigrationIn(t *testing.T) { runMigration(t, scenario{from: community, to: ours}) }

// TestMigrationOut switches back: ours made the snapshots, the community
// pair takes over (a rollback).
func TestMigrationOut(t *testing.T) { runMigration(t, scenario{from: ours, to: community}) }

// TestMigrationInNamePrefix is TestMigrationIn with CSI naming flags other
// than the defaults, given identically to both CSI sides: an in-flight
// snapshot finishes under the name it was cut with only if ours honours
// them exactly; otherwise it is cut a second time under another name.
func TestMigrationInNamePrefix(t *testing.T) {
	runMigration(t, scenario{from: community, to: ours, prefix: "migr", uuidLen: 10})
}

// scenario is one switch.
type scenario struct {
	from, to impl
	// prefix and uuidLen, when prefix is set, are given to both CSI sides as
	// --snapshot-name-prefix and --snapshot-name-uuid-length.
	prefix  string
	uuidLen int
}

// The in-flight snapshots are of two kinds at the switch:
//   - "cutting": CreateSnapshot was called and has not answered: the
//     backend holds the snapshot, the content has the being-created mark
//     and no handle. The mock holds these calls (HangUntilDeadline) until
//     the old pair's exit cuts them off; the new pair must finish them with
//     the same name, or the backend gets a second snapshot.
//   - "polling": cut, handle stored, not ready yet (the mock says
//     readyToUse=false, NotReady): the new pair must poll them to ready.
//
// The mock then holds each CreateSnapshot of the new pair for cfg.Hang, so
// that in the quiet window after its start nothing in flight can finish:
// the ready snapshots must cost no write there, and every write there must
// show as a change of an in-flight object (see attribution_test.go).
func runMigration(t *testing.T, sc scenario) {
	cfg := loadConfig(t)
	for _, tool := range []string{"snapshot-controller", "csi-snapshotter", "mock-csi-driver"} {
		if _, err := framework.Tool(tool); err != nil {
			t.Fatalf("%v (make tools bin/snapshot-controller bin/csi-snapshotter)", err)
		}
	}
	// Build ours before any clock runs.
	if _, err := framework.OwnBinary("./cmd/controller"); err != nil {
		t.Fatal(err)
	}
	testStart := time.Now()
	w := newWorld(t, sc.prefix, sc.uuidLen)
	cutN := (cfg.M + 1) / 2
	pollN := cfg.M - cutN
	fig := &figures{Test: t.Name(), From: sc.from, To: sc.to, N: cfg.N, Cutting: cutN, Polling: pollN,
		Hang: cfg.Hang, Window: cfg.Window, Naming: w.csiName("<uid>")}
	if sc.prefix != "" {
		fig.Naming = fmt.Sprintf("%s-<uid without dashes, first %d>", sc.prefix, sc.uuidLen)
	}
	defer func() {
		fig.Wall = time.Since(testStart)
		fig.log(t)
	}()
	check := func(ok bool, format string, args ...any) {
		t.Helper()
		if !ok {
			msg := fmt.Sprintf(format, args...)
			fig.Failures = append(fig.Failures, msg)
			t.Errorf("%s", msg)
		}
	}

	// 1. The old pair makes N ready snapshots.
	old := w.startPair(t, sc.from)
	t.Logf("%s pair started: %s (logs in %s)", sc.from, old.names(), w.dir)
	w0 := w.mustWrites(t)
	t0 := time.Now()
	ready := w.createSnapshots(t, "ready", cfg.N)
	if _, err := w.waitFor(ready, 2*time.Minute+time.Duration(cfg.N)*300*time.Millisecond, snapReady); err != nil {
		t.Fatalf("%s pair did not make the ready snapshots: %v", sc.from, err)
	}
	fig.MakeN = time.Since(t0)
	wq := w.mustQuiet(t, cfg.Quiet)
	fig.MakeWrites = ownWritesOff(wq.Sub(w0), cfg.N)
	fig.MakeEvents = w.eventReasons(t)

	// 2. And M in flight.
	notReady := framework.FaultRule{Method: "CreateSnapshot", NotReady: 1 << 30}
	// The old pair's calls are held until it is gone (its exit cancels
	// them); the new pair's for cfg.Hang.
	holdOld := framework.FaultRule{Method: "CreateSnapshot", HangUntilDeadline: true}
	holdNew := framework.FaultRule{Method: "CreateSnapshot", Hang: csitest.Duration(cfg.Hang)}
	w.setFaults(t, notReady)
	polling := w.createSnapshots(t, "polling", pollN)
	if _, err := w.waitFor(polling, time.Minute, cutNotReady); err != nil {
		t.Fatalf("%s pair did not cut the polling snapshots: %v", sc.from, err)
	}
	w.setFaults(t, notReady, holdOld)
	cutting := w.createSnapshots(t, "cutting", cutN)
	if _, err := w.waitFor(cutting, 30*time.Second, createInFlight); err != nil {
		t.Fatalf("%s pair did not start cutting: %v", sc.from, err)
	}
	inflight := append(append([]string(nil), cutting...), polling...)
	all := append(append([]string(nil), ready...), inflight...)

	// 3. Switch: stop the old pair (SIGTERM, wait), start the new one.
	tSwitch := time.Now()
	fig.Stop, fig.Killed = old.stop()
	time.Sleep(500 * time.Millisecond) // the driver logs the calls the old pair's exit cut off
	wBefore, before := w.snapshotAt(t)
	for _, n := range cutting {
		ok, why := createInFlight(before, n)
		if !ok {
			t.Fatalf("%s is no longer in flight at the switch (%s): the old pair took %s to stop", n, why, fig.Stop)
		}
	}
	for _, n := range polling {
		if ok, why := cutNotReady(before, n); !ok {
			t.Fatalf("%s is not in flight at the switch: %s", n, why)
		}
	}
	backendBefore, dup := w.backend(t)
	check(len(dup) == 0, "the %s pair cut duplicates: %v", sc.from, dup)
	for _, n := range all {
		_, ok := backendBefore[w.csiName(w.uids[n])]
		check(ok, "the %s pair cut %s under another name than %s (backend: %d snapshots)", sc.from, n, w.csiName(w.uids[n]), len(backendBefore))
	}
	isReady := map[string]bool{}
	for _, n := range ready {
		isReady[n] = true
	}
	w.setFaults(t, notReady, holdNew)
	rec := w.record(t, before)
	defer rec.stop()
	logBase := w.callLog(t, 0).Last
	tStart := time.Now()
	w.startPair(t, sc.to)
	fig.Start = time.Since(tStart)
	t.Logf("%s pair stopped in %s, %s pair ready in %s", sc.from, fig.Stop.Round(time.Millisecond), sc.to, fig.Start.Round(time.Millisecond))

	// 4. The quiet window: the ready snapshots need nothing, the in-flight
	// ones are held by the driver.
	time.Sleep(cfg.Window)
	wWin, win := w.snapshotAt(t)
	fig.WindowWrites = wWin.Sub(wBefore)
	evWin, err := rec.upTo(win, before.listRV)
	if err != nil {
		t.Fatalf("attributing the window's writes: %v", err)
	}
	readyEv, inflightEv := split(evWin, isReady)
	fig.WindowInflightChanges, fig.WindowReadyChanges = len(inflightEv), len(readyEv)
	fig.WindowForNothing = fig.WindowWrites.Total(isContract) - float64(len(evWin))
	readyBefore := before.versions(ready)
	fig.ReadyChangedWindow = changed(readyBefore, win.versions(ready))
	inflightChangedWindow := changed(before.versions(inflight), win.versions(inflight))
	for _, e := range w.callLog(t, logBase).Entries {
		if e.Method == "CreateSnapshot" && e.Code == "OK" {
			t.Logf("note: a held CreateSnapshot (%s) answered within the window: the window is not free of in-flight work; raise config.Hang", e.Name)
			break
		}
	}
	if len(inflightChangedWindow) > 0 {
		t.Logf("in-flight objects written in the window (%s):\n  %s", describeEvents(inflightEv), joinLines(inflightChangedWindow))
	}
	if len(fig.ReadyChangedWindow) > 0 {
		t.Logf("ready objects written in the window:\n  %s", joinLines(fig.ReadyChangedWindow))
	}
	if sc.to == ours {
		check(len(readyEv) == 0 && len(fig.ReadyChangedWindow) == 0,
			"ours wrote objects of ready snapshots in the quiet window: %s", describeEvents(readyEv))
		check(fig.WindowForNothing == 0,
			"ours made %g writes in the quiet window that changed no object (no-op or refused): window writes [%s], changes seen: %d on in-flight objects",
			fig.WindowForNothing, fig.WindowWrites, len(evWin))
	}

	// 5. Release the driver: the in-flight snapshots must finish.
	w.setFaults(t)
	_, err = w.waitFor(inflight, cfg.Hang+90*time.Second, snapReady)
	check(err == nil, "in-flight snapshots did not finish under the %s pair: %v", sc.to, err)
	fig.FinishM = time.Since(tStart)
	fig.Switch = time.Since(tSwitch)
	_, err = w.api.waitQuiet(t.Context(), cfg.Quiet, time.Minute)
	check(err == nil, "%v", err)
	wq, after := w.snapshotAt(t)
	fig.SwitchWrites = wq.Sub(wBefore)
	if evAll, err := rec.upTo(after, before.listRV); err != nil {
		check(false, "attributing the switch's writes: %v", err)
	} else {
		fig.SwitchChanges = len(evAll)
		fig.SwitchForNothing = fig.SwitchWrites.Total(isContract) - float64(len(evAll))
	}
	rec.stop()
	fig.ReadyChanged = changed(readyBefore, after.versions(ready))
	if len(fig.ReadyChanged) > 0 {
		t.Logf("ready objects written by the %s pair after the switch:\n  %s", sc.to, joinLines(fig.ReadyChanged))
	}
	if sc.to == ours {
		check(len(fig.ReadyChanged) == 0, "ours wrote %d objects of the %d ready snapshots (resourceVersion changed)", len(fig.ReadyChanged), cfg.N)
	}

	// CSI calls since the switch: none about the ready snapshots, creates
	// only for the in-flight ones, under their names.
	calls := w.callLog(t, logBase).Entries
	fig.Calls = byMethod(calls)
	nameOf := map[string]string{} // CSI name or handle -> snapshot name
	for _, n := range all {
		nameOf[w.csiName(w.uids[n])] = n
		if b, ok := backendBefore[w.csiName(w.uids[n])]; ok {
			nameOf[b.ID] = n
		}
	}
	creates := map[string]int{}
	var aboutReady, unknownCreates []string
	for _, e := range calls {
		n := nameOf[e.Name]
		if n == "" {
			n = nameOf[e.SnapshotID]
		}
		if e.Method == "CreateSnapshot" {
			if n == "" {
				unknownCreates = append(unknownCreates, e.Name)
				continue
			}
			creates[n]++
		}
		if n != "" && isReady[n] {
			aboutReady = append(aboutReady, fmt.Sprintf("%s %s %s", e.Method, n, e.Code))
		}
	}
	for _, n := range inflight {
		fig.CreatesInflight += creates[n]
		fig.MaxCreates = max(fig.MaxCreates, creates[n])
		check(creates[n] > 0, "the %s pair never called CreateSnapshot for in-flight %s", sc.to, n)
	}
	check(len(aboutReady) == 0, "the %s pair made %d CSI calls about ready snapshots: %v", sc.to, len(aboutReady), firstN(aboutReady, 10))
	check(len(unknownCreates) == 0, "the %s pair called CreateSnapshot under names no snapshot has (a second cut): %v", sc.to, firstN(unknownCreates, 10))
	fig.CreatesReady = len(aboutReady)

	// The backend: one snapshot per VolumeSnapshot, under its name, the
	// in-flight ones the very snapshots the old pair started to cut.
	backendAfter, dup := w.backend(t)
	check(len(dup) == 0, "duplicate backend snapshots after the switch: %v", dup)
	check(len(backendAfter) == len(all), "the backend holds %d snapshots for %d VolumeSnapshots", len(backendAfter), len(all))
	handles := after.handles(all)
	for _, n := range all {
		want := w.csiName(w.uids[n])
		b, ok := backendAfter[want]
		if !check2(check, ok, "no backend snapshot named %s for %s", want, n) {
			continue
		}
		check(handles[n] == b.ID, "%s: content handle %q, backend snapshot %s has id %q", n, handles[n], want, b.ID)
		check(backendBefore[want].ID == b.ID, "%s was cut again: id %q before the switch, %q after", n, backendBefore[want].ID, b.ID)
	}
	fig.BackendAfter = len(backendAfter)
	left := after.pvcsWithSourceFinalizer()
	check(len(left) == 0, "claims still hold %s after their snapshots are ready: %v", "pvc-as-source-protection", firstN(left, 10))
	err = w.Env.BackendSettles(w.Drv, 30*time.Second)
	check(err == nil, "after the switch: %v", err)

	// 6. Deletions under the new pair.
	var del, keep []string
	for i, n := range ready {
		if i%4 == 0 {
			del = append(del, n)
		} else {
			keep = append(keep, n)
		}
	}
	del = append(del, cutting[:(len(cutting)+1)/2]...)
	del = append(del, polling[:(len(polling)+1)/2]...)
	keep = append(keep, cutting[(len(cutting)+1)/2:]...)
	keep = append(keep, polling[(len(polling)+1)/2:]...)
	delHandles := after.handles(del)
	delBase := w.callLog(t, 0).Last
	wDel := w.mustWrites(t)
	t0 = time.Now()
	w.deleteSnapshots(t, del)
	_, err = w.waitFor(del, 2*time.Minute+time.Duration(len(del))*300*time.Millisecond, snapGone)
	check(err == nil, "deleted snapshots not gone under the %s pair: %v", sc.to, err)
	fig.Deleted = len(del)
	fig.DeleteTime = time.Since(t0)
	err = w.Env.BackendSettles(w.Drv, 30*time.Second)
	check(err == nil, "after the deletions: %v", err)
	fig.Leak = err == nil
	backendEnd, _ := w.backend(t)
	for n := range delHandles {
		b, ok := backendEnd[w.csiName(w.uids[n])]
		check(!ok, "backend snapshot %s (id %s) of deleted %s leaked", b.Name, b.ID, n)
	}
	wq, err = w.api.waitQuiet(t.Context(), cfg.Quiet, time.Minute)
	check(err == nil, "%v", err)
	fig.DeleteWrites = wq.Sub(wDel)
	// The test's own deletes of the VolumeSnapshots are not the controllers'.
	k := writeKey{Verb: "delete", Group: "snapshot.storage.k8s.io", Resource: "volumesnapshots"}
	if fig.DeleteWrites[k] -= float64(len(del)); fig.DeleteWrites[k] == 0 {
		delete(fig.DeleteWrites, k)
	}
	delCalls := w.callLog(t, delBase).Entries
	fig.DeleteCalls = byMethod(delCalls)
	deletes := map[string]int{}
	for _, e := range delCalls {
		if e.Method == "DeleteSnapshot" && e.Code == "OK" {
			deletes[e.SnapshotID]++
		}
	}
	for n, h := range delHandles {
		check(deletes[h] >= 1, "no successful DeleteSnapshot for %s (%s)", n, h)
	}
	check(countMethod(delCalls, "CreateSnapshot") == 0, "CreateSnapshot during the deletions: %s", fig.DeleteCalls)
	_, err = w.waitFor(keep, 10*time.Second, snapReady)
	check(err == nil, "kept snapshots not ready after the deletions: %v", err)
}

// check2 is check that also returns ok, to skip dependent checks.
func check2(check func(bool, string, ...any), ok bool, format string, args ...any) bool {
	check(ok, format, args...)
	return ok
}

func (w *world) mustWrites(t *testing.T) writes {
	t.Helper()
	wr, err := w.api.writes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return wr
}

func (w *world) mustQuiet(t *testing.T, quiet time.Duration) writes {
	t.Helper()
	wr, err := w.api.waitQuiet(t.Context(), quiet, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return wr
}

func firstN(s []string, n int) []string { return s[:min(n, len(s))] }

// ownWritesOff removes the test's own writes for n snapshots from w: per
// snapshot, the claim's create and status update and the VolumeSnapshot's
// create (the PersistentVolume's are not contract writes).
func ownWritesOff(w writes, n int) writes {
	for _, k := range []writeKey{
		{Verb: "create", Resource: "persistentvolumeclaims"},
		{Verb: "update", Resource: "persistentvolumeclaims/status"},
		{Verb: "create", Group: "snapshot.storage.k8s.io", Resource: "volumesnapshots"},
	} {
		if w[k] -= float64(n); w[k] == 0 {
			delete(w, k)
		}
	}
	return w
}
