// Package csi is the gRPC client of a CSI driver's snapshot services: connect,
// probe, capabilities, create/list/delete, and the classification of errors
// into "final" and "may still be in progress". It also calls the group
// controller service (CreateVolumeGroupSnapshot, GetVolumeGroupSnapshot,
// DeleteVolumeGroupSnapshot; groupcalls.go) of a driver that offers it.
package csi

import (
	"context"
	"time"
)

// Snapshot is what the driver tells about one backend snapshot.
type Snapshot struct {
	ID              string
	SourceVolumeID  string
	CreationTime    time.Time
	SizeBytes       int64
	ReadyToUse      bool
	GroupSnapshotID string
}

// Capabilities are the controller capabilities the driver offers, read once
// at connect time.
type Capabilities struct {
	CreateDeleteSnapshot bool
	ListSnapshots        bool
	// GroupCreateDeleteGetSnapshot reports the group controller capability.
	GroupSnapshots bool
}

// Driver is what the CSI side needs from a driver. The production
// implementation talks gRPC over a unix socket; tests use scripted fakes.
type Driver interface {
	// Name is the driver name from GetPluginInfo.
	Name() string
	Capabilities() Capabilities
	// CreateSnapshot is idempotent by name; calling it again doubles as a
	// readiness poll.
	CreateSnapshot(ctx context.Context, req CreateRequest) (*Snapshot, error)
	// DeleteSnapshot treats an unknown id as success.
	DeleteSnapshot(ctx context.Context, id string, secrets map[string]string) error
	// GetSnapshot reads one snapshot by id through ListSnapshots; it returns
	// (nil, nil) when the driver does not know the id.
	GetSnapshot(ctx context.Context, id string, secrets map[string]string) (*Snapshot, error)
}

// CreateRequest is the input of CreateSnapshot.
type CreateRequest struct {
	Name           string
	SourceVolumeID string
	Parameters     map[string]string
	Secrets        map[string]string
}
