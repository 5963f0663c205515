package csi

import (
	"context"
	"errors"
	"fmt"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var _ GroupDriver = (*Client)(nil)

// CreateGroupSnapshot calls CreateVolumeGroupSnapshot. It is idempotent by
// name: calling it again with the same name, volumes and parameters returns
// the same group with its current readiness, so it doubles as a readiness
// poll. Errors wrap the gRPC status; classify them with MayBeInProgress /
// IsFinal. An answer without a group id is an error without a gRPC status,
// which counts as "may be in progress". Without the group controller
// capability it fails with a final Unimplemented error: check
// Capabilities().GroupSnapshots first.
func (c *Client) CreateGroupSnapshot(ctx context.Context, req CreateGroupRequest) (*GroupSnapshot, error) {
	if req.Name == "" || len(req.SourceVolumeIDs) == 0 {
		return nil, status.Errorf(codes.InvalidArgument, "CreateVolumeGroupSnapshot needs a name and source volume ids (name %q, sources %q)", req.Name, req.SourceVolumeIDs)
	}
	for _, v := range req.SourceVolumeIDs {
		if v == "" {
			return nil, status.Errorf(codes.InvalidArgument, "CreateVolumeGroupSnapshot %q: empty source volume id in %q", req.Name, req.SourceVolumeIDs)
		}
	}
	if err := c.needGroups(); err != nil {
		return nil, err
	}
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	resp, err := c.groupClient().CreateVolumeGroupSnapshot(ctx, &csipb.CreateVolumeGroupSnapshotRequest{
		Name:            req.Name,
		SourceVolumeIds: req.SourceVolumeIDs,
		Parameters:      req.Parameters,
		Secrets:         req.Secrets,
	}, grpc.WaitForReady(true))
	if err != nil {
		return nil, fmt.Errorf("CSI driver %q: CreateVolumeGroupSnapshot %q from volumes %q: %w", c.info.Name, req.Name, req.SourceVolumeIDs, err)
	}
	g, err := fromCSIGroup(resp.GetGroupSnapshot())
	if err != nil {
		// Not a gRPC status: classified as "may be in progress", so the
		// caller keeps its mark and asks again.
		return nil, fmt.Errorf("CSI driver %q answered CreateVolumeGroupSnapshot %q %w", c.info.Name, req.Name, err)
	}
	return g, nil
}

// GetGroupSnapshot calls GetVolumeGroupSnapshot. It returns (nil, nil) when
// the driver does not know the id (NotFound). snapshotIDs, when given, are
// the member ids the caller knows; the driver may refuse ids that are not
// exactly the members.
func (c *Client) GetGroupSnapshot(ctx context.Context, id string, snapshotIDs []string, secrets map[string]string) (*GroupSnapshot, error) {
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "GetVolumeGroupSnapshot needs a group snapshot id")
	}
	if err := c.needGroups(); err != nil {
		return nil, err
	}
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	resp, err := c.groupClient().GetVolumeGroupSnapshot(ctx, &csipb.GetVolumeGroupSnapshotRequest{
		GroupSnapshotId: id,
		SnapshotIds:     snapshotIDs,
		Secrets:         secrets,
	}, grpc.WaitForReady(true))
	if status.Code(err) == codes.NotFound {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("CSI driver %q: GetVolumeGroupSnapshot %q: %w", c.info.Name, id, err)
	}
	g, err := fromCSIGroup(resp.GetGroupSnapshot())
	if err != nil {
		return nil, fmt.Errorf("CSI driver %q answered GetVolumeGroupSnapshot %q %w", c.info.Name, id, err)
	}
	if g.ID != id {
		return nil, fmt.Errorf("CSI driver %q answered GetVolumeGroupSnapshot %q with group snapshot %q", c.info.Name, id, g.ID)
	}
	return g, nil
}

// DeleteGroupSnapshot calls DeleteVolumeGroupSnapshot, which deletes the
// group and every member snapshot; NotFound counts as done, as the CSI spec
// asks drivers to answer OK for an unknown id anyway. snapshotIDs, when
// given, must be exactly the members (drivers answer FailedPrecondition
// otherwise).
func (c *Client) DeleteGroupSnapshot(ctx context.Context, id string, snapshotIDs []string, secrets map[string]string) error {
	if id == "" {
		return status.Error(codes.InvalidArgument, "DeleteVolumeGroupSnapshot needs a group snapshot id")
	}
	if err := c.needGroups(); err != nil {
		return err
	}
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	_, err := c.groupClient().DeleteVolumeGroupSnapshot(ctx, &csipb.DeleteVolumeGroupSnapshotRequest{
		GroupSnapshotId: id,
		SnapshotIds:     snapshotIDs,
		Secrets:         secrets,
	}, grpc.WaitForReady(true))
	if err != nil && status.Code(err) != codes.NotFound {
		return fmt.Errorf("CSI driver %q: DeleteVolumeGroupSnapshot %q: %w", c.info.Name, id, err)
	}
	return nil
}

// groupClient is the GroupController stub on the client's connection (a
// thin wrapper: the call observer's interceptor times its calls too).
func (c *Client) groupClient() csipb.GroupControllerClient {
	return csipb.NewGroupControllerClient(c.conn)
}

func (c *Client) needGroups() error {
	if !c.caps.GroupSnapshots {
		return status.Errorf(codes.Unimplemented, "CSI driver %q does not offer the group controller capability CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT", c.info.Name)
	}
	return nil
}

// fromCSIGroup converts the driver's group snapshot into ours. Members get
// the group's id when the driver left theirs empty. The error (no gRPC
// status) completes "CSI driver X answered <call> <name> ...".
func fromCSIGroup(g *csipb.VolumeGroupSnapshot) (*GroupSnapshot, error) {
	if g.GetGroupSnapshotId() == "" {
		return nil, errors.New("without a group snapshot id")
	}
	out := &GroupSnapshot{ID: g.GetGroupSnapshotId(), ReadyToUse: g.GetReadyToUse()}
	if ts := g.GetCreationTime(); ts != nil && ts.IsValid() {
		out.CreationTime = ts.AsTime()
	}
	for _, s := range g.GetSnapshots() {
		if s.GetSnapshotId() == "" {
			return nil, fmt.Errorf("(group snapshot %q) with a member snapshot without an id", out.ID)
		}
		m := fromCSI(s)
		if m.GroupSnapshotID == "" {
			m.GroupSnapshotID = out.ID
		}
		out.Snapshots = append(out.Snapshots, m)
	}
	return out, nil
}
