package csi_test

// These tests talk real gRPC over a unix socket to the Kubernetes e2e mock
// CSI driver (bin/mock-csi-driver, built from hack/tools/kube/mockcsi on
// demand). The mock starts with three built-in snapshots: the tests count
// only snapshots they created (csitest.Mock.Created).

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapkeeper/snapkeeper/pkg/csi"
	"github.com/snapkeeper/snapkeeper/pkg/csi/csitest"
)

// startClient starts a mock driver with mockOpts and connects a client to
// it with opts: the set-up of most tests here.
func startClient(t *testing.T, mockOpts csitest.Options, opts csi.Options) (*csitest.Mock, *csi.Client) {
	t.Helper()
	m := csitest.StartMock(t, mockOpts)
	return m, connect(t, m, opts)
}

func connect(t *testing.T, m *csitest.Mock, opts csi.Options) *csi.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := csi.Connect(ctx, m.Socket, opts)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func create(t *testing.T, c *csi.Client, name, source string) *csi.Snapshot {
	t.Helper()
	s, err := c.CreateSnapshot(context.Background(), csi.CreateRequest{Name: name, SourceVolumeID: source})
	if err != nil {
		t.Fatalf("CreateSnapshot(%q): %v", name, err)
	}
	return s
}

func createdNames(t *testing.T, m *csitest.Mock) []string {
	t.Helper()
	var names []string
	for _, s := range m.Created(t) {
		names = append(names, s.Name)
	}
	return names
}

// expectOperationSamples checks the sample counts of the
// csi_sidecar_operations_seconds histogram in reg, keyed by
// "driver method code"; series not in want are not checked.
func expectOperationSamples(t *testing.T, reg *prometheus.Registry, want map[string]uint64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, mf := range mfs {
		if mf.GetName() != "csi_sidecar_operations_seconds" {
			continue
		}
		for _, metric := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range metric.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			key := labels["driver_name"] + " " + labels["method_name"] + " " + labels["grpc_status_code"]
			got[key] = metric.GetHistogram().GetSampleCount()
		}
	}
	for key, want := range want {
		if got[key] != want {
			t.Errorf("samples of %q = %d, want %d (all: %v)", key, got[key], want, got)
		}
	}
}

func TestConnectReadsInfoAndCapabilitiesOnce(t *testing.T) {
	t.Parallel()
	m, c := startClient(t, csitest.Options{}, csi.Options{Registerer: prometheus.NewRegistry()})

	if c.Name() != csitest.DriverName {
		t.Errorf("Name() = %q, want %q", c.Name(), csitest.DriverName)
	}
	if c.Info().VendorVersion == "" {
		t.Errorf("Info().VendorVersion is empty")
	}
	// The mock offers both snapshot capabilities and group snapshots.
	want := csi.Capabilities{CreateDeleteSnapshot: true, ListSnapshots: true, GroupSnapshots: true}
	if got := c.Capabilities(); got != want {
		t.Errorf("Capabilities() = %+v, want %+v", got, want)
	}
	_ = c.Capabilities()
	_ = c.Name()
	calls := m.Calls(t)
	for method, want := range map[string]int64{"GetPluginInfo": 1, "ControllerGetCapabilities": 1} {
		if got := calls.Count(method, "OK"); got != want {
			t.Errorf("%s calls = %d, want %d (all calls: %v)", method, got, want, calls)
		}
	}
	if got := calls.Count("GroupControllerGetCapabilities", "OK"); got != 1 {
		t.Errorf("GroupControllerGetCapabilities OK calls = %d, want 1", got)
	}
	if calls.Count("Probe", "OK") < 1 {
		t.Errorf("no Probe call: %v", calls)
	}
}

func TestConnectWaitsForALateAndUnreadyDriver(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(t.TempDir(), "csi.sock")
	type result struct {
		c   *csi.Client
		err error
	}
	done := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := csi.Connect(ctx, sock, csi.Options{})
		done <- result{c, err}
	}()
	time.Sleep(700 * time.Millisecond)
	m := csitest.StartMock(t, csitest.Options{Socket: sock, Faults: &csitest.Faults{Rules: []csitest.Rule{
		{Method: "Probe", NotReady: 2},
	}}})
	r := <-done
	if r.err != nil {
		t.Fatalf("Connect: %v", r.err)
	}
	defer r.c.Close()
	if got := m.Calls(t).Count("Probe", "OK"); got < 3 {
		t.Errorf("Probe calls = %d, want at least 3 (two answered not ready)", got)
	}
}

