package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestParseMountPoints(t *testing.T) {
	mountinfo := `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
36 22 8:1 /data/volumes/4 /var/lib/kubelet/pods/uid/volumes/kubernetes.io~csi/pv\040one/mount rw,relatime shared:1 - ext4 /dev/sda1 rw
37 22 0:5 / /odd\134dir\011tab rw - tmpfs tmpfs rw

`
	want := []string{"/", "/var/lib/kubelet/pods/uid/volumes/kubernetes.io~csi/pv one/mount", "/odd\\dir\ttab"}
	if got := parseMountPoints(mountinfo); !slices.Equal(got, want) {
		t.Errorf("parseMountPoints = %q, want %q", got, want)
	}
	if got := unescapeOctal(`a\04`); got != `a\04` {
		t.Errorf("a truncated escape must stay as is, got %q", got)
	}
}

// requireBindMounts skips the test unless this process may bind-mount
// (root with CAP_SYS_ADMIN).
func requireBindMounts(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("bind mounts need root")
	}
	src, target := t.TempDir(), t.TempDir()
	if err := syscall.Mount(src, target, "", syscall.MS_BIND, ""); err != nil {
		if errors.Is(err, syscall.EPERM) {
			t.Skipf("bind mounts are not allowed here: %v", err)
		}
		t.Fatal(err)
	}
	if err := syscall.Unmount(target, 0); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) nodePublish(ctx context.Context, volumeID, target string, readonly bool) error {
	_, err := unary(ctx, h.in, csi.Node_NodePublishVolume_FullMethodName, h.svc.NodePublishVolume, &csi.NodePublishVolumeRequest{
		VolumeId: volumeID, TargetPath: target, Readonly: readonly, VolumeCapability: mountCapability(),
		// The harness's mock expects a ControllerPublishVolume before (no
		// --disable-attach); this is what it would have answered.
		PublishContext: map[string]string{"device": "/dev/mock"},
	})
	return err
}

func (h *harness) nodeUnpublish(ctx context.Context, volumeID, target string) error {
	_, err := unary(ctx, h.in, csi.Node_NodeUnpublishVolume_FullMethodName, h.svc.NodeUnpublishVolume,
		&csi.NodeUnpublishVolumeRequest{VolumeId: volumeID, TargetPath: target})
	return err
}

// podTarget returns a target path as the kubelet gives it: its parent
// exists, the target does not. Cleanup unmounts whatever a failed test
// left mounted there, before the temporary directory is removed.
func podTarget(t *testing.T, name string) string {
	t.Helper()
	target := filepath.Join(t.TempDir(), name, "mount")
	if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for i := 0; i < maxUnmounts; i++ {
			if syscall.Unmount(target, syscall.MNT_DETACH) != nil {
				return // not mounted (any more)
			}
		}
	})
	return target
}

func TestPublishBindMountsTheVolumeAndUnpublishKeepsItsData(t *testing.T) {
	requireBindMounts(t)
	h, dir := newDataHarness(t)
	ctx := context.Background()
	vol := h.mustCreateVolume(ctx, t, "pvc-1", nil)
	volDir := filepath.Join(dir, "volumes", vol)
	if err := os.WriteFile(filepath.Join(volDir, "a.txt"), []byte("from the volume"), 0o644); err != nil {
		t.Fatal(err)
	}

	target := podTarget(t, "pod-1")
	for i := 0; i < 2; i++ { // the second publish finds the mount in place
		if err := h.nodePublish(ctx, vol, target, false); err != nil {
			t.Fatalf("publish %d: %v", i+1, err)
		}
	}
	if data, err := os.ReadFile(filepath.Join(target, "a.txt")); err != nil || string(data) != "from the volume" {
		t.Errorf("a.txt through the target: %q, %v", data, err)
	}
	if err := os.WriteFile(filepath.Join(target, "b.txt"), []byte("from the pod"), 0o644); err != nil {
		t.Fatal(err)
	}
	if mounted, err := isMountPoint(target); err != nil || !mounted {
		t.Fatalf("target mounted: %v, %v", mounted, err)
	}

	other := h.mustCreateVolume(ctx, t, "pvc-other", nil)
	if err := h.nodePublish(ctx, other, target, false); status.Code(err) != codes.AlreadyExists {
		t.Errorf("publishing another volume on a mounted target: %v, want AlreadyExists", err)
	}

	for i := 0; i < 2; i++ { // unpublish is idempotent
		if err := h.nodeUnpublish(ctx, vol, target); err != nil {
			t.Fatalf("unpublish %d: %v", i+1, err)
		}
	}
	assertGone(t, target)
	// The mock removes the target recursively: it must not have reached
	// the volume's files through the mount.
	for name, want := range map[string]string{"a.txt": "from the volume", "b.txt": "from the pod"} {
		if data, err := os.ReadFile(filepath.Join(volDir, name)); err != nil || string(data) != want {
			t.Errorf("%s in the volume after unpublish: %q, %v; want %q", name, data, err, want)
		}
	}
}

func TestPublishReadOnly(t *testing.T) {
	requireBindMounts(t)
	h, dir := newDataHarness(t)
	ctx := context.Background()
	vol := h.mustCreateVolume(ctx, t, "pvc-1", nil)
	target := podTarget(t, "pod-ro")
	if err := h.nodePublish(ctx, vol, target, true); err != nil {
		t.Fatal(err)
	}
	err := os.WriteFile(filepath.Join(target, "x"), []byte("x"), 0o644)
	if !errors.Is(err, syscall.EROFS) {
		t.Errorf("writing through a read-only publish: %v, want EROFS", err)
	}
	if err := h.nodeUnpublish(ctx, vol, target); err != nil {
		t.Fatal(err)
	}
	// The remount made the target read-only, not the volume.
	if err := os.WriteFile(filepath.Join(dir, "volumes", vol, "x"), []byte("x"), 0o644); err != nil {
		t.Errorf("the volume itself became read-only: %v", err)
	}
}
