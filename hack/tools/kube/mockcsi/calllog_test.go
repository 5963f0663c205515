package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

func (h *harness) list(ctx context.Context, id string, secrets map[string]string) (*csi.ListSnapshotsResponse, error) {
	return unary(ctx, h.in, csi.Controller_ListSnapshots_FullMethodName, h.svc.ListSnapshots,
		&csi.ListSnapshotsRequest{SnapshotId: id, Secrets: secrets})
}

func TestCallLogShowsSecretKeysAndParametersNeverValues(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	resp, err := unary(ctx, h.in, csi.Controller_CreateSnapshot_FullMethodName, h.svc.CreateSnapshot,
		&csi.CreateSnapshotRequest{Name: "s1", SourceVolumeId: "vol",
			Secrets: map[string]string{"user": "alice", "password": "hunter2"}, Parameters: map[string]string{"tier": "gold"}})
	if err != nil {
		t.Fatal(err)
	}
	id := resp.GetSnapshot().GetSnapshotId()
	if _, err := h.list(ctx, id, map[string]string{"list-user": "bob"}); err != nil {
		t.Fatal(err)
	}
	if err := h.delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := h.create(ctx, ""); err == nil {
		t.Fatal("a create without a name must fail")
	}

	srv := httptest.NewServer(h.in.handler(h.svc))
	defer srv.Close()
	get := func(path string) CallLogResponse {
		t.Helper()
		r, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		var out CallLogResponse
		if err := json.NewDecoder(r.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	got := get("/calllog")
	if len(got.Entries) != 4 || got.Last != 4 {
		t.Fatalf("log = %+v, want 4 entries", got)
	}
	c, l, d, bad := got.Entries[0], got.Entries[1], got.Entries[2], got.Entries[3]
	if c.Method != "CreateSnapshot" || c.Name != "s1" || c.SnapshotID != id || c.Parameters["tier"] != "gold" ||
		len(c.SecretKeys) != 2 || c.SecretKeys[0] != "password" || c.Code != "OK" || c.ReadyToUse == nil || !*c.ReadyToUse || !c.HasCreationTime {
		t.Errorf("create entry = %+v", c)
	}
	if l.Method != "ListSnapshots" || l.SnapshotID != id || l.Name != "s1" || len(l.SecretKeys) != 1 || l.Entries == nil || *l.Entries != 1 {
		t.Errorf("list entry = %+v", l)
	}
	if d.Method != "DeleteSnapshot" || d.SnapshotID != id || d.Name != "s1" || len(d.SecretKeys) != 0 {
		t.Errorf("delete entry = %+v (the name must be the one known before the delete)", d)
	}
	if bad.Code != "InvalidArgument" || bad.SnapshotID != "" {
		t.Errorf("failed create entry = %+v", bad)
	}
	raw, _ := json.Marshal(got)
	for _, secret := range []string{"alice", "hunter2", "bob"} {
		if strings.Contains(string(raw), secret) {
			t.Errorf("secret value %q in the call log", secret)
		}
	}
	if since := get("/calllog?since=2"); len(since.Entries) != 2 || since.Entries[0].Seq != 3 {
		t.Errorf("since=2 = %+v", since)
	}
	req, _ := http.NewRequest(http.MethodDelete, srv.URL+"/calllog", nil)
	if r, err := http.DefaultClient.Do(req); err != nil || r.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE /calllog = %v, %v", r, err)
	}
	_, _ = h.create(ctx, "s2")
	if after := get("/calllog"); len(after.Entries) != 1 || after.Entries[0].Seq != 5 {
		t.Errorf("after reset = %+v; seq must go on", after)
	}
	if r, _ := http.Get(srv.URL + "/calllog?since=x"); r.StatusCode != http.StatusBadRequest {
		t.Errorf("since=x: %s", r.Status)
	}
}

func TestCallLogIsBounded(t *testing.T) {
	l := callLog{max: 3}
	for i := 0; i < 5; i++ {
		l.add(CallLogEntry{Method: "Probe"})
	}
	got := l.since(0)
	if len(got.Entries) != 3 || got.Entries[0].Seq != 3 || got.Dropped != 2 || got.Last != 5 {
		t.Errorf("log = %+v", got)
	}
}

// TestFullCallLogKeepsTheNewest adds calls to a full log across several
// moves of its array and checks that it holds exactly the newest max.
func TestFullCallLogKeepsTheNewest(t *testing.T) {
	l := callLog{max: 100}
	for i := 1; i <= 1000; i++ {
		l.add(CallLogEntry{Method: "DeleteSnapshot", SnapshotID: strconv.Itoa(i)})
		got := l.since(0)
		want := min(i, 100)
		if len(got.Entries) != want || got.Entries[want-1].Seq != int64(i) || got.Entries[0].Seq != int64(i-want+1) || got.Dropped != int64(i-want) {
			t.Fatalf("after %d calls: %d entries from seq %d to %d, %d dropped", i, len(got.Entries), got.Entries[0].Seq, got.Entries[len(got.Entries)-1].Seq, got.Dropped)
		}
	}
	if l.since(950).Entries[0].SnapshotID != "951" {
		t.Errorf("since(950) starts at %+v", l.since(950).Entries[0])
	}
}

// BenchmarkFullCallLogAdd is the cost of one call's entry once the log is
// full at the driver's bound (it copied the whole log on every call).
func BenchmarkFullCallLogAdd(b *testing.B) {
	l := callLog{max: callLogMax}
	for range callLogMax {
		l.add(CallLogEntry{Method: "CreateSnapshot", Name: "snapshot-0123456789", SnapshotID: "0123456789"})
	}
	b.ReportAllocs()
	for b.Loop() {
		l.add(CallLogEntry{Method: "DeleteSnapshot", SnapshotID: "0123456789"})
	}
}

func TestSizeAndNoCreationTimeShapeAnswers(t *testing.T) {
	h := newHarness(t, Rule{Method: "*", SizeBytes: 1 << 30}, Rule{Method: "CreateSnapshot", Match: "bare-*", NoCreationTime: true})
	ctx := context.Background()
	sized, err := h.create(ctx, "sized")
	if err != nil || sized.GetSnapshot().GetSizeBytes() != 1<<30 || sized.GetSnapshot().GetCreationTime() == nil {
		t.Fatalf("sized = %v, %v", sized, err)
	}
	bare, err := h.create(ctx, "bare-1")
	if err != nil || bare.GetSnapshot().GetCreationTime() != nil || bare.GetSnapshot().GetSizeBytes() != 1<<30 {
		t.Fatalf("bare = %v, %v; want no creation time, the rule's size", bare, err)
	}
	// ListSnapshots is not named by the NoCreationTime rule: it keeps the time.
	list, err := h.list(ctx, bare.GetSnapshot().GetSnapshotId(), nil)
	if err != nil || list.GetEntries()[0].GetSnapshot().GetCreationTime() == nil || list.GetEntries()[0].GetSnapshot().GetSizeBytes() != 1<<30 {
		t.Fatalf("list = %v, %v", list, err)
	}
	h.in.setFaults(Faults{Rules: []Rule{{NoCreationTime: true}}}, "test")
	again, _ := h.create(ctx, "sized")
	if again.GetSnapshot().GetCreationTime() != nil || again.GetSnapshot().GetSizeBytes() != 0 {
		t.Errorf("NoCreationTime alone must drop time and size: %v", again)
	}
	if _, err := ParseFaults([]byte(`{"rules":[{"sizeBytes":-1}]}`)); err == nil {
		t.Error("a negative size must be refused")
	}
}
