package main

// --data-dir: the driver keeps every volume's and snapshot's files on disk,
// so that a pod on a real kubelet can write to a claim and another pod can
// read the same bytes back from a claim restored from a snapshot of it.
//
// The mock service stays the source of truth for which volumes and
// snapshots exist, and answers every call first. The hooks here run in
// injector.callMock, under the serialization slot, right after the mock
// answered OK (NodeUnpublishVolume: right before, see beforeMockCall), and
// turn the answer into an error when the data could not follow. Layout:
//
//	DIR/volumes/<volume id>/      what pods see at their target path (a bind mount)
//	DIR/snapshots/<snapshot id>/  a copy of the volume, cut by the first CreateSnapshot answer
//	DIR/tmp/                      copies in progress, renamed into place once complete

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
)

// kind is a subdirectory of the data dir and what its entries are.
type kind struct{ dir, noun string }

var (
	volumeKind   = kind{dir: "volumes", noun: "volume"}
	snapshotKind = kind{dir: "snapshots", noun: "snapshot"}
)

const tmpSubdir = "tmp"

// freshVolumeMode is the mode of a new empty volume: like an emptyDir, any
// uid in a pod can write to it (there is no fsGroup handling here).
const freshVolumeMode = 0o777

// dataStore is the on-disk side of --data-dir.
type dataStore struct {
	dir string
	// ctrl is the mock's controller service, to delete a volume or snapshot
	// again whose data could not be created.
	ctrl csi.ControllerServer
}

// newDataStore prepares dir. It starts empty: the mock numbers volumes and
// snapshots from 4 again after every restart, so directories left by an
// earlier run would be handed to new volumes and snapshots with those ids.
func newDataStore(dir string, ctrl csi.ControllerServer) (*dataStore, error) {
	for _, sub := range []string{volumeKind.dir, snapshotKind.dir, tmpSubdir} {
		p := filepath.Join(dir, sub)
		if err := os.RemoveAll(p); err != nil {
			return nil, fmt.Errorf("clearing %s left by an earlier run: %w", p, err)
		}
		if err := os.MkdirAll(p, 0o755); err != nil {
			return nil, fmt.Errorf("creating %s: %w", p, err)
		}
	}
	return &dataStore{dir: dir, ctrl: ctrl}, nil
}

// beforeMockCall runs before the mock handler. NodeUnpublishVolume must
// unmount first: the mock RemoveAll()s the target path, which through a
// live bind mount would delete the volume's files.
func (in *injector) beforeMockCall(req any) error {
	if in.data == nil {
		return nil
	}
	switch r := req.(type) {
	case *csi.NodePublishVolumeRequest:
		if r.GetVolumeCapability().GetBlock() != nil {
			return status.Errorf(codes.InvalidArgument, "volume %q: block volumes are not supported with --data-dir, only mounts", r.GetVolumeId())
		}
	case *csi.NodeUnpublishVolumeRequest:
		if r.GetTargetPath() != "" {
			return unpublish(r.GetTargetPath())
		}
	}
	return nil
}

// afterMockCall makes the data follow a call the mock answered OK; resp is
// a private copy of the answer. Group snapshots copy their members
// themselves (groupServer), with the group's own rollback.
func (in *injector) afterMockCall(ctx context.Context, req, resp any) error {
	d := in.data
	if d == nil {
		return nil
	}
	switch r := req.(type) {
	case *csi.CreateVolumeRequest:
		v, _ := resp.(*csi.CreateVolumeResponse)
		return d.createVolume(ctx, r.GetVolumeContentSource(), v.GetVolume().GetVolumeId())
	case *csi.DeleteVolumeRequest:
		return d.remove(volumeKind, r.GetVolumeId())
	case *csi.CreateSnapshotRequest:
		s, _ := resp.(*csi.CreateSnapshotResponse)
		return d.createSnapshot(ctx, s.GetSnapshot().GetSnapshotId(), r.GetSourceVolumeId())
	case *csi.DeleteSnapshotRequest:
		return d.remove(snapshotKind, r.GetSnapshotId())
	case *csi.NodeStageVolumeRequest:
		return stage(r.GetStagingTargetPath())
	case *csi.NodePublishVolumeRequest:
		return d.publish(r.GetVolumeId(), r.GetTargetPath(), r.GetReadonly())
	}
	return nil
}

