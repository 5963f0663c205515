package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// call sends a request of any kind the tests use through the interceptor
// to the mock service or to a group server in front of it.
func (h *harness) call(ctx context.Context, req any) (any, error) {
	gs := newGroupServer(h.in, h.svc)
	switch r := req.(type) {
	case *csi.CreateVolumeGroupSnapshotRequest:
		return unary(ctx, h.in, csi.GroupController_CreateVolumeGroupSnapshot_FullMethodName, gs.CreateVolumeGroupSnapshot, r)
	case *csi.GetVolumeGroupSnapshotRequest:
		return unary(ctx, h.in, csi.GroupController_GetVolumeGroupSnapshot_FullMethodName, gs.GetVolumeGroupSnapshot, r)
	case *csi.DeleteVolumeGroupSnapshotRequest:
		return unary(ctx, h.in, csi.GroupController_DeleteVolumeGroupSnapshot_FullMethodName, gs.DeleteVolumeGroupSnapshot, r)
	case *csi.GroupControllerGetCapabilitiesRequest:
		return unary(ctx, h.in, csi.GroupController_GroupControllerGetCapabilities_FullMethodName, gs.GroupControllerGetCapabilities, r)
	case *csi.CreateSnapshotRequest:
		return unary(ctx, h.in, csi.Controller_CreateSnapshot_FullMethodName, h.svc.CreateSnapshot, r)
	default:
		panic(fmt.Sprintf("harness.call: unsupported request %T", req))
	}
}

func (h *harness) createGroup(ctx context.Context, name string, vols ...string) (*csi.VolumeGroupSnapshot, error) {
	resp, err := h.call(ctx, &csi.CreateVolumeGroupSnapshotRequest{Name: name, SourceVolumeIds: vols})
	if err != nil {
		return nil, err
	}
	return resp.(*csi.CreateVolumeGroupSnapshotResponse).GetGroupSnapshot(), nil
}

// mustCreateGroup is createGroup for a test that cannot go on without
// the group.
func (h *harness) mustCreateGroup(ctx context.Context, t *testing.T, name string, vols ...string) *csi.VolumeGroupSnapshot {
	t.Helper()
	g, err := h.createGroup(ctx, name, vols...)
	if err != nil {
		t.Fatalf("create group %s: %v", name, err)
	}
	return g
}

func (h *harness) getGroup(ctx context.Context, id string, snapshotIDs ...string) (*csi.VolumeGroupSnapshot, error) {
	resp, err := h.call(ctx, &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: id, SnapshotIds: snapshotIDs})
	if err != nil {
		return nil, err
	}
	return resp.(*csi.GetVolumeGroupSnapshotResponse).GetGroupSnapshot(), nil
}

func (h *harness) deleteGroup(ctx context.Context, id string, snapshotIDs ...string) error {
	_, err := h.call(ctx, &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: id, SnapshotIds: snapshotIDs})
	return err
}

func memberIDs(g *csi.VolumeGroupSnapshot) []string {
	var out []string
	for _, s := range g.GetSnapshots() {
		out = append(out, s.GetSnapshotId())
	}
	return out
}

