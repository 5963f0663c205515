package snapshot

// Event reasons (docs/contract.md). Alert rules in users' clusters match
// these strings, so each keeps the community meaning; a new one is added only
// for a situation the community has no reason for.
const (
	// On VolumeSnapshots, from the binder.
	ReasonSnapshotReady                 = "SnapshotReady"
	ReasonCreateSnapshotContentFailed   = "CreateSnapshotContentFailed"
	ReasonSetDefaultSnapshotClassFailed = "SetDefaultSnapshotClassFailed"
	ReasonGetSnapshotClassFailed        = "GetSnapshotClassFailed"
	ReasonSnapshotContentMissing        = "SnapshotContentMissing"
	ReasonSnapshotContentMisbound       = "SnapshotContentMisbound"
	ReasonSnapshotContentMismatch       = "SnapshotContentMismatch"
	ReasonSnapshotMisbound              = "SnapshotMisbound"
	ReasonSnapshotPVCSourceMissing      = "SnapshotPVCSourceMissing"
	ReasonSnapshotDeletePending         = "SnapshotDeletePending"
	// ReasonSnapshotFailed mirrors a content's status.error onto its
	// VolumeSnapshot.
	ReasonSnapshotFailed = "SnapshotCreationFailed"

	// On VolumeSnapshotContents, from the CSI side.
	ReasonCreationFailed = "SnapshotCreationFailed"
	ReasonCheckFailed    = "SnapshotContentCheckandUpdateFailed"
	ReasonDeleteError    = "SnapshotDeleteError"
)