func TestConnectGivesUpWhenTheContextEnds(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(t.TempDir(), "nobody.sock")
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	_, err := csi.Connect(ctx, sock, csi.Options{})
	if err == nil {
		t.Fatal("Connect succeeded without a driver")
	}
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), sock) {
		t.Errorf("error %q should wrap context.DeadlineExceeded and name the socket", err)
	}
}

func TestConnectRefusesADriverWithoutCreateDeleteSnapshot(t *testing.T) {
	t.Parallel()
	m := csitest.StartMock(t, csitest.Options{DriverName: "nosnap.example.com", HideCapabilities: []string{"CREATE_DELETE_SNAPSHOT"}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := csi.Connect(ctx, m.Socket, csi.Options{})
	if !errors.Is(err, csi.ErrMissingCapability) {
		t.Fatalf("Connect error = %v, want ErrMissingCapability", err)
	}
	for _, s := range []string{"nosnap.example.com", "CREATE_DELETE_SNAPSHOT"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not name %q", err, s)
		}
	}
}

func TestGetSnapshotWithoutListSnapshotsIsAFinalError(t *testing.T) {
	t.Parallel()
	_, c := startClient(t, csitest.Options{HideCapabilities: []string{"LIST_SNAPSHOTS"}}, csi.Options{})
	if c.Capabilities().ListSnapshots {
		t.Fatal("LIST_SNAPSHOTS still offered")
	}
	_, err := c.GetSnapshot(context.Background(), "1", nil)
	if !csi.IsFinal(err) || csi.Code(err) != codes.Unimplemented {
		t.Errorf("GetSnapshot error = %v, want a final Unimplemented error", err)
	}
}

func TestCreateSnapshotIsIdempotentByName(t *testing.T) {
	t.Parallel()
	m, c := startClient(t, csitest.Options{}, csi.Options{})
	req := csi.CreateRequest{Name: "snapshot-a", SourceVolumeID: "vol-1",
		Parameters: map[string]string{"tier": "gold"}, Secrets: map[string]string{"password": "hunter2"}}

	first, err := c.CreateSnapshot(context.Background(), req)
	if err != nil {
		t.Fatalf("first CreateSnapshot: %v", err)
	}
	if first.ID == "" || first.SourceVolumeID != "vol-1" || !first.ReadyToUse || first.CreationTime.IsZero() {
		t.Errorf("first snapshot = %+v", first)
	}
	again, err := c.CreateSnapshot(context.Background(), req)
	if err != nil {
		t.Fatalf("second CreateSnapshot: %v", err)
	}
	if *again != *first {
		t.Errorf("second CreateSnapshot = %+v, want the same snapshot %+v", again, first)
	}

	req.SourceVolumeID = "vol-2"
	_, err = c.CreateSnapshot(context.Background(), req)
	if !csi.IsFinal(err) || csi.Code(err) != codes.AlreadyExists {
		t.Errorf("same name from another volume: error %v, want a final AlreadyExists", err)
	}
	if got := createdNames(t, m); len(got) != 1 || got[0] != "snapshot-a" {
		t.Errorf("backend snapshots = %v, want exactly [snapshot-a]", got)
	}
}

func TestGetSnapshot(t *testing.T) {
	t.Parallel()
	_, c := startClient(t, csitest.Options{}, csi.Options{})
	s := create(t, c, "snapshot-get", "vol-1")

	got, err := c.GetSnapshot(context.Background(), s.ID, nil)
	if err != nil || got == nil || *got != *s {
		t.Errorf("GetSnapshot(%q) = %+v, %v; want %+v", s.ID, got, err, s)
	}
	got, err = c.GetSnapshot(context.Background(), "no-such-id", nil)
	if err != nil || got != nil {
		t.Errorf("GetSnapshot(unknown) = %+v, %v; want nil, nil", got, err)
	}
}

func TestDeleteSnapshot(t *testing.T) {
	t.Parallel()
	m, c := startClient(t, csitest.Options{}, csi.Options{})
	keep := create(t, c, "snapshot-keep", "vol-1")
	gone := create(t, c, "snapshot-gone", "vol-1")
	ctx := context.Background()

	if err := c.DeleteSnapshot(ctx, gone.ID, map[string]string{"password": "x"}); err != nil {
		t.Fatalf("DeleteSnapshot: %v", err)
	}
	if err := c.DeleteSnapshot(ctx, gone.ID, nil); err != nil {
		t.Errorf("second DeleteSnapshot of the same id: %v", err)
	}
	if err := c.DeleteSnapshot(ctx, "never-existed", nil); err != nil {
		t.Errorf("DeleteSnapshot of an unknown id: %v", err)
	}
	if s, err := c.GetSnapshot(ctx, gone.ID, nil); err != nil || s != nil {
		t.Errorf("GetSnapshot after delete = %+v, %v; want nil, nil", s, err)
	}
	if got := createdNames(t, m); len(got) != 1 || got[0] != "snapshot-keep" {
		t.Errorf("backend snapshots = %v, want [snapshot-keep]", got)
	}

	m.SetFaults(t, csitest.Faults{Rules: []csitest.Rule{{Method: "DeleteSnapshot", Code: "NotFound"}}})
	if err := c.DeleteSnapshot(ctx, keep.ID, nil); err != nil {
		t.Errorf("DeleteSnapshot answered NotFound: %v, want success", err)
	}
}

func TestListAllIncludesTheBuiltInSnapshots(t *testing.T) {
	t.Parallel()
	_, c := startClient(t, csitest.Options{}, csi.Options{})
	create(t, c, "snapshot-list", "vol-1")
	all, err := c.ListAll(context.Background(), nil)
	if err != nil {
		t.Fatalf("ListAll: %v", err)
	}
	if len(all) != 4 {
		t.Errorf("ListAll returned %d snapshots, want 3 built-in + 1 created", len(all))
	}
}

func TestErrorCodesOverGRPCAreClassified(t *testing.T) {
	t.Parallel()
	m, c := startClient(t, csitest.Options{}, csi.Options{Timeout: 5 * time.Second})
	var rules []csitest.Rule
	for code := codes.Canceled; code <= codes.Unauthenticated; code++ {
		rules = append(rules, csitest.Rule{Method: "CreateSnapshot", Match: "snap-" + code.String(),
			Code: code.String(), Message: "injected " + code.String()})
	}
	m.SetFaults(t, csitest.Faults{Rules: rules})

	inProgress := map[codes.Code]bool{codes.Canceled: true, codes.DeadlineExceeded: true,
		codes.Unavailable: true, codes.ResourceExhausted: true, codes.Aborted: true}
	for code := codes.Canceled; code <= codes.Unauthenticated; code++ {
		_, err := c.CreateSnapshot(context.Background(), csi.CreateRequest{Name: "snap-" + code.String(), SourceVolumeID: "vol-1"})
		if csi.Code(err) != code {
			t.Errorf("%v: error %v carries code %v", code, err, csi.Code(err))
			continue
		}
		if st, ok := status.FromError(err); !ok || st.Code() != code {
			t.Errorf("%v: status.FromError lost the status of %v", code, err)
		}
		if got := csi.MayBeInProgress(err); got != inProgress[code] {
			t.Errorf("%v: MayBeInProgress = %v, want %v", code, got, inProgress[code])
		}
		if got, want := csi.DriverMessage(err), code.String()+": injected "+code.String(); got != want {
			t.Errorf("%v: DriverMessage = %q, want %q", code, got, want)
		}
	}
	if got := createdNames(t, m); len(got) != 0 {
		t.Errorf("faults before the call must not create snapshots; backend has %v", got)
	}
}

// A create that fails after the backend cut the snapshot is "may be in
// progress", and the retry with the same name finds the snapshot.
func TestErrorAfterTheBackendCreatedTheSnapshot(t *testing.T) {
	t.Parallel()
	m, c := startClient(t, csitest.Options{Faults: &csitest.Faults{Rules: []csitest.Rule{
		{Method: "CreateSnapshot", Code: "Unavailable", AfterCall: true, Times: 1},
	}}}, csi.Options{})
	_, err := c.CreateSnapshot(context.Background(), csi.CreateRequest{Name: "snap-after", SourceVolumeID: "vol-1"})
	if !csi.MayBeInProgress(err) {
		t.Fatalf("error %v should be classified may-be-in-progress", err)
	}
	backend := m.Created(t)
	if len(backend) != 1 {
		t.Fatalf("backend snapshots = %+v, want the one the failed call cut", backend)
	}
	s := create(t, c, "snap-after", "vol-1")
	if s.ID != backend[0].ID {
		t.Errorf("retry returned id %q, backend holds %q", s.ID, backend[0].ID)
	}
}

func TestNotReadyForTheFirstPolls(t *testing.T) {
	t.Parallel()
	m, c := startClient(t, csitest.Options{}, csi.Options{})
	m.SetFaults(t, csitest.Faults{Rules: []csitest.Rule{{Method: "*", NotReady: 3}}})
	ctx := context.Background()

	s := create(t, c, "snap-slow", "vol-1") // 1
	if s.ReadyToUse {
		t.Errorf("first CreateSnapshot reported ready")
	}
	if b := m.Created(t); len(b) != 1 || !b[0].ReadyToUse {
		t.Errorf("the mock's own snapshot must stay ready (faults rewrite copies): %+v", b)
	}
	if all, err := c.ListAll(ctx, nil); err != nil || readyOf(all, s.ID) != "not ready" {
		t.Errorf("unfiltered ListSnapshots should show the snapshot not ready, without consuming: %v %v", readyOf(all, s.ID), err)
	}
	for i, wantReady := range []bool{false, false, true, true} { // Get=2, Create=3, Get, Create
		var got *csi.Snapshot
		var err error
		if i%2 == 0 {
			got, err = c.GetSnapshot(ctx, s.ID, nil)
		} else {
			got, err = c.CreateSnapshot(ctx, csi.CreateRequest{Name: "snap-slow", SourceVolumeID: "vol-1"})
		}
		if err != nil || got == nil || got.ReadyToUse != wantReady {
			t.Errorf("poll %d: %+v, %v; want readyToUse=%v", i+2, got, err, wantReady)
		}
	}

	m.SetFaults(t, csitest.Faults{Rules: []csitest.Rule{{Method: "CreateSnapshot", Match: "slow-*", NotReady: 1}}})
	if s := create(t, c, "slow-1", "vol-1"); s.ReadyToUse {
		t.Errorf("slow-1 should start not ready")
	}
	if s := create(t, c, "fast-1", "vol-1"); !s.ReadyToUse {
		t.Errorf("fast-1 does not match the pattern and should be ready")
	}
}

func readyOf(list []*csi.Snapshot, id string) string {
	for _, s := range list {
		if s.ID == id {
			if s.ReadyToUse {
				return "ready"
			}
			return "not ready"
		}
	}
	return "absent"
}

func TestTimeouts(t *testing.T) {
	t.Parallel()
	m, c := startClient(t, csitest.Options{}, csi.Options{Timeout: 300 * time.Millisecond})
	ctx := context.Background()

	t.Run("a slow driver runs into the per-call timeout", func(t *testing.T) {
		m.SetFaults(t, csitest.Faults{Rules: []csitest.Rule{{Method: "CreateSnapshot", Latency: csitest.Duration(3 * time.Second), Times: 1}}})
		start := time.Now()
		_, err := c.CreateSnapshot(ctx, csi.CreateRequest{Name: "snap-slow", SourceVolumeID: "vol-1"})
		if csi.Code(err) != codes.DeadlineExceeded || !csi.MayBeInProgress(err) {
			t.Errorf("error %v, want a may-be-in-progress DeadlineExceeded", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("call took %v despite the 300ms timeout", d)
		}
		create(t, c, "snap-slow", "vol-1")
	})

	t.Run("the caller's deadline is honoured too", func(t *testing.T) {
		slow := connect(t, m, csi.Options{Timeout: time.Minute})
		m.SetFaults(t, csitest.Faults{Rules: []csitest.Rule{{Method: "DeleteSnapshot", Latency: csitest.Duration(3 * time.Second)}}})
		cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		if err := slow.DeleteSnapshot(cctx, "1", nil); csi.Code(err) != codes.DeadlineExceeded {
			t.Errorf("error %v, want DeadlineExceeded", err)
		}
	})

	t.Run("a create that hangs after cutting the snapshot", func(t *testing.T) {
		m.SetFaults(t, csitest.Faults{Rules: []csitest.Rule{{Method: "CreateSnapshot", Match: "snap-hung", HangUntilDeadline: true, Times: 1}}})
		_, err := c.CreateSnapshot(ctx, csi.CreateRequest{Name: "snap-hung", SourceVolumeID: "vol-1"})
		if !csi.MayBeInProgress(err) {
			t.Fatalf("error %v should be may-be-in-progress", err)
		}
		var backendID string
		for _, s := range m.Created(t) {
			if s.Name == "snap-hung" {
				backendID = s.ID
			}
		}
		if backendID == "" {
			t.Fatalf("the backend should hold snap-hung although the call timed out")
		}
		if s := create(t, c, "snap-hung", "vol-1"); s.ID != backendID {
			t.Errorf("retry returned %q, backend holds %q", s.ID, backendID)
		}
	})
}

func TestReconnectAfterTheDriverRestarts(t *testing.T) {
	t.Parallel()
	m, c := startClient(t, csitest.Options{}, csi.Options{Timeout: 20 * time.Second})
	create(t, c, "before-restart", "vol-1")

	m.Restart(t)
	create(t, c, "after-restart", "vol-1")

	// A crash leaves the socket file behind; calls made while the driver is
	// down wait for it within their timeout.
	m.Crash(t)
	short, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := c.CreateSnapshot(short, csi.CreateRequest{Name: "while-down", SourceVolumeID: "vol-1"})
	if !csi.MayBeInProgress(err) {
		t.Errorf("call while the driver is down: %v, want a may-be-in-progress error", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.CreateSnapshot(context.Background(), csi.CreateRequest{Name: "during-outage", SourceVolumeID: "vol-1"})
		done <- err
	}()
	time.Sleep(500 * time.Millisecond)
	m.Start(t)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("call made during the outage: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("call made during the outage did not complete after the driver came back")
	}
	if got := createdNames(t, m); len(got) != 1 || got[0] != "during-outage" {
		t.Errorf("new driver holds %v, want [during-outage]", got)
	}
}

// The e2e mock is not safe under concurrent calls; the driver binary
// serializes them. Concurrent creates and deletes must leave exactly the
// built-in snapshots.
func TestConcurrentCreatesAndDeletesLeaveNothingBehind(t *testing.T) {
	t.Parallel()
	m, c := startClient(t, csitest.Options{Faults: &csitest.Faults{Rules: []csitest.Rule{
		{Method: "*", Latency: csitest.Duration(2 * time.Millisecond)},
	}}}, csi.Options{})
	const n = 40
	ids := make([]string, n)
	run := func(f func(i int) error) {
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Go(func() {
				if err := f(i); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	}
	run(func(i int) error {
		s, err := c.CreateSnapshot(context.Background(), csi.CreateRequest{Name: fmt.Sprintf("par-%d", i), SourceVolumeID: "vol-1"})
		if err == nil {
			ids[i] = s.ID
		}
		return err
	})
	if got := len(m.Created(t)); got != n {
		t.Fatalf("backend holds %d created snapshots, want %d", got, n)
	}
	run(func(i int) error { return c.DeleteSnapshot(context.Background(), ids[i], nil) })
	if left := m.Snapshots(t); len(left) != 3 || !left[0].Builtin || !left[1].Builtin || !left[2].Builtin {
		t.Errorf("after deleting everything the backend holds %+v, want only the 3 built-in snapshots", left)
	}
	if got := m.Calls(t).Count("DeleteSnapshot", "OK"); got != n {
		t.Errorf("DeleteSnapshot OK calls = %d, want %d", got, n)
	}
}

func TestOperationsMetric(t *testing.T) {
	t.Parallel()
	m := csitest.StartMock(t, csitest.Options{})
	reg := prometheus.NewRegistry()
	c := connect(t, m, csi.Options{Registerer: reg})
	create(t, c, "m-1", "vol-1")
	create(t, c, "m-1", "vol-1")
	m.SetFaults(t, csitest.Faults{Rules: []csitest.Rule{{Method: "CreateSnapshot", Code: "Unavailable"}}})
	_, _ = c.CreateSnapshot(context.Background(), csi.CreateRequest{Name: "m-2", SourceVolumeID: "vol-1"})

	// A second client on the same registry shares the histogram.
	connect(t, m, csi.Options{Registerer: reg})

	expectOperationSamples(t, reg, map[string]uint64{
		csitest.DriverName + " /csi.v1.Controller/CreateSnapshot OK":                      2,
		csitest.DriverName + " /csi.v1.Controller/CreateSnapshot Unavailable":             1,
		csitest.DriverName + " /csi.v1.Controller/ControllerGetCapabilities OK":           2,
		csitest.DriverName + " /csi.v1.GroupController/GroupControllerGetCapabilities OK": 2,
	})
}
