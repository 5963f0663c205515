package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/kubernetes/test/e2e/storage/drivers/csi-test/mock/service"
)

func TestParseFaults(t *testing.T) {
	tests := map[string]struct {
		in      string
		rules   int
		wantErr bool
	}{
		"empty input means no faults":     {in: "  ", rules: 0},
		"a full rule set":                 {in: `{"rules":[{"method":"CreateSnapshot","match":"s-*","times":2,"latency":"10ms","code":"UNAVAILABLE","message":"m","afterCall":true,"notReady":1,"hang":"1s","hangUntilDeadline":true}]}`, rules: 1},
		"a typo in a field is refused":    {in: `{"rules":[{"methd":"CreateSnapshot"}]}`, wantErr: true},
		"an unknown code is refused":      {in: `{"rules":[{"code":"Nope"}]}`, wantErr: true},
		"code OK is refused":              {in: `{"rules":[{"code":"OK"}]}`, wantErr: true},
		"a bad glob is refused":           {in: `{"rules":[{"match":"["}]}`, wantErr: true},
		"a negative count is refused":     {in: `{"rules":[{"times":-1}]}`, wantErr: true},
		"a number as duration is refused": {in: `{"rules":[{"latency":5}]}`, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f, err := ParseFaults([]byte(tc.in))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if len(f.Rules) != tc.rules {
				t.Errorf("%d rules, want %d", len(f.Rules), tc.rules)
			}
		})
	}
}

func TestParseCode(t *testing.T) {
	for in, want := range map[string]codes.Code{
		"Unavailable": codes.Unavailable, "UNAVAILABLE": codes.Unavailable, "unavailable": codes.Unavailable,
		"DEADLINE_EXCEEDED": codes.DeadlineExceeded, "DeadlineExceeded": codes.DeadlineExceeded, "14": codes.Unavailable,
	} {
		if got, err := parseCode(in); err != nil || got != want {
			t.Errorf("parseCode(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
}

// harness calls the interceptor in process, in front of a real mock service.
type harness struct {
	in   *injector
	svc  service.Service
	stop chan struct{}
}

func newHarness(t *testing.T, rules ...Rule) *harness {
	stop := make(chan struct{})
	h := &harness{in: newInjector(stop), svc: service.New(service.Config{DriverName: "test"}), stop: stop}
	if err := h.in.recordBuiltins(context.Background(), h.svc); err != nil {
		t.Fatal(err)
	}
	h.in.setFaults(Faults{Rules: rules}, "test")
	return h
}

// unary sends req through the interceptor to handler, as the gRPC server
// does for fullMethod: every call of these tests takes that path.
func unary[Req, Resp any](ctx context.Context, in *injector, fullMethod string, handler func(context.Context, Req) (Resp, error), req Req) (Resp, error) {
	resp, err := in.Unary(ctx, req, &grpc.UnaryServerInfo{FullMethod: fullMethod},
		func(ctx context.Context, r any) (any, error) { return handler(ctx, r.(Req)) })
	if err != nil {
		var none Resp
		return none, err
	}
	return resp.(Resp), nil
}

func (h *harness) create(ctx context.Context, name string) (*csi.CreateSnapshotResponse, error) {
	return unary(ctx, h.in, csi.Controller_CreateSnapshot_FullMethodName, h.svc.CreateSnapshot,
		&csi.CreateSnapshotRequest{Name: name, SourceVolumeId: "vol"})
}

func (h *harness) delete(ctx context.Context, id string) error {
	_, err := unary(ctx, h.in, csi.Controller_DeleteSnapshot_FullMethodName, h.svc.DeleteSnapshot,
		&csi.DeleteSnapshotRequest{SnapshotId: id})
	return err
}

func TestTimesLimitsAnErrorToTheFirstCalls(t *testing.T) {
	h := newHarness(t, Rule{Method: "CreateSnapshot", Code: "Unavailable", Times: 2})
	ctx := context.Background()
	for i, want := range []codes.Code{codes.Unavailable, codes.Unavailable, codes.OK} {
		_, err := h.create(ctx, "s")
		if status.Code(err) != want {
			t.Errorf("call %d: %v, want %v", i+1, err, want)
		}
	}
	calls := h.in.snapshotCalls()["/csi.v1.Controller/CreateSnapshot"]
	if calls["Unavailable"] != 2 || calls["OK"] != 1 {
		t.Errorf("counts = %v", calls)
	}
}

func TestNotReadyRewritesACopyOnly(t *testing.T) {
	h := newHarness(t, Rule{Method: "CreateSnapshot", NotReady: 1})
	ctx := context.Background()
	resp, err := h.create(ctx, "s")
	if err != nil || resp.GetSnapshot().GetReadyToUse() {
		t.Fatalf("first create = %v, %v; want not ready", resp, err)
	}
	// The mock's cached object is untouched.
	direct, err := h.svc.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "s", SourceVolumeId: "vol"})
	if err != nil || !direct.GetSnapshot().GetReadyToUse() {
		t.Errorf("mock's own snapshot = %v, %v; want ready", direct, err)
	}
	if resp, _ := h.create(ctx, "s"); !resp.GetSnapshot().GetReadyToUse() {
		t.Errorf("second create should be ready")
	}
}

func TestMatchOnANameCatchesDeletesByID(t *testing.T) {
	h := newHarness(t, Rule{Method: "DeleteSnapshot", Match: "doomed-*", Code: "Internal"})
	ctx := context.Background()
	doomed, _ := h.create(ctx, "doomed-1")
	fine, _ := h.create(ctx, "fine-1")
	if err := h.delete(ctx, doomed.GetSnapshot().GetSnapshotId()); status.Code(err) != codes.Internal {
		t.Errorf("delete of doomed-1: %v, want Internal", err)
	}
	if err := h.delete(ctx, fine.GetSnapshot().GetSnapshotId()); err != nil {
		t.Errorf("delete of fine-1: %v", err)
	}
}

func TestHangKeepsTheSnapshotAndEndsWithTheCaller(t *testing.T) {
	h := newHarness(t, Rule{Method: "CreateSnapshot", HangUntilDeadline: true})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := h.create(ctx, "hung"); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("hung create: %v, want DeadlineExceeded", err)
	}
	list, err := h.in.listBackend(context.Background(), h.svc)
	if err != nil || len(list) != 4 || list[3].Name != "hung" || list[0].Builtin != true {
		t.Errorf("backend = %+v, %v; want 3 built-ins and hung", list, err)
	}
	// Shutdown releases hanging calls.
	done := make(chan error, 1)
	go func() { _, err := h.create(context.Background(), "hung"); done <- err }()
	time.Sleep(50 * time.Millisecond)
	close(h.stop)
	if err := <-done; status.Code(err) != codes.Unavailable {
		t.Errorf("create during shutdown: %v, want Unavailable", err)
	}
}

