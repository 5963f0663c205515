// Package smoke proves the foundation: a real API server with our CRDs and
// their CEL rules, and a real CSI endpoint on a unix socket.
package smoke

import (
	"context"
	"strings"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

func ptr[T any](v T) *T { return &v }

func TestSnapshotObjectsThroughRealAPIServer(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	env.CreateSnapshotClass(t, framework.SnapshotClass("smoke-class", framework.MockDriverName, snapv1.VolumeSnapshotContentDelete, false))
	vs := framework.DynamicSnapshot(ns, "smoke", "data", ptr("smoke-class"))
	env.CreateSnapshot(t, vs)

	// The CRD's CEL rule: exactly one of the two sources.
	both := vs.DeepCopy()
	both.Name = "both-sources"
	both.Spec.Source.VolumeSnapshotContentName = ptr("some-content")
	_, err := env.Snap.SnapshotV1().VolumeSnapshots(ns).Create(ctx, both, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "exactly one of volumeSnapshotContentName and persistentVolumeClaimName") {
		t.Fatalf("snapshot with both sources: got %v, want the CRD's CEL rule to reject it", err)
	}

	// kubectl works against the same server and lists all six CRDs.
	out, stderr, err := env.Kubectl(ctx, nil, "get", "crd", "-o", "name")
	if err != nil {
		t.Fatalf("kubectl get crd: %v: %s", err, stderr)
	}
	if n := strings.Count(out, "snapshot.storage.k8s.io"); n != 6 {
		t.Fatalf("kubectl get crd lists %d snapshot CRDs, want 6:\n%s", n, out)
	}
}

func TestCSIEndpointOnUnixSocket(t *testing.T) {
	env := framework.Shared(t)
	drv := env.StartCSIDriver(t, framework.CSIDriverOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	conn, err := framework.DialDriver(drv.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	info, err := csipb.NewIdentityClient(conn).GetPluginInfo(ctx, &csipb.GetPluginInfoRequest{})
	if err != nil {
		t.Fatalf("GetPluginInfo: %v", err)
	}
	if info.GetName() != drv.Name {
		t.Fatalf("driver name %q, want %q", info.GetName(), drv.Name)
	}
	ctrl := csipb.NewControllerClient(conn)
	created, err := ctrl.CreateSnapshot(ctx, &csipb.CreateSnapshotRequest{Name: "snapshot-smoke", SourceVolumeId: "vol-1"})
	if err != nil {
		t.Fatalf("CreateSnapshot: %v", err)
	}
	id := created.GetSnapshot().GetSnapshotId()
	list, err := ctrl.ListSnapshots(ctx, &csipb.ListSnapshotsRequest{SnapshotId: id})
	if err != nil {
		t.Fatalf("ListSnapshots: %v", err)
	}
	if len(list.GetEntries()) != 1 || list.GetEntries()[0].GetSnapshot().GetSourceVolumeId() != "vol-1" {
		t.Fatalf("ListSnapshots(%s) = %v, want the snapshot of vol-1", id, list.GetEntries())
	}
	if backend := drv.Created(t); len(backend) != 1 || backend[0].ID != id {
		t.Fatalf("backend holds %+v, want only %s", backend, id)
	}
}