// listed returns the snapshots of an unfiltered ListSnapshots by id.
func (h *harness) listed(t *testing.T) map[string]*csi.Snapshot {
	t.Helper()
	resp, err := h.list(context.Background(), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*csi.Snapshot{}
	for _, e := range resp.GetEntries() {
		out[e.GetSnapshot().GetSnapshotId()] = e.GetSnapshot()
	}
	return out
}

func httpJSON(t *testing.T, method, url string, body string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil && resp.StatusCode < 300 {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode
}

func TestGroupCreateIsIdempotentByName(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	g := h.mustCreateGroup(ctx, t, "grp-1", "vol-a", "vol-b")
	if !strings.HasPrefix(g.GetGroupSnapshotId(), groupIDPrefix) || len(g.GetSnapshots()) != 2 || !g.GetReadyToUse() || g.GetCreationTime() == nil {
		t.Fatalf("group = %v", g)
	}
	for i, vol := range []string{"vol-a", "vol-b"} {
		s := g.GetSnapshots()[i]
		if s.GetSourceVolumeId() != vol || s.GetGroupSnapshotId() != g.GetGroupSnapshotId() || !s.GetReadyToUse() || s.GetSnapshotId() == "" {
			t.Errorf("member %d = %v", i, s)
		}
	}
	// The members are ordinary snapshots of the mock's store.
	listed := h.listed(t)
	for _, id := range memberIDs(g) {
		if s := listed[id]; s == nil || s.GetGroupSnapshotId() != g.GetGroupSnapshotId() {
			t.Errorf("ListSnapshots shows member %s as %v; want it with its group id", id, s)
		}
	}
	backend, err := h.in.listBackend(ctx, h.svc)
	if err != nil || len(backend) != 5 || backend[3].GroupSnapshotID != g.GetGroupSnapshotId() || backend[3].Name != "grp-1:vol-a" {
		t.Errorf("backend = %+v, %v; want 3 built-ins and the two members", backend, err)
	}

	again, err := h.createGroup(ctx, "grp-1", "vol-b", "vol-a")
	if err != nil || again.GetGroupSnapshotId() != g.GetGroupSnapshotId() || !slices.Equal(memberIDs(again), memberIDs(g)) {
		t.Errorf("same name and volumes: %v, %v; want the same group %v", again, err, g)
	}
	if _, err := h.createGroup(ctx, "grp-1", "vol-a", "vol-c"); status.Code(err) != codes.AlreadyExists {
		t.Errorf("same name, other volumes: %v, want AlreadyExists", err)
	}
	for name, vols := range map[string][]string{"": {"vol-a"}, "grp-empty": nil, "grp-twice": {"vol-a", "vol-a"}, "grp-blank": {""}} {
		if _, err := h.createGroup(ctx, name, vols...); status.Code(err) != codes.InvalidArgument {
			t.Errorf("create %q %v: %v, want InvalidArgument", name, vols, err)
		}
	}
	if backend, _ := h.in.listBackend(ctx, h.svc); len(backend) != 5 {
		t.Errorf("backend holds %d snapshots after the repeated and refused creates, want 5", len(backend))
	}
	calls := h.in.snapshotCalls()["/csi.v1.GroupController/CreateVolumeGroupSnapshot"]
	if calls["OK"] != 2 || calls["AlreadyExists"] != 1 || calls["InvalidArgument"] != 4 {
		t.Errorf("counts = %v", calls)
	}
}

func TestGroupNotReadyForTheFirstAnswers(t *testing.T) {
	h := newHarness(t, Rule{Method: "*", NotReady: 2})
	ctx := context.Background()
	g := h.mustCreateGroup(ctx, t, "grp-slow", "vol-a", "vol-b") // 1
	check := func(step string, g *csi.VolumeGroupSnapshot, want bool) {
		t.Helper()
		if g.GetReadyToUse() != want {
			t.Errorf("%s: group ready = %v, want %v", step, g.GetReadyToUse(), want)
		}
		for _, s := range g.GetSnapshots() {
			if s.GetReadyToUse() != want {
				t.Errorf("%s: member %s ready = %v, want %v", step, s.GetSnapshotId(), s.GetReadyToUse(), want)
			}
		}
	}
	check("create", g, false)
	got, err := h.getGroup(ctx, g.GetGroupSnapshotId()) // 2
	if err != nil {
		t.Fatal(err)
	}
	check("first get", got, false)
	got, _ = h.getGroup(ctx, g.GetGroupSnapshotId())
	check("second get", got, true)
	again, _ := h.createGroup(ctx, "grp-slow", "vol-a", "vol-b")
	check("repeated create", again, true)
	// The backend's own snapshots are ready all along.
	groups, err := h.in.listGroups(ctx, h.svc)
	if err != nil || len(groups) != 1 || !groups[0].ReadyToUse {
		t.Errorf("GET /groups = %+v, %v", groups, err)
	}
}

func TestGroupGet(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	g := h.mustCreateGroup(ctx, t, "grp-get", "vol-a", "vol-b")
	ids := memberIDs(g)
	got, err := h.getGroup(ctx, g.GetGroupSnapshotId())
	if err != nil || got.GetGroupSnapshotId() != g.GetGroupSnapshotId() || !slices.Equal(memberIDs(got), ids) ||
		!got.GetCreationTime().AsTime().Equal(g.GetCreationTime().AsTime()) {
		t.Errorf("get = %v, %v; want %v", got, err, g)
	}
	if _, err := h.getGroup(ctx, g.GetGroupSnapshotId(), ids[1], ids[0]); err != nil {
		t.Errorf("get with the member ids in another order: %v", err)
	}
	if _, err := h.getGroup(ctx, g.GetGroupSnapshotId(), ids[0]); status.Code(err) != codes.InvalidArgument {
		t.Errorf("get with part of the members: %v, want InvalidArgument", err)
	}
	if _, err := h.getGroup(ctx, "group-999"); status.Code(err) != codes.NotFound {
		t.Errorf("get of an unknown id: %v, want NotFound", err)
	}
	if _, err := h.getGroup(ctx, ""); status.Code(err) != codes.InvalidArgument {
		t.Errorf("get without id: %v, want InvalidArgument", err)
	}
}

func TestGroupDeleteAndMemberProtection(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	g := h.mustCreateGroup(ctx, t, "grp-del", "vol-a", "vol-b")
	gid, ids := g.GetGroupSnapshotId(), memberIDs(g)
	lone, _ := h.create(ctx, "lone")

	err := h.delete(ctx, ids[0])
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), gid) {
		t.Errorf("DeleteSnapshot of a member: %v, want FailedPrecondition naming %s", err, gid)
	}
	if err := h.deleteGroup(ctx, gid, ids[0]); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("DeleteVolumeGroupSnapshot with part of the members: %v, want FailedPrecondition", err)
	}
	if listed := h.listed(t); listed[ids[0]] == nil || listed[ids[1]] == nil {
		t.Fatalf("refused deletes removed members: %v", listed)
	}

	if err := h.deleteGroup(ctx, gid, ids[1], ids[0]); err != nil {
		t.Fatalf("DeleteVolumeGroupSnapshot: %v", err)
	}
	listed := h.listed(t)
	if listed[ids[0]] != nil || listed[ids[1]] != nil || listed[lone.GetSnapshot().GetSnapshotId()] == nil || len(listed) != 4 {
		t.Errorf("after the delete ListSnapshots = %v; want the built-ins and lone", listed)
	}
	if err := h.deleteGroup(ctx, gid); err != nil {
		t.Errorf("second delete: %v", err)
	}
	if err := h.deleteGroup(ctx, "group-999"); err != nil {
		t.Errorf("delete of an unknown id: %v", err)
	}
	if _, err := h.getGroup(ctx, gid); status.Code(err) != codes.NotFound {
		t.Errorf("get after delete: %v, want NotFound", err)
	}
	if err := h.delete(ctx, ids[0]); err != nil {
		t.Errorf("DeleteSnapshot of a former member: %v, want OK", err)
	}
	// The name is free again: a new group gets new members.
	g2, err := h.createGroup(ctx, "grp-del", "vol-c")
	if err != nil || g2.GetGroupSnapshotId() == gid || len(g2.GetSnapshots()) != 1 {
		t.Errorf("re-create = %v, %v", g2, err)
	}

	log := h.in.log.since(0).Entries
	var refused *CallLogEntry
	for i, e := range log {
		if e.Method == "DeleteSnapshot" && e.Code == "FailedPrecondition" {
			refused = &log[i]
		}
	}
	if refused == nil || refused.SnapshotID != ids[0] || refused.GroupSnapshotID != gid || refused.Name != "grp-del:vol-a" {
		t.Errorf("refused DeleteSnapshot logged as %+v", refused)
	}
}