func TestFaultsFileIsReReadOnChange(t *testing.T) {
	h := newHarness(t)
	path := filepath.Join(t.TempDir(), "faults.json")
	w := &fileWatcher{path: path, in: h.in}
	version := func() int64 { return h.in.currentFaults().Version }

	v0 := version()
	if err := w.check(); err != nil || version() != v0 {
		t.Fatalf("a missing file must leave the faults alone: %v", err)
	}
	if err := os.WriteFile(path, []byte(`{"rules":[{"method":"Probe","code":"unavailable"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := w.check(); err != nil || version() != v0+1 {
		t.Fatalf("file not installed: %v", err)
	}
	if got := h.in.currentFaults().Rules[0].Code; got != "Unavailable" {
		t.Errorf("code shown as %q, want the canonical Unavailable", got)
	}
	if err := w.check(); err != nil || version() != v0+1 {
		t.Errorf("unchanged content must not reinstall (and reset counters)")
	}
	if err := os.WriteFile(path, []byte(`{"rules":[{"bogus":1}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := w.check(); err == nil || version() != v0+1 {
		t.Errorf("invalid content must be reported and ignored: %v", err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := w.check(); err != nil || version() != v0+2 || len(h.in.currentFaults().Rules) != 0 {
		t.Errorf("a removed file must clear the faults: %v", err)
	}
}

func TestHangForADurationThenAnswers(t *testing.T) {
	h := newHarness(t, Rule{Method: "CreateSnapshot", Hang: Duration(80 * time.Millisecond), Latency: Duration(20 * time.Millisecond)})
	start := time.Now()
	resp, err := h.create(context.Background(), "slow")
	if err != nil || resp.GetSnapshot().GetSnapshotId() == "" {
		t.Fatalf("create = %v, %v", resp, err)
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Errorf("create took %v, want at least latency+hang = 100ms", d)
	}
}