// path returns DIR/<k.dir>/<id>. Ids come from requests: one that is not a
// single path element could name a directory outside DIR.
func (d *dataStore) path(k kind, id string) (string, error) {
	if id == "" || id == "." || id == ".." || strings.ContainsAny(id, "/\\\x00") {
		return "", status.Errorf(codes.InvalidArgument, "%s id %q cannot name a directory in %s", k.noun, id, filepath.Join(d.dir, k.dir))
	}
	return filepath.Join(d.dir, k.dir, id), nil
}

// existing returns the directory of an existing volume or snapshot; a
// missing one is NotFound.
func (d *dataStore) existing(k kind, id string) (string, error) {
	p, err := d.path(k, id)
	if err != nil {
		return "", err
	}
	ok, err := dirExists(p)
	if err != nil {
		return "", status.Errorf(codes.Internal, "looking for the data of %s %q: %v", k.noun, id, err)
	}
	if !ok {
		return "", status.Errorf(codes.NotFound, "%s %q has no data: %s does not exist", k.noun, id, p)
	}
	return p, nil
}

// createVolume gives the volume the mock just answered its directory:
// empty, or a copy of the snapshot or volume it is created from. When that
// fails, the volume is deleted from the mock again, so that a failed
// restore leaks nothing (the provisioner retries with a new CreateVolume).
func (d *dataStore) createVolume(ctx context.Context, src *csi.VolumeContentSource, volumeID string) error {
	dst, err := d.path(volumeKind, volumeID)
	if err != nil {
		return err
	}
	ok, err := dirExists(dst)
	if err != nil {
		return status.Errorf(codes.Internal, "looking for the data of volume %q: %v", volumeID, err)
	}
	if ok {
		return nil // an idempotent retry: the first answer populated it
	}
	if err := d.populateVolume(src, dst); err != nil {
		_, derr := d.ctrl.DeleteVolume(context.WithoutCancel(ctx), &csi.DeleteVolumeRequest{VolumeId: volumeID})
		return withRollback(err, "volume", volumeID, derr)
	}
	return nil
}

func (d *dataStore) populateVolume(src *csi.VolumeContentSource, dst string) error {
	var from string
	var err error
	switch {
	case src.GetSnapshot() != nil:
		from, err = d.existing(snapshotKind, src.GetSnapshot().GetSnapshotId())
	case src.GetVolume() != nil:
		from, err = d.existing(volumeKind, src.GetVolume().GetVolumeId())
	default:
		return d.materialize(dst, func(tmp string) error { return os.Chmod(tmp, freshVolumeMode) })
	}
	if err != nil {
		return err
	}
	return d.materialize(dst, func(tmp string) error { return copyTree(from, tmp) })
}

// createSnapshot cuts the snapshot the mock just answered and deletes it
// from the mock again when that fails: a snapshot without data would
// restore empty volumes.
func (d *dataStore) createSnapshot(ctx context.Context, snapshotID, volumeID string) error {
	if err := d.cutSnapshot(snapshotID, volumeID); err != nil {
		_, derr := d.ctrl.DeleteSnapshot(context.WithoutCancel(ctx), &csi.DeleteSnapshotRequest{SnapshotId: snapshotID})
		return withRollback(err, "snapshot", snapshotID, derr)
	}
	return nil
}

// cutSnapshot copies the volume's directory to the snapshot's, once: the
// first CreateSnapshot answer about a snapshot creates it, later ones
// (retries, polls of a snapshot a fault keeps "not ready") find it and must
// not copy again, since the volume has changed since the snapshot was cut.
func (d *dataStore) cutSnapshot(snapshotID, volumeID string) error {
	dst, err := d.path(snapshotKind, snapshotID)
	if err != nil {
		return err
	}
	ok, err := dirExists(dst)
	if err != nil {
		return status.Errorf(codes.Internal, "looking for the data of snapshot %q: %v", snapshotID, err)
	}
	if ok {
		return nil
	}
	from, err := d.existing(volumeKind, volumeID)
	if err != nil {
		return err
	}
	return d.materialize(dst, func(tmp string) error { return copyTree(from, tmp) })
}

// withRollback adds to err that the volume or snapshot was deleted from the
// mock again, or that deleting it failed too (derr).
func withRollback(err error, noun, id string, derr error) error {
	if derr != nil {
		klog.ErrorS(derr, "Deleting again what the mock created and the data dir could not follow", "kind", noun, "id", id)
		return status.Errorf(status.Code(err), "%s; deleting %s %q again failed too: %v", status.Convert(err).Message(), noun, id, derr)
	}
	return status.Errorf(status.Code(err), "%s; %s %q deleted again", status.Convert(err).Message(), noun, id)
}

