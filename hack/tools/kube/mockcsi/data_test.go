package main

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// newDataHarness is newHarness with --data-dir set to a temporary
// directory, which it returns.
func newDataHarness(t *testing.T, rules ...Rule) (*harness, string) {
	t.Helper()
	h := newHarness(t, rules...)
	dir := t.TempDir()
	d, err := newDataStore(dir, h.svc)
	if err != nil {
		t.Fatal(err)
	}
	h.in.data = d
	return h, dir
}

func mountCapability() *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
}

func fromSnapshot(id string) *csi.VolumeContentSource {
	return &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: id}}}
}

func fromVolume(id string) *csi.VolumeContentSource {
	return &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: id}}}
}

func (h *harness) createVolume(ctx context.Context, name string, src *csi.VolumeContentSource) (string, error) {
	resp, err := unary(ctx, h.in, csi.Controller_CreateVolume_FullMethodName, h.svc.CreateVolume,
		&csi.CreateVolumeRequest{Name: name, VolumeCapabilities: []*csi.VolumeCapability{mountCapability()}, VolumeContentSource: src})
	return resp.GetVolume().GetVolumeId(), err
}

// mustCreateVolume is createVolume for a test that cannot go on without
// the volume.
func (h *harness) mustCreateVolume(ctx context.Context, t *testing.T, name string, src *csi.VolumeContentSource) string {
	t.Helper()
	id, err := h.createVolume(ctx, name, src)
	if err != nil {
		t.Fatalf("create volume %s: %v", name, err)
	}
	return id
}

func (h *harness) deleteVolume(ctx context.Context, id string) error {
	_, err := unary(ctx, h.in, csi.Controller_DeleteVolume_FullMethodName, h.svc.DeleteVolume, &csi.DeleteVolumeRequest{VolumeId: id})
	return err
}

// snapshotVolume is CreateSnapshot name of volume volumeID.
func (h *harness) snapshotVolume(ctx context.Context, name, volumeID string) (*csi.Snapshot, error) {
	resp, err := unary(ctx, h.in, csi.Controller_CreateSnapshot_FullMethodName, h.svc.CreateSnapshot,
		&csi.CreateSnapshotRequest{Name: name, SourceVolumeId: volumeID})
	return resp.GetSnapshot(), err
}

// mockVolumes returns the names of the volumes the mock knows.
func (h *harness) mockVolumes(t *testing.T) []string {
	t.Helper()
	resp, err := h.svc.ListVolumes(context.Background(), &csi.ListVolumesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range resp.GetEntries() {
		out = append(out, e.GetVolume().GetVolumeContext()["name"])
	}
	return out
}

// writeFiles writes a small tree with several modes and a symbolic link
// under root; a.txt holds content.
func writeFiles(t *testing.T, root, content string) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(root, "a.txt"), []byte(content), 0o600))
	must(os.Chmod(filepath.Join(root, "a.txt"), 0o640))
	must(os.MkdirAll(filepath.Join(root, "sub"), 0o700))
	must(os.WriteFile(filepath.Join(root, "sub", "run.sh"), []byte("#!/bin/sh\necho hi\n"), 0o600))
	must(os.Chmod(filepath.Join(root, "sub", "run.sh"), 0o755))
	must(os.Chmod(filepath.Join(root, "sub"), 0o750))
	_ = os.Remove(filepath.Join(root, "link"))
	must(os.Symlink("a.txt", filepath.Join(root, "link")))
}

// readTree describes every entry under root: its mode and its content or
// link target.
func readTree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := e.Info()
		if err != nil {
			return err
		}
		desc := fi.Mode().String()
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			desc += " -> " + target
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += " " + string(data)
		}
		out[rel] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func assertTree(t *testing.T, what, root string, want map[string]string) {
	t.Helper()
	if got := readTree(t, root); !maps.Equal(got, want) {
		t.Errorf("%s (%s) =\n%v\nwant\n%v", what, root, got, want)
	}
}

