package framework

import (
	"context"
	"fmt"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// DialDriver connects to the CSI driver listening on the unix socket, as
// an admin's or a backup tool talks to the backend behind the
// controller's back. The caller closes the connection.
func DialDriver(socket string) (*grpc.ClientConn, error) {
	return grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
}

// CutSnapshot creates backend snapshot name of volume directly on the
// driver on socket, waiting at most timeout, and returns it.
func CutSnapshot(ctx context.Context, socket, name, volume string, timeout time.Duration) (*csipb.Snapshot, error) {
	conn, err := DialDriver(socket)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := csipb.NewControllerClient(conn).CreateSnapshot(ctx, &csipb.CreateSnapshotRequest{Name: name, SourceVolumeId: volume})
	if err != nil {
		return nil, fmt.Errorf("CreateSnapshot %s on the driver: %w", name, err)
	}
	return resp.GetSnapshot(), nil
}