// materialize builds a directory at a temporary place with fill and then
// renames it to dst, so that dst is either absent or complete, never half
// copied.
func (d *dataStore) materialize(dst string, fill func(tmp string) error) error {
	tmp, err := os.MkdirTemp(filepath.Join(d.dir, tmpSubdir), filepath.Base(filepath.Dir(dst))+"-"+filepath.Base(dst)+"-")
	if err != nil {
		return status.Errorf(codes.Internal, "creating a temporary directory for %s: %v", dst, err)
	}
	if err := fill(tmp); err != nil {
		return status.Errorf(codes.Internal, "creating %s: %v%s", dst, err, cleanUp(tmp))
	}
	if err := os.Rename(tmp, dst); err != nil {
		return status.Errorf(codes.Internal, "moving the copy into place: %v%s", err, cleanUp(tmp))
	}
	return nil
}

// cleanUp removes a temporary directory and says so in an error message if
// that failed.
func cleanUp(tmp string) string {
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Sprintf(" (and removing the temporary copy failed: %v)", err)
	}
	return ""
}

// remove deletes a volume's or snapshot's directory after the mock deleted
// it; a missing directory is fine (deletes are retried).
func (d *dataStore) remove(k kind, id string) error {
	p, err := d.path(k, id)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(p); err != nil {
		return status.Errorf(codes.Internal, "removing the data of %s %q: %v", k.noun, id, err)
	}
	return nil
}

// stage makes the staging path exist. Kubelet stages because the mock
// advertises STAGE_UNSTAGE_VOLUME; nothing is mounted there: publish
// bind-mounts straight from the data dir.
func stage(path string) error {
	if err := os.MkdirAll(path, 0o750); err != nil {
		return status.Errorf(codes.Internal, "creating the staging path: %v", err)
	}
	return nil
}

// publish bind-mounts the volume's directory onto target. A target that
// already is a mount of that directory is success (kubelet retries).
func (d *dataStore) publish(volumeID, target string, readonly bool) error {
	src, err := d.existing(volumeKind, volumeID)
	if status.Code(err) == codes.NotFound {
		// The mock knows the volume (it answered OK), the data dir does not.
		return status.Errorf(codes.FailedPrecondition, "%s", status.Convert(err).Message())
	}
	if err != nil {
		return err
	}
	if err := os.MkdirAll(target, 0o750); err != nil {
		return status.Errorf(codes.Internal, "creating the target path: %v", err)
	}
	mounted, err := isMountPoint(target)
	if err != nil {
		return status.Errorf(codes.Internal, "checking whether target %s is mounted: %v", target, err)
	}
	if mounted {
		same, err := sameDir(src, target)
		if err != nil {
			return status.Errorf(codes.Internal, "comparing the mounted target with the data of volume %q: %v", volumeID, err)
		}
		if !same {
			return status.Errorf(codes.AlreadyExists, "target %s is a mount point of something else than volume %q (%s)", target, volumeID, src)
		}
		return nil
	}
	if err := bindMount(src, target, readonly); err != nil {
		return status.Errorf(codes.Internal, "publishing volume %q: %v", volumeID, err)
	}
	return nil
}

// maxUnmounts bounds the unmounts of one target: a target published twice
// by mistake carries two stacked mounts.
const maxUnmounts = 8

// unpublish unmounts target and removes it. It refuses to go on while
// target is still mounted, or when it is not empty once unmounted: the
// mock then removes the target recursively.
func unpublish(target string) error {
	for i := 0; ; i++ {
		mounted, err := isMountPoint(target)
		if err != nil {
			return status.Errorf(codes.Internal, "checking whether target %s is mounted: %v", target, err)
		}
		if !mounted {
			break
		}
		if i == maxUnmounts {
			return status.Errorf(codes.Internal, "target %s is still mounted after %d unmounts", target, i)
		}
		if err := unmount(target); err != nil {
			return status.Errorf(codes.Internal, "unpublishing: %v", err)
		}
	}
	if err := os.Remove(target); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return status.Errorf(codes.Internal, "removing the unmounted target: %v", err)
	}
	return nil
}

// sameDir reports whether a and b are the same directory: a bind mount's
// root has the device and inode of its source.
func sameDir(a, b string) (bool, error) {
	ai, err := os.Stat(a)
	if err != nil {
		return false, err
	}
	bi, err := os.Stat(b)
	if err != nil {
		return false, err
	}
	return os.SameFile(ai, bi), nil
}