func assertGone(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("%s still exists (%v)", path, err)
	}
}

func TestSnapshotCopiesTheVolumeAndARestoreCopiesItBack(t *testing.T) {
	h, dir := newDataHarness(t)
	ctx := context.Background()
	vol := h.mustCreateVolume(ctx, t, "pvc-1", nil)
	volDir := filepath.Join(dir, "volumes", vol)
	if fi, err := os.Stat(volDir); err != nil || fi.Mode().Perm() != freshVolumeMode {
		t.Fatalf("new volume directory: %v, %v; want mode %o", fi, err, freshVolumeMode)
	}
	writeFiles(t, volDir, "written before the snapshot")
	atSnapshot := readTree(t, volDir)

	snap, err := h.snapshotVolume(ctx, "snap-1", vol)
	if err != nil {
		t.Fatal(err)
	}
	snapDir := filepath.Join(dir, "snapshots", snap.GetSnapshotId())
	assertTree(t, "snapshot", snapDir, atSnapshot)

	writeFiles(t, volDir, "written after the snapshot")
	assertTree(t, "snapshot after the volume changed", snapDir, atSnapshot)

	restored := h.mustCreateVolume(ctx, t, "pvc-2", fromSnapshot(snap.GetSnapshotId()))
	restoredDir := filepath.Join(dir, "volumes", restored)
	assertTree(t, "restored volume", restoredDir, atSnapshot)

	clone := h.mustCreateVolume(ctx, t, "pvc-3", fromVolume(vol))
	assertTree(t, "clone", filepath.Join(dir, "volumes", clone), readTree(t, volDir))

	// A repeated CreateVolume answers the same volume and keeps what pods
	// wrote to it since.
	if err := os.WriteFile(filepath.Join(restoredDir, "new.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if again := h.mustCreateVolume(ctx, t, "pvc-2", fromSnapshot(snap.GetSnapshotId())); again != restored {
		t.Fatalf("repeated create answered volume %s, want %s", again, restored)
	}
	if _, err := os.Stat(filepath.Join(restoredDir, "new.txt")); err != nil {
		t.Errorf("a repeated CreateVolume copied the snapshot again: %v", err)
	}

	if err := h.delete(ctx, snap.GetSnapshotId()); err != nil {
		t.Fatal(err)
	}
	assertGone(t, snapDir)
	for _, id := range []string{vol, restored, clone} {
		if err := h.deleteVolume(ctx, id); err != nil {
			t.Fatal(err)
		}
		assertGone(t, filepath.Join(dir, "volumes", id))
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "tmp")); len(entries) != 0 {
		t.Errorf("temporary copies left behind: %v", entries)
	}
}

// A fault that keeps a snapshot "not ready" makes the snapshotter ask
// again with CreateSnapshot: only the first answer cuts the data.
func TestSnapshotDataIsCutOnceWhileNotReady(t *testing.T) {
	h, dir := newDataHarness(t, Rule{Method: "CreateSnapshot", NotReady: 2})
	ctx := context.Background()
	vol := h.mustCreateVolume(ctx, t, "pvc-1", nil)
	volDir := filepath.Join(dir, "volumes", vol)
	writeFiles(t, volDir, "v1")
	want := readTree(t, volDir)
	for i, ready := range []bool{false, false, true} {
		snap, err := h.snapshotVolume(ctx, "snap-1", vol)
		if err != nil || snap.GetReadyToUse() != ready {
			t.Fatalf("answer %d: %v, %v; want readyToUse %v", i+1, snap, err, ready)
		}
		assertTree(t, fmt.Sprintf("snapshot after answer %d", i+1), filepath.Join(dir, "snapshots", snap.GetSnapshotId()), want)
		writeFiles(t, volDir, fmt.Sprintf("v%d", i+2))
	}
}

