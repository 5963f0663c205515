package csi_test

// Group snapshot calls against the real mock driver (see client_test.go).

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"

	"github.com/snapkeeper/snapkeeper/pkg/csi"
	"github.com/snapkeeper/snapkeeper/pkg/csi/csitest"
)

func createGroup(t *testing.T, c *csi.Client, name string, vols ...string) *csi.GroupSnapshot {
	t.Helper()
	g, err := c.CreateGroupSnapshot(context.Background(), csi.CreateGroupRequest{Name: name, SourceVolumeIDs: vols})
	if err != nil {
		t.Fatalf("CreateGroupSnapshot(%q): %v", name, err)
	}
	return g
}

func memberIDs(g *csi.GroupSnapshot) []string {
	var out []string
	for _, s := range g.Snapshots {
		out = append(out, s.ID)
	}
	return out
}

func TestCreateGroupSnapshotIsIdempotentByName(t *testing.T) {
	t.Parallel()
	m, c := startClient(t, csitest.Options{}, csi.Options{})
	if !c.Capabilities().GroupSnapshots {
		t.Fatal("the mock should offer group snapshots")
	}
	ctx := context.Background()
	req := csi.CreateGroupRequest{Name: "group-a", SourceVolumeIDs: []string{"vol-1", "vol-2"},
		Parameters: map[string]string{"tier": "gold"}, Secrets: map[string]string{"password": "hunter2"}}

	first, err := c.CreateGroupSnapshot(ctx, req)
	if err != nil {
		t.Fatalf("first CreateGroupSnapshot: %v", err)
	}
	if first.ID == "" || !first.ReadyToUse || first.CreationTime.IsZero() || len(first.Snapshots) != 2 {
		t.Fatalf("first group = %+v", first)
	}
	for i, s := range first.Snapshots {
		if s.ID == "" || s.SourceVolumeID != req.SourceVolumeIDs[i] || s.GroupSnapshotID != first.ID || !s.ReadyToUse || s.CreationTime.IsZero() {
			t.Errorf("member %d = %+v", i, s)
		}
	}
	again, err := c.CreateGroupSnapshot(ctx, req)
	if err != nil || again.ID != first.ID || !slices.Equal(memberIDs(again), memberIDs(first)) {
		t.Errorf("second CreateGroupSnapshot = %+v, %v; want the same group %+v", again, err, first)
	}

	other := req
	other.SourceVolumeIDs = []string{"vol-1", "vol-3"}
	if _, err := c.CreateGroupSnapshot(ctx, other); !csi.IsFinal(err) || csi.Code(err) != codes.AlreadyExists {
		t.Errorf("same name from other volumes: %v, want a final AlreadyExists", err)
	}
	for _, bad := range []csi.CreateGroupRequest{{SourceVolumeIDs: []string{"vol-1"}}, {Name: "g"}, {Name: "g", SourceVolumeIDs: []string{""}}} {
		if _, err := c.CreateGroupSnapshot(ctx, bad); csi.Code(err) != codes.InvalidArgument || !csi.IsFinal(err) {
			t.Errorf("CreateGroupSnapshot(%+v): %v, want a final InvalidArgument", bad, err)
		}
	}

	// The members are ordinary snapshots of the backend, marked with the group.
	backend := m.Created(t)
	if len(backend) != 2 || backend[0].GroupSnapshotID != first.ID || backend[1].GroupSnapshotID != first.ID {
		t.Errorf("backend snapshots = %+v, want the two members of %s", backend, first.ID)
	}
	all, err := c.ListAll(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range all {
		if slices.Contains(memberIDs(first), s.ID) && s.GroupSnapshotID != first.ID {
			t.Errorf("ListSnapshots shows member %s without its group: %+v", s.ID, s)
		}
	}
	groups := m.Groups(t)
	if len(groups) != 1 || groups[0].ID != first.ID || groups[0].Name != "group-a" || !slices.Equal(groups[0].SnapshotIDs, memberIDs(first)) || !groups[0].ReadyToUse {
		t.Errorf("backend groups = %+v", groups)
	}
	// Only the secret keys reach the call log.
	for _, e := range m.CallLog(t, 0).Entries {
		if e.Method == "CreateVolumeGroupSnapshot" && e.Code == "OK" {
			if e.Name != "group-a" || e.GroupSnapshotID != first.ID || !slices.Equal(e.SecretKeys, []string{"password"}) || e.Parameters["tier"] != "gold" {
				t.Errorf("call log entry = %+v", e)
			}
		}
	}
}

func TestGetGroupSnapshot(t *testing.T) {
	t.Parallel()
	_, c := startClient(t, csitest.Options{}, csi.Options{})
	ctx := context.Background()
	g := createGroup(t, c, "group-get", "vol-1", "vol-2")

	got, err := c.GetGroupSnapshot(ctx, g.ID, nil, nil)
	if err != nil || got == nil || got.ID != g.ID || !slices.Equal(memberIDs(got), memberIDs(g)) || !got.CreationTime.Equal(g.CreationTime) || !got.ReadyToUse {
		t.Errorf("GetGroupSnapshot = %+v, %v; want %+v", got, err, g)
	}
	if got, err := c.GetGroupSnapshot(ctx, g.ID, memberIDs(g), map[string]string{"token": "x"}); err != nil || got == nil {
		t.Errorf("GetGroupSnapshot with the member ids = %+v, %v", got, err)
	}
	if _, err := c.GetGroupSnapshot(ctx, g.ID, memberIDs(g)[:1], nil); csi.Code(err) != codes.InvalidArgument || !csi.IsFinal(err) {
		t.Errorf("GetGroupSnapshot with part of the members: %v, want a final InvalidArgument", err)
	}
	if got, err := c.GetGroupSnapshot(ctx, "group-999", nil, nil); err != nil || got != nil {
		t.Errorf("GetGroupSnapshot(unknown) = %+v, %v; want nil, nil", got, err)
	}
	if _, err := c.GetGroupSnapshot(ctx, "", nil, nil); csi.Code(err) != codes.InvalidArgument {
		t.Errorf("GetGroupSnapshot without id: %v, want InvalidArgument", err)
	}
}

func TestDeleteGroupSnapshot(t *testing.T) {
	t.Parallel()
	m, c := startClient(t, csitest.Options{}, csi.Options{})
	ctx := context.Background()
	keep := create(t, c, "snapshot-keep", "vol-9")
	g := createGroup(t, c, "group-del", "vol-1", "vol-2")

	// A member cannot be deleted on its own.
	err := c.DeleteSnapshot(ctx, g.Snapshots[0].ID, nil)
	if csi.Code(err) != codes.FailedPrecondition || !csi.IsFinal(err) || !strings.Contains(err.Error(), g.ID) {
		t.Errorf("DeleteSnapshot of a member: %v, want a final FailedPrecondition naming %s", err, g.ID)
	}
	// Nor the group with the wrong member ids.
	if err := c.DeleteGroupSnapshot(ctx, g.ID, memberIDs(g)[1:], nil); csi.Code(err) != codes.FailedPrecondition {
		t.Errorf("DeleteGroupSnapshot with part of the members: %v, want FailedPrecondition", err)
	}

	if err := c.DeleteGroupSnapshot(ctx, g.ID, memberIDs(g), map[string]string{"password": "x"}); err != nil {
		t.Fatalf("DeleteGroupSnapshot: %v", err)
	}
	if got := createdNames(t, m); len(got) != 1 || got[0] != "snapshot-keep" {
		t.Errorf("backend snapshots = %v, want [snapshot-keep]", got)
	}
	if groups := m.Groups(t); len(groups) != 0 {
		t.Errorf("backend groups = %+v, want none", groups)
	}
	for _, id := range memberIDs(g) {
		if s, err := c.GetSnapshot(ctx, id, nil); err != nil || s != nil {
			t.Errorf("member %s after the delete: %+v, %v", id, s, err)
		}
	}
	if got, err := c.GetGroupSnapshot(ctx, g.ID, nil, nil); err != nil || got != nil {
		t.Errorf("GetGroupSnapshot after the delete = %+v, %v; want nil, nil", got, err)
	}
	if err := c.DeleteGroupSnapshot(ctx, g.ID, nil, nil); err != nil {
		t.Errorf("second DeleteGroupSnapshot: %v", err)
	}
	if err := c.DeleteGroupSnapshot(ctx, "never-existed", nil, nil); err != nil {
		t.Errorf("DeleteGroupSnapshot of an unknown id: %v", err)
	}
	if err := c.DeleteGroupSnapshot(ctx, "", nil, nil); csi.Code(err) != codes.InvalidArgument {
		t.Errorf("DeleteGroupSnapshot without id: %v, want InvalidArgument", err)
	}
	if err := c.DeleteSnapshot(ctx, keep.ID, nil); err != nil {
		t.Errorf("DeleteSnapshot of a lone snapshot: %v", err)
	}

	m.SetFaults(t, csitest.Faults{Rules: []csitest.Rule{{Method: "DeleteVolumeGroupSnapshot", Code: "NotFound"}}})
	g2 := createGroup(t, c, "group-nf", "vol-1")
	if err := c.DeleteGroupSnapshot(ctx, g2.ID, nil, nil); err != nil {
		t.Errorf("DeleteGroupSnapshot answered NotFound: %v, want success", err)
	}

	var refused bool
	for _, e := range m.CallLog(t, 0).Entries {
		if e.Method == "DeleteSnapshot" && e.Code == "FailedPrecondition" && e.GroupSnapshotID == g.ID {
			refused = true
		}
	}
	if !refused {
		t.Error("the call log does not show the refused DeleteSnapshot of a member")
	}
}

func TestGroupSnapshotFaultsAreClassified(t *testing.T) {
	t.Parallel()
	m, c := startClient(t, csitest.Options{}, csi.Options{})
	ctx := context.Background()
	m.SetFaults(t, csitest.Faults{Rules: []csitest.Rule{
		{Method: "CreateVolumeGroupSnapshot", Match: "busy-*", Code: "Unavailable", Message: "backend busy", Times: 1},
		{Method: "CreateVolumeGroupSnapshot", Match: "denied-*", Code: "PermissionDenied"},
		{Method: "/csi.v1.GroupController/CreateVolumeGroupSnapshot", Match: "late-*", Code: "DeadlineExceeded", AfterCall: true, Times: 1},
		{Method: "GetVolumeGroupSnapshot", Code: "Internal", Times: 1},
	}})

	_, err := c.CreateGroupSnapshot(ctx, csi.CreateGroupRequest{Name: "busy-1", SourceVolumeIDs: []string{"vol-1"}})
	if !csi.MayBeInProgress(err) || csi.Code(err) != codes.Unavailable || csi.DriverMessage(err) != "Unavailable: backend busy" {
		t.Errorf("busy: %v, want a may-be-in-progress Unavailable", err)
	}
	if !strings.Contains(err.Error(), csitest.DriverName) || !strings.Contains(err.Error(), "busy-1") {
		t.Errorf("error %q should name the driver and the group", err)
	}
	createGroup(t, c, "busy-1", "vol-1")
	if _, err := c.CreateGroupSnapshot(ctx, csi.CreateGroupRequest{Name: "denied-1", SourceVolumeIDs: []string{"vol-1"}}); !csi.IsFinal(err) || csi.Code(err) != codes.PermissionDenied {
		t.Errorf("denied: %v, want a final PermissionDenied", err)
	}
	// A create that fails after the backend cut the group: the retry finds it.
	if _, err := c.CreateGroupSnapshot(ctx, csi.CreateGroupRequest{Name: "late-1", SourceVolumeIDs: []string{"vol-1", "vol-2"}}); !csi.MayBeInProgress(err) {
		t.Errorf("late: %v, want may-be-in-progress", err)
	}
	var backendID string
	for _, g := range m.Groups(t) {
		if g.Name == "late-1" {
			backendID = g.ID
		}
	}
	late := createGroup(t, c, "late-1", "vol-1", "vol-2")
	if backendID == "" || late.ID != backendID {
		t.Errorf("retry returned %q, backend holds %q", late.ID, backendID)
	}
	if _, err := c.GetGroupSnapshot(ctx, late.ID, nil, nil); !csi.IsFinal(err) || csi.Code(err) != codes.Internal {
		t.Errorf("get: %v, want a final Internal", err)
	}
	if got := m.Calls(t).Count("/csi.v1.GroupController/CreateVolumeGroupSnapshot", ""); got != 5 {
		t.Errorf("CreateVolumeGroupSnapshot calls = %d, want 5", got)
	}
}

func TestGroupSnapshotNotReadyForTheFirstPolls(t *testing.T) {
	t.Parallel()
	_, c := startClient(t, csitest.Options{Faults: &csitest.Faults{Rules: []csitest.Rule{{Method: "*", NotReady: 2}}}}, csi.Options{})
	ctx := context.Background()
	g := createGroup(t, c, "group-slow", "vol-1", "vol-2") // 1
	if g.ReadyToUse || g.Snapshots[0].ReadyToUse || g.Snapshots[1].ReadyToUse {
		t.Errorf("first answer = %+v, want the group and its members not ready", g)
	}
	got, err := c.GetGroupSnapshot(ctx, g.ID, nil, nil) // 2
	if err != nil || got.ReadyToUse {
		t.Errorf("second answer = %+v, %v; want not ready", got, err)
	}
	again := createGroup(t, c, "group-slow", "vol-1", "vol-2")
	if !again.ReadyToUse || !again.Snapshots[0].ReadyToUse {
		t.Errorf("third answer = %+v, want ready", again)
	}
}

func TestGroupSnapshotSizes(t *testing.T) {
	t.Parallel()
	m, c := startClient(t, csitest.Options{VolumeSizes: csitest.VolumeSizes{"vol-1": 1 << 30}, Args: []string{"--snapshot-size=4096"}}, csi.Options{})
	ctx := context.Background()
	if sizes := m.SetVolumeSize(t, "vol-2", 2<<30); sizes["vol-1"] != 1<<30 || sizes["vol-2"] != 2<<30 {
		t.Fatalf("volume sizes = %v", sizes)
	}
	want := map[string]int64{"vol-1": 1 << 30, "vol-2": 2 << 30, "vol-3": 4096}

	g := createGroup(t, c, "group-sized", "vol-1", "vol-2", "vol-3")
	for _, s := range g.Snapshots {
		if s.SizeBytes != want[s.SourceVolumeID] {
			t.Errorf("CreateGroupSnapshot member of %s: size %d, want %d", s.SourceVolumeID, s.SizeBytes, want[s.SourceVolumeID])
		}
	}
	got, err := c.GetGroupSnapshot(ctx, g.ID, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range got.Snapshots {
		if s.SizeBytes != want[s.SourceVolumeID] {
			t.Errorf("GetGroupSnapshot member of %s: size %d, want %d", s.SourceVolumeID, s.SizeBytes, want[s.SourceVolumeID])
		}
		if one, err := c.GetSnapshot(ctx, s.ID, nil); err != nil || one.SizeBytes != want[s.SourceVolumeID] || one.GroupSnapshotID != g.ID {
			t.Errorf("GetSnapshot(%s) = %+v, %v", s.ID, one, err)
		}
	}
	if s := create(t, c, "single", "vol-2"); s.SizeBytes != 2<<30 {
		t.Errorf("CreateSnapshot of vol-2: size %d, want 2Gi", s.SizeBytes)
	}
	m.SetVolumeSizes(t, nil)
	if s := create(t, c, "single", "vol-2"); s.SizeBytes != 4096 {
		t.Errorf("after clearing the volume sizes: size %d, want the --snapshot-size fallback", s.SizeBytes)
	}
	if sizes := m.VolumeSizes(t); len(sizes) != 0 {
		t.Errorf("volume sizes after clearing = %v", sizes)
	}
}

func TestGroupCallsNeedTheCapability(t *testing.T) {
	t.Parallel()
	for name, opts := range map[string]csitest.Options{
		"no GroupController service": {NoGroupController: true},
		"capability hidden":          {HideCapabilities: []string{"CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT"}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m, c := startClient(t, opts, csi.Options{})
			if c.Capabilities().GroupSnapshots {
				t.Fatal("GroupSnapshots offered")
			}
			ctx := context.Background()
			_, err := c.CreateGroupSnapshot(ctx, csi.CreateGroupRequest{Name: "g", SourceVolumeIDs: []string{"vol-1"}})
			if !csi.IsFinal(err) || csi.Code(err) != codes.Unimplemented {
				t.Errorf("CreateGroupSnapshot: %v, want a final Unimplemented", err)
			}
			if _, err := c.GetGroupSnapshot(ctx, "g", nil, nil); csi.Code(err) != codes.Unimplemented {
				t.Errorf("GetGroupSnapshot: %v, want Unimplemented", err)
			}
			if err := c.DeleteGroupSnapshot(ctx, "g", nil, nil); csi.Code(err) != codes.Unimplemented {
				t.Errorf("DeleteGroupSnapshot: %v, want Unimplemented", err)
			}
			if got := m.Calls(t).Count("CreateVolumeGroupSnapshot", ""); got != 0 {
				t.Errorf("the client called CreateVolumeGroupSnapshot %d times without the capability", got)
			}
		})
	}
	m := csitest.StartMock(t, csitest.Options{NoGroupController: true})
	connect(t, m, csi.Options{})
	if got := m.Calls(t).Count("GroupControllerGetCapabilities", "Unimplemented"); got != 1 {
		t.Errorf("GroupControllerGetCapabilities Unimplemented calls = %d, want 1", got)
	}
}

func TestGroupCallsMetric(t *testing.T) {
	t.Parallel()
	m := csitest.StartMock(t, csitest.Options{})
	reg := prometheus.NewRegistry()
	c := connect(t, m, csi.Options{Registerer: reg})
	ctx := context.Background()
	g := createGroup(t, c, "group-m", "vol-1")
	if _, err := c.GetGroupSnapshot(ctx, g.ID, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteGroupSnapshot(ctx, g.ID, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetGroupSnapshot(ctx, g.ID, nil, nil); err != nil {
		t.Fatal(err)
	}

	expectOperationSamples(t, reg, map[string]uint64{
		csitest.DriverName + " /csi.v1.GroupController/CreateVolumeGroupSnapshot OK":    1,
		csitest.DriverName + " /csi.v1.GroupController/GetVolumeGroupSnapshot OK":       1,
		csitest.DriverName + " /csi.v1.GroupController/GetVolumeGroupSnapshot NotFound": 1,
		csitest.DriverName + " /csi.v1.GroupController/DeleteVolumeGroupSnapshot OK":    1,
	})
}
