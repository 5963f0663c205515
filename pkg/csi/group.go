package csi

import (
	"context"
	"time"
)

// GroupSnapshot is what the driver tells about one backend group snapshot:
// its id and its members, cut at the same instant.
type GroupSnapshot struct {
	ID           string
	Snapshots    []*Snapshot
	CreationTime time.Time
	ReadyToUse   bool
}

// CreateGroupRequest is the input of CreateVolumeGroupSnapshot.
type CreateGroupRequest struct {
	Name            string
	SourceVolumeIDs []string
	Parameters      map[string]string
	Secrets         map[string]string
}

// GroupDriver is what the CSI side needs from a driver that offers the group
// controller service (Capabilities().GroupSnapshots).
type GroupDriver interface {
	// CreateGroupSnapshot is idempotent by name; calling it again doubles
	// as a readiness poll.
	CreateGroupSnapshot(ctx context.Context, req CreateGroupRequest) (*GroupSnapshot, error)
	// GetGroupSnapshot reads a group snapshot (pre-provisioned groups); it
	// returns (nil, nil) when the driver does not know the id.
	GetGroupSnapshot(ctx context.Context, id string, snapshotIDs []string, secrets map[string]string) (*GroupSnapshot, error)
	// DeleteGroupSnapshot deletes the group and every member snapshot; an
	// unknown id is success.
	DeleteGroupSnapshot(ctx context.Context, id string, snapshotIDs []string, secrets map[string]string) error
}