// With --allow-member-delete a member goes on its own, as the hostpath
// driver lets it, and the group's delete still succeeds.
func TestGroupMemberDeleteAllowed(t *testing.T) {
	h := newHarness(t)
	h.in.memberDelete = true
	ctx := context.Background()
	g := h.mustCreateGroup(ctx, t, "grp-loose", "vol-a", "vol-b")
	gid, ids := g.GetGroupSnapshotId(), memberIDs(g)
	if err := h.delete(ctx, ids[0]); err != nil {
		t.Fatalf("DeleteSnapshot of a member: %v, want OK", err)
	}
	if listed := h.listed(t); listed[ids[0]] != nil || listed[ids[1]] == nil {
		t.Errorf("after the member's delete ListSnapshots = %v; want %s gone, %s kept", listed, ids[0], ids[1])
	}
	if err := h.deleteGroup(ctx, gid, ids[1], ids[0]); err != nil {
		t.Fatalf("DeleteVolumeGroupSnapshot after a member went: %v", err)
	}
	if listed := h.listed(t); listed[ids[1]] != nil {
		t.Errorf("after the group's delete ListSnapshots = %v; want %s gone", listed, ids[1])
	}
}

func TestGroupFaults(t *testing.T) {
	h := newHarness(t,
		Rule{Method: "CreateVolumeGroupSnapshot", Match: "bad-*", Code: "Unavailable", Times: 1},
		Rule{Method: "/csi.v1.GroupController/DeleteVolumeGroupSnapshot", Match: "doomed-*", Code: "Internal"},
		Rule{Method: "CreateVolumeGroupSnapshot", Match: "late-*", Code: "DeadlineExceeded", AfterCall: true, Times: 1},
	)
	ctx := context.Background()
	if _, err := h.createGroup(ctx, "bad-1", "vol-a"); status.Code(err) != codes.Unavailable {
		t.Errorf("first create of bad-1: %v, want Unavailable", err)
	}
	if groups, _ := h.in.listGroups(ctx, h.svc); len(groups) != 0 {
		t.Errorf("a fault before the call must create nothing: %+v", groups)
	}
	if _, err := h.createGroup(ctx, "bad-1", "vol-a"); err != nil {
		t.Errorf("second create of bad-1: %v", err)
	}
	doomed := h.mustCreateGroup(ctx, t, "doomed-1", "vol-a")
	// The glob on the name also catches the delete by id.
	if err := h.deleteGroup(ctx, doomed.GetGroupSnapshotId()); status.Code(err) != codes.Internal {
		t.Errorf("delete of doomed-1: %v, want Internal", err)
	}
	if _, err := h.createGroup(ctx, "late-1", "vol-a", "vol-b"); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("create of late-1: %v, want DeadlineExceeded", err)
	}
	groups, _ := h.in.listGroups(ctx, h.svc)
	if len(groups) != 3 || groups[2].Name != "late-1" || len(groups[2].SnapshotIDs) != 2 {
		t.Errorf("groups = %+v; an afterCall fault leaves the group on the backend", groups)
	}
	calls := h.in.snapshotCalls()
	if c := calls["/csi.v1.GroupController/CreateVolumeGroupSnapshot"]; c["Unavailable"] != 1 || c["OK"] != 2 || c["DeadlineExceeded"] != 1 {
		t.Errorf("create counts = %v", c)
	}
}