func dirExists(path string) (bool, error) {
	_, err := os.Lstat(path)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	default:
		return false, err
	}
}

// copyTree copies the contents of directory src into the existing
// directory dst, then gives dst the mode (and, as root, the owner) of src:
// regular files, directories and symbolic links, with their modes and
// owners, so that a pod reading a restored volume finds the files as the
// writing pod left them.
func copyTree(src, dst string) error {
	fi, err := os.Lstat(src)
	if err != nil {
		return err
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := copyEntry(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
			return err
		}
	}
	return copyAttrs(dst, fi)
}

func copyEntry(src, dst string) error {
	fi, err := os.Lstat(src)
	if err != nil {
		return err
	}
	switch {
	case fi.IsDir():
		if err := os.Mkdir(dst, 0o700); err != nil {
			return err
		}
		return copyTree(src, dst)
	case fi.Mode().IsRegular():
		return copyFile(src, dst, fi)
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(src)
		if err != nil {
			return err
		}
		if err := os.Symlink(target, dst); err != nil {
			return err
		}
		return copyAttrs(dst, fi)
	default:
		return fmt.Errorf("copying %s: unsupported file type %s", src, fi.Mode().Type())
	}
}

func copyFile(src, dst string, fi fs.FileInfo) error {
	from, err := os.Open(src)
	if err != nil {
		return err
	}
	defer from.Close()
	to, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(to, from); err != nil {
		to.Close()
		return fmt.Errorf("copying %s to %s: %w", src, dst, err)
	}
	if err := to.Close(); err != nil {
		return err
	}
	return copyAttrs(dst, fi)
}

// copyAttrs gives dst the owner (as root: others cannot chown) and the
// permission bits of fi. The owner goes first: chown clears setuid and
// setgid. Directories get theirs after their contents, which a read-only
// mode would refuse.
func copyAttrs(dst string, fi fs.FileInfo) error {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && os.Geteuid() == 0 {
		if err := os.Lchown(dst, int(st.Uid), int(st.Gid)); err != nil {
			return err
		}
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil // a symbolic link has no mode of its own
	}
	return os.Chmod(dst, fi.Mode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky))
}

// DataEntry is one volume or snapshot directory in GET /data.
type DataEntry struct {
	ID string `json:"id"`
	// SizeBytes adds up the sizes of its regular files.
	SizeBytes int64 `json:"sizeBytes"`
	Files     int   `json:"files"`
}

// DataResponse is the body of GET /data: what --data-dir holds.
type DataResponse struct {
	Dir       string      `json:"dir"`
	Volumes   []DataEntry `json:"volumes"`
	Snapshots []DataEntry `json:"snapshots"`
}

// serveData answers GET /data. It reads under the serialization slot: a
// delete in progress would make the walk fail half way.
func (in *injector) serveData(w http.ResponseWriter, r *http.Request) {
	if in.data == nil {
		writeError(w, http.StatusNotFound, errors.New("the driver keeps no data: --data-dir is not set"))
		return
	}
	if err := in.lockMock(r.Context()); err != nil {
		writeError(w, http.StatusServiceUnavailable, err)
		return
	}
	resp, err := in.data.list()
	in.unlockMock()
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

func (d *dataStore) list() (DataResponse, error) {
	vols, err := d.listKind(volumeKind)
	if err != nil {
		return DataResponse{}, err
	}
	snaps, err := d.listKind(snapshotKind)
	if err != nil {
		return DataResponse{}, err
	}
	return DataResponse{Dir: d.dir, Volumes: vols, Snapshots: snaps}, nil
}

func (d *dataStore) listKind(k kind) ([]DataEntry, error) {
	dir := filepath.Join(d.dir, k.dir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("listing the %ss: %w", k.noun, err)
	}
	out := make([]DataEntry, 0, len(entries))
	for _, e := range entries {
		size, files, err := treeSize(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("measuring %s %q: %w", k.noun, e.Name(), err)
		}
		out = append(out, DataEntry{ID: e.Name(), SizeBytes: size, Files: files})
	}
	sort.Slice(out, func(i, j int) bool { return idLess(out[i].ID, out[j].ID) })
	return out, nil
}

// treeSize adds up the sizes of the regular files under dir.
func treeSize(dir string) (size int64, files int, err error) {
	err = filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return err
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		size += fi.Size()
		files++
		return nil
	})
	return size, files, err
}