// The mock's built-in snapshot "1" has no data, like a snapshot whose
// directory was lost.
func TestRestoreFromASnapshotWithoutDataIsNotFoundAndLeaksNothing(t *testing.T) {
	h, dir := newDataHarness(t)
	ctx := context.Background()
	before := h.mockVolumes(t)
	_, err := h.createVolume(ctx, "pvc-1", fromSnapshot("1"))
	if status.Code(err) != codes.NotFound {
		t.Fatalf("restore from a snapshot without data: %v, want NotFound", err)
	}
	if after := h.mockVolumes(t); len(after) != len(before) {
		t.Errorf("mock volumes %v, want %v: the failed restore leaked a volume", after, before)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "volumes")); len(entries) != 0 {
		t.Errorf("volume directories left behind: %v", entries)
	}
	if _, err := h.createVolume(ctx, "pvc-2", fromVolume("no-such-volume")); status.Code(err) != codes.NotFound {
		t.Errorf("clone of an unknown volume: %v, want NotFound", err)
	}
}

func TestSnapshotOfAVolumeWithoutDataIsNotFoundAndLeaksNothing(t *testing.T) {
	h, dir := newDataHarness(t)
	ctx := context.Background()
	if _, err := h.snapshotVolume(ctx, "snap-1", "vol-without-data"); status.Code(err) != codes.NotFound {
		t.Fatalf("snapshot of a volume without data: %v, want NotFound", err)
	}
	if backend, err := h.in.listBackend(ctx, h.svc); err != nil || len(backend) != 3 {
		t.Errorf("backend = %+v, %v; want the 3 built-ins only", backend, err)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "snapshots")); len(entries) != 0 {
		t.Errorf("snapshot directories left behind: %v", entries)
	}
}

func TestGroupSnapshotCopiesEveryMember(t *testing.T) {
	h, dir := newDataHarness(t)
	ctx := context.Background()
	want := map[string]map[string]string{}
	var vols []string
	for _, name := range []string{"pvc-a", "pvc-b"} {
		vol := h.mustCreateVolume(ctx, t, name, nil)
		writeFiles(t, filepath.Join(dir, "volumes", vol), "data of "+name)
		want[vol] = readTree(t, filepath.Join(dir, "volumes", vol))
		vols = append(vols, vol)
	}
	g := h.mustCreateGroup(ctx, t, "grp-1", vols...)
	for _, s := range g.GetSnapshots() {
		assertTree(t, "member of volume "+s.GetSourceVolumeId(), filepath.Join(dir, "snapshots", s.GetSnapshotId()), want[s.GetSourceVolumeId()])
	}
	if err := h.deleteGroup(ctx, g.GetGroupSnapshotId()); err != nil {
		t.Fatal(err)
	}
	for _, id := range memberIDs(g) {
		assertGone(t, filepath.Join(dir, "snapshots", id))
	}

	// A member without data fails the group and leaves no member behind.
	if _, err := h.createGroup(ctx, "grp-2", vols[0], "vol-without-data"); status.Code(err) != codes.NotFound {
		t.Fatalf("group with a volume without data: %v, want NotFound", err)
	}
	if backend, err := h.in.listBackend(ctx, h.svc); err != nil || len(backend) != 3 {
		t.Errorf("backend = %+v, %v; want the 3 built-ins only", backend, err)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "snapshots")); len(entries) != 0 {
		t.Errorf("snapshot directories left behind: %v", entries)
	}
}

