package csi

import (
	"context"
	"fmt"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// maxListPages guards ListAll against a driver whose next_token never ends.
const maxListPages = 10000

// CreateSnapshot calls CreateSnapshot. It is idempotent by name: calling it
// again with the same name, source and parameters returns the same snapshot
// with its current readiness, so it doubles as a readiness poll. Errors wrap
// the gRPC status; classify them with MayBeInProgress / IsFinal.
func (c *Client) CreateSnapshot(ctx context.Context, req CreateRequest) (*Snapshot, error) {
	if req.Name == "" || req.SourceVolumeID == "" {
		return nil, status.Errorf(codes.InvalidArgument, "CreateSnapshot needs a name and a source volume id (name %q, source %q)", req.Name, req.SourceVolumeID)
	}
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	resp, err := c.ctrl.CreateSnapshot(ctx, &csipb.CreateSnapshotRequest{
		Name:           req.Name,
		SourceVolumeId: req.SourceVolumeID,
		Parameters:     req.Parameters,
		Secrets:        req.Secrets,
	}, grpc.WaitForReady(true))
	if err != nil {
		return nil, fmt.Errorf("CSI driver %q: CreateSnapshot %q from volume %q: %w", c.info.Name, req.Name, req.SourceVolumeID, err)
	}
	s := resp.GetSnapshot()
	if s.GetSnapshotId() == "" {
		// Not a gRPC status: classified as "may be in progress", so the
		// caller keeps its mark and asks again.
		return nil, fmt.Errorf("CSI driver %q answered CreateSnapshot %q without a snapshot id", c.info.Name, req.Name)
	}
	return fromCSI(s), nil
}

// DeleteSnapshot calls DeleteSnapshot; NotFound counts as done, as the CSI
// spec asks drivers to answer OK for an unknown id anyway.
func (c *Client) DeleteSnapshot(ctx context.Context, id string, secrets map[string]string) error {
	if id == "" {
		return status.Error(codes.InvalidArgument, "DeleteSnapshot needs a snapshot id")
	}
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	_, err := c.ctrl.DeleteSnapshot(ctx, &csipb.DeleteSnapshotRequest{SnapshotId: id, Secrets: secrets}, grpc.WaitForReady(true))
	if err != nil && status.Code(err) != codes.NotFound {
		return fmt.Errorf("CSI driver %q: DeleteSnapshot %q: %w", c.info.Name, id, err)
	}
	return nil
}

// GetSnapshot reads one snapshot through ListSnapshots(snapshot_id). It
// returns (nil, nil) when the driver does not know the id (an empty list,
// or NotFound). Without LIST_SNAPSHOTS it fails with a final Unimplemented
// error: check Capabilities first.
func (c *Client) GetSnapshot(ctx context.Context, id string, secrets map[string]string) (*Snapshot, error) {
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "GetSnapshot needs a snapshot id")
	}
	if err := c.needList(); err != nil {
		return nil, err
	}
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	resp, err := c.ctrl.ListSnapshots(ctx, &csipb.ListSnapshotsRequest{SnapshotId: id, Secrets: secrets}, grpc.WaitForReady(true))
	if status.Code(err) == codes.NotFound {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("CSI driver %q: ListSnapshots(id %q): %w", c.info.Name, id, err)
	}
	// Be strict about the filter: an entry for another id is no answer.
	for _, e := range resp.GetEntries() {
		if s := e.GetSnapshot(); s.GetSnapshotId() == id {
			return fromCSI(s), nil
		}
	}
	return nil, nil
}

// ListAll pages through an unfiltered ListSnapshots and returns every
// snapshot the driver knows (tests use it to check for leaks; with the e2e
// mock driver, that includes its three built-in snapshots). Each page is
// one call bounded by the client's timeout.
func (c *Client) ListAll(ctx context.Context, secrets map[string]string) ([]*Snapshot, error) {
	if err := c.needList(); err != nil {
		return nil, err
	}
	var out []*Snapshot
	token := ""
	for page := 0; page < maxListPages; page++ {
		resp, err := c.listPage(ctx, token, secrets)
		if err != nil {
			return nil, fmt.Errorf("CSI driver %q: ListSnapshots (page %d): %w", c.info.Name, page+1, err)
		}
		for _, e := range resp.GetEntries() {
			if s := e.GetSnapshot(); s != nil {
				out = append(out, fromCSI(s))
			}
		}
		next := resp.GetNextToken()
		if next == "" {
			return out, nil
		}
		if next == token {
			return nil, fmt.Errorf("CSI driver %q: ListSnapshots returned the same next_token %q twice", c.info.Name, next)
		}
		token = next
	}
	return nil, fmt.Errorf("CSI driver %q: ListSnapshots did not end after %d pages", c.info.Name, maxListPages)
}

func (c *Client) listPage(ctx context.Context, token string, secrets map[string]string) (*csipb.ListSnapshotsResponse, error) {
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	return c.ctrl.ListSnapshots(ctx, &csipb.ListSnapshotsRequest{StartingToken: token, Secrets: secrets}, grpc.WaitForReady(true))
}

func (c *Client) needList() error {
	if !c.caps.ListSnapshots {
		return status.Errorf(codes.Unimplemented, "CSI driver %q does not offer the controller capability LIST_SNAPSHOTS", c.info.Name)
	}
	return nil
}

// fromCSI converts the driver's snapshot into ours.
func fromCSI(s *csipb.Snapshot) *Snapshot {
	out := &Snapshot{
		ID:              s.GetSnapshotId(),
		SourceVolumeID:  s.GetSourceVolumeId(),
		SizeBytes:       s.GetSizeBytes(),
		ReadyToUse:      s.GetReadyToUse(),
		GroupSnapshotID: s.GetGroupSnapshotId(),
	}
	if ts := s.GetCreationTime(); ts != nil && ts.IsValid() {
		out.CreationTime = ts.AsTime()
	}
	return out
}