func TestGroupHangKeepsTheGroup(t *testing.T) {
	h := newHarness(t, Rule{Method: "CreateVolumeGroupSnapshot", HangUntilDeadline: true, Times: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := h.createGroup(ctx, "hung", "vol-a"); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("hung create: %v, want DeadlineExceeded", err)
	}
	if g, err := h.createGroup(context.Background(), "hung", "vol-a"); err != nil || len(g.GetSnapshots()) != 1 {
		t.Errorf("retry: %v, %v", g, err)
	}
	if groups, _ := h.in.listGroups(context.Background(), h.svc); len(groups) != 1 {
		t.Errorf("groups = %+v, want the one group", groups)
	}
}

func TestPerVolumeSizes(t *testing.T) {
	h := newHarness(t, Rule{Method: "*", SizeBytes: 5}) // like --snapshot-size=5
	ctx := context.Background()
	srv := httptest.NewServer(h.in.handler(h.svc))
	defer srv.Close()

	var sizes VolumeSizes
	if code := httpJSON(t, http.MethodPut, srv.URL+"/volume-sizes", `{"vol-a": 1073741824, "vol-c": 7}`, &sizes); code != http.StatusOK || sizes["vol-a"] != 1<<30 || len(sizes) != 2 {
		t.Fatalf("PUT /volume-sizes = %d, %v", code, sizes)
	}
	sizes = nil
	if code := httpJSON(t, http.MethodPatch, srv.URL+"/volume-sizes", `{"vol-b": 2048, "vol-c": 0}`, &sizes); code != http.StatusOK || len(sizes) != 2 || sizes["vol-b"] != 2048 {
		t.Fatalf("PATCH /volume-sizes = %d, %v; want vol-a and vol-b", code, sizes)
	}
	for _, bad := range []string{`{"vol-a": -1}`, `{"": 1}`, `[1]`, `{"vol-a": "1Gi"}`} {
		if code := httpJSON(t, http.MethodPut, srv.URL+"/volume-sizes", bad, nil); code != http.StatusBadRequest {
			t.Errorf("PUT %s = %d, want 400", bad, code)
		}
	}
	sizes = nil
	if code := httpJSON(t, http.MethodGet, srv.URL+"/volume-sizes", "", &sizes); code != http.StatusOK || len(sizes) != 2 {
		t.Errorf("GET /volume-sizes = %d, %v", code, sizes)
	}

	resp, err := h.call(ctx, &csi.CreateSnapshotRequest{Name: "single-a", SourceVolumeId: "vol-a"})
	if err != nil || resp.(*csi.CreateSnapshotResponse).GetSnapshot().GetSizeBytes() != 1<<30 {
		t.Errorf("CreateSnapshot of vol-a = %v, %v; want 1Gi", resp, err)
	}
	other, err := h.create(ctx, "single-other") // from "vol"
	if err != nil || other.GetSnapshot().GetSizeBytes() != 5 {
		t.Errorf("CreateSnapshot of a volume without a size = %v, %v; want the fallback 5", other, err)
	}
	g := h.mustCreateGroup(ctx, t, "grp-sized", "vol-a", "vol-b", "vol-x")
	want := map[string]int64{"vol-a": 1 << 30, "vol-b": 2048, "vol-x": 5}
	for _, s := range g.GetSnapshots() {
		if s.GetSizeBytes() != want[s.GetSourceVolumeId()] {
			t.Errorf("group member of %s: size %d, want %d", s.GetSourceVolumeId(), s.GetSizeBytes(), want[s.GetSourceVolumeId()])
		}
	}
	got, _ := h.getGroup(ctx, g.GetGroupSnapshotId())
	for _, s := range got.GetSnapshots() {
		if s.GetSizeBytes() != want[s.GetSourceVolumeId()] {
			t.Errorf("GetVolumeGroupSnapshot member of %s: size %d", s.GetSourceVolumeId(), s.GetSizeBytes())
		}
	}
	for _, s := range h.listed(t) {
		if w, ok := want[s.GetSourceVolumeId()]; ok && s.GetSizeBytes() != w {
			t.Errorf("ListSnapshots: %s of %s has size %d, want %d", s.GetSnapshotId(), s.GetSourceVolumeId(), s.GetSizeBytes(), w)
		}
	}
	// GET /snapshots is the backend's truth: volume sizes, but no fault rules.
	var snaps SnapshotsResponse
	httpJSON(t, http.MethodGet, srv.URL+"/snapshots", "", &snaps)
	for _, s := range snaps.Snapshots {
		wantSize := map[string]int64{"vol-a": 1 << 30, "vol-b": 2048}[s.SourceVolumeID]
		if s.SizeBytes != wantSize {
			t.Errorf("GET /snapshots: %s of %s has size %d, want %d", s.ID, s.SourceVolumeID, s.SizeBytes, wantSize)
		}
	}

	// Flag form.
	o := Options{CSIAddress: "/tmp/x.sock", DriverName: "d", PollInterval: 1, VolumeSizes: "vol-a=1073741824, vol-b=2048"}
	if _, err := o.Validate(); err != nil {
		t.Errorf("--volume-sizes: %v", err)
	}
	if s, _ := parseVolumeSizesFlag(o.VolumeSizes); s["vol-a"] != 1<<30 || s["vol-b"] != 2048 {
		t.Errorf("parsed %v", s)
	}
	for _, bad := range []string{"vol-a", "vol-a=1Gi", "vol-a=-1", "=5"} {
		o.VolumeSizes = bad
		if _, err := o.Validate(); err == nil {
			t.Errorf("--volume-sizes=%s accepted", bad)
		}
	}
}

func TestGroupCallLogAndHTTP(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	resp, err := h.call(ctx, &csi.CreateVolumeGroupSnapshotRequest{Name: "grp-log", SourceVolumeIds: []string{"vol-a", "vol-b"},
		Secrets: map[string]string{"user": "alice", "password": "hunter2"}, Parameters: map[string]string{"tier": "gold"}})
	if err != nil {
		t.Fatal(err)
	}
	g := resp.(*csi.CreateVolumeGroupSnapshotResponse).GetGroupSnapshot()
	gid := g.GetGroupSnapshotId()
	if _, err := h.call(ctx, &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: gid, Secrets: map[string]string{"token": "s3cret"}}); err != nil {
		t.Fatal(err)
	}

	srv := httptest.NewServer(h.in.handler(h.svc))
	defer srv.Close()
	var groups GroupsResponse
	httpJSON(t, http.MethodGet, srv.URL+"/groups", "", &groups)
	if len(groups.Groups) != 1 {
		t.Fatalf("GET /groups = %+v", groups)
	}
	if e := groups.Groups[0]; e.ID != gid || e.Name != "grp-log" || !slices.Equal(e.SnapshotIDs, memberIDs(g)) ||
		!slices.Equal(e.SourceVolumeIDs, []string{"vol-a", "vol-b"}) || !e.ReadyToUse || e.Parameters["tier"] != "gold" {
		t.Errorf("GET /groups entry = %+v", e)
	}
	var snaps SnapshotsResponse
	httpJSON(t, http.MethodGet, srv.URL+"/snapshots", "", &snaps)
	if n := len(snaps.Snapshots); n != 5 || snaps.Snapshots[3].GroupSnapshotID != gid || snaps.Snapshots[0].GroupSnapshotID != "" {
		t.Errorf("GET /snapshots = %+v", snaps)
	}

	if _, err := h.call(ctx, &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: gid, SnapshotIds: memberIDs(g), Secrets: map[string]string{"user": "bob"}}); err != nil {
		t.Fatal(err)
	}
	log := h.in.log.since(0).Entries
	if len(log) != 3 {
		t.Fatalf("log = %+v", log)
	}
	c, get, del := log[0], log[1], log[2]
	if c.Method != "CreateVolumeGroupSnapshot" || c.FullMethod != "/csi.v1.GroupController/CreateVolumeGroupSnapshot" || c.Name != "grp-log" ||
		c.GroupSnapshotID != gid || !slices.Equal(c.SourceVolumeIDs, []string{"vol-a", "vol-b"}) || !slices.Equal(c.SnapshotIDs, memberIDs(g)) ||
		!slices.Equal(c.SecretKeys, []string{"password", "user"}) || c.Parameters["tier"] != "gold" || c.Code != "OK" ||
		c.ReadyToUse == nil || !*c.ReadyToUse || !c.HasCreationTime {
		t.Errorf("create entry = %+v", c)
	}
	if get.Method != "GetVolumeGroupSnapshot" || get.GroupSnapshotID != gid || get.Name != "grp-log" || !slices.Equal(get.SecretKeys, []string{"token"}) || get.Code != "OK" {
		t.Errorf("get entry = %+v", get)
	}
	if del.Method != "DeleteVolumeGroupSnapshot" || del.GroupSnapshotID != gid || del.Name != "grp-log" || !slices.Equal(del.SnapshotIDs, memberIDs(g)) || del.Code != "OK" {
		t.Errorf("delete entry = %+v (the name must be the one known before the delete)", del)
	}
	raw, _ := json.Marshal(log)
	for _, secret := range []string{"alice", "hunter2", "s3cret", "bob"} {
		if strings.Contains(string(raw), secret) {
			t.Errorf("secret value %q in the call log", secret)
		}
	}
	httpJSON(t, http.MethodGet, srv.URL+"/groups", "", &groups)
	if len(groups.Groups) != 0 {
		t.Errorf("GET /groups after the delete = %+v", groups)
	}
}

func TestGroupCapabilitiesCanBeHidden(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	caps := func() []*csi.GroupControllerServiceCapability {
		t.Helper()
		resp, err := h.call(ctx, &csi.GroupControllerGetCapabilitiesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*csi.GroupControllerGetCapabilitiesResponse).GetCapabilities()
	}
	if got := caps(); len(got) != 1 || got[0].GetRpc().GetType() != csi.GroupControllerServiceCapability_RPC_CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT {
		t.Errorf("capabilities = %v", got)
	}
	hidden, err := parseCapabilities("list_snapshots, CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT")
	if err != nil || !hidden.ctrl[csi.ControllerServiceCapability_RPC_LIST_SNAPSHOTS] {
		t.Fatalf("parseCapabilities = %+v, %v", hidden, err)
	}
	h.in.hidden = hidden
	if got := caps(); len(got) != 0 {
		t.Errorf("hidden capabilities still offered: %v", got)
	}
	if _, err := parseCapabilities("CREATE_DELETE_GROUP"); err == nil {
		t.Error("an unknown capability must be refused")
	}
}