func TestStageCreatesTheStagingPath(t *testing.T) {
	h, _ := newDataHarness(t)
	ctx := context.Background()
	vol := h.mustCreateVolume(ctx, t, "pvc-1", nil)
	staging := filepath.Join(t.TempDir(), "pv-1", "globalmount")
	if _, err := unary(ctx, h.in, csi.Node_NodeStageVolume_FullMethodName, h.svc.NodeStageVolume, &csi.NodeStageVolumeRequest{
		VolumeId: vol, StagingTargetPath: staging, VolumeCapability: mountCapability(),
		PublishContext: map[string]string{"device": "/dev/mock"}, // what the harness's mock's ControllerPublishVolume answers
	}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(staging); err != nil || !fi.IsDir() {
		t.Errorf("staging path after NodeStageVolume: %v, %v; want a directory", fi, err)
	}
}

func TestDataDirStartsEmpty(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"volumes/4/a.txt", "snapshots/4/a.txt", "tmp/volumes-5-123/a.txt"} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte("stale"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := newDataStore(dir, nil); err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"volumes", "snapshots", "tmp"} {
		entries, err := os.ReadDir(filepath.Join(dir, sub))
		if err != nil || len(entries) != 0 {
			t.Errorf("%s: %v, %v; want an empty directory", sub, entries, err)
		}
	}
}

func TestDataPathRefusesIDsOutsideTheDir(t *testing.T) {
	d := &dataStore{dir: "/data"}
	for _, id := range []string{"", ".", "..", "../etc", "a/b", `a\b`, "a\x00b"} {
		if _, err := d.path(volumeKind, id); status.Code(err) != codes.InvalidArgument {
			t.Errorf("path(%q): %v, want InvalidArgument", id, err)
		}
	}
	if p, err := d.path(snapshotKind, "12"); err != nil || p != "/data/snapshots/12" {
		t.Errorf("path(12) = %q, %v", p, err)
	}
}

func TestCopyTreeKeepsOwnersAsRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root can give files to another user")
	}
	src, dst := t.TempDir(), t.TempDir()
	file := filepath.Join(src, "owned")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(file, 1234, 5678); err != nil {
		t.Fatal(err)
	}
	if err := copyTree(src, dst); err != nil {
		t.Fatal(err)
	}
	uid, gid := owner(t, filepath.Join(dst, "owned"))
	if uid != 1234 || gid != 5678 {
		t.Errorf("copy owned by %d:%d, want 1234:5678", uid, gid)
	}
}

func owner(t *testing.T, path string) (uid, gid uint32) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return st.Uid, st.Gid
}

func TestNodeIDReplacesTheMocks(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	get := func() string {
		resp, err := unary(ctx, h.in, csi.Node_NodeGetInfo_FullMethodName, h.svc.NodeGetInfo, &csi.NodeGetInfoRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetNodeId()
	}
	if got := get(); got != "test" {
		t.Errorf("node id without --node-id = %q, want the mock's (the driver name)", got)
	}
	h.in.nodeID = "node-1"
	if got := get(); got != "node-1" {
		t.Errorf("node id = %q, want node-1", got)
	}
}

func TestDataHTTPListsVolumesAndSnapshots(t *testing.T) {
	h, dir := newDataHarness(t)
	ctx := context.Background()
	vol := h.mustCreateVolume(ctx, t, "pvc-1", nil)
	if err := os.WriteFile(filepath.Join(dir, "volumes", vol, "f"), []byte("12345"), 0o644); err != nil {
		t.Fatal(err)
	}
	snap, err := h.snapshotVolume(ctx, "snap-1", vol)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h.in.handler(h.svc))
	defer srv.Close()
	var got DataResponse
	if code := httpJSON(t, http.MethodGet, srv.URL+"/data", "", &got); code != http.StatusOK {
		t.Fatalf("GET /data: %d", code)
	}
	want := DataResponse{Dir: dir,
		Volumes:   []DataEntry{{ID: vol, SizeBytes: 5, Files: 1}},
		Snapshots: []DataEntry{{ID: snap.GetSnapshotId(), SizeBytes: 5, Files: 1}}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("GET /data = %+v, want %+v", got, want)
	}

	plain := httptest.NewServer(newHarness(t).in.handler(h.svc))
	defer plain.Close()
	if code := httpJSON(t, http.MethodGet, plain.URL+"/data", "", nil); code != http.StatusNotFound {
		t.Errorf("GET /data without --data-dir: %d, want 404", code)
	}
}
