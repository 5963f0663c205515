package snapshot

// Event reasons (docs/contract.md). Alert rules in users' clusters match
// these strings, so each keeps the community meaning; a new one is added only
// for a situation the community has no reason for.
const (
	// On VolumeSnapshots, from the binder.
	ReasonSnapshotReady               = "SnapshotReady"
	ReasonCreateSnapshotContentFailed = "CreateSnapshotContentFailed"
	// ReasonSnapshotContentCreationFailed: the content cannot be made yet
	// (claim missing, unbound, being deleted; volume missing or not CSI).
	ReasonSnapshotContentCreationFailed = "SnapshotContentCreationFailed"
	ReasonSetDefaultSnapshotClassFailed = "SetDefaultSnapshotClassFailed"
	ReasonGetSnapshotClassFailed        = "GetSnapshotClassFailed"
	ReasonSnapshotContentMissing        = "SnapshotContentMissing"
	ReasonSnapshotContentMisbound       = "SnapshotContentMisbound"
	ReasonSnapshotContentMismatch       = "SnapshotContentMismatch"
	ReasonSnapshotMisbound              = "SnapshotMisbound"
	ReasonSnapshotPVCSourceMissing      = "SnapshotPVCSourceMissing"
	ReasonSnapshotDeletePending         = "SnapshotDeletePending"
	// ReasonNoCSISide (ours; the community has none): the content waits
	// for a CSI side, and no CSI side holds a fresh Lease for its driver.
	ReasonNoCSISide = "NoCSISide"
	// ReasonSnapshotValidationError: the snapshot breaks the CRD's own
	// rules (both sources or none; stored before the rules existed, or
	// through a CRD without them). Nothing is done with it.
	ReasonSnapshotValidationError = "SnapshotValidationError"

	// On VolumeSnapshotContents, from the CSI side.
	ReasonCreationFailed = "SnapshotCreationFailed"
	ReasonCheckFailed    = "SnapshotContentCheckandUpdateFailed"
	ReasonDeleteError    = "SnapshotDeleteError"
	// ReasonContentValidationError: the content breaks the CRD's own rules
	// (both handles or none, a reference without name or namespace); no
	// CSI call is made for it.
	ReasonContentValidationError = "ContentValidationError"
)

// Group snapshot event reasons, as the community controllers send them.
const (
	// On VolumeGroupSnapshots, from the binder.
	ReasonCreatingGroupSnapshot              = "CreatingGroupSnapshot"
	ReasonGroupSnapshotCreated               = "GroupSnapshotCreated"
	ReasonGroupSnapshotReady                 = "GroupSnapshotReady"
	ReasonGroupSnapshotContentCreationFailed = "GroupSnapshotContentCreationFailed"
	ReasonCreateGroupSnapshotContentFailed   = "CreateGroupSnapshotContentFailed"
	ReasonGetGroupSnapshotClassFailed        = "GetGroupSnapshotClassFailed"
	ReasonSetDefaultGroupSnapshotClassFailed = "SetDefaultGroupSnapshotClassFailed"
	ReasonGroupSnapshotContentMissing        = "GroupSnapshotContentMissing"
	ReasonGroupSnapshotContentMisbound       = "GroupSnapshotContentMisbound"
	ReasonGroupSnapshotContentMismatch       = "GroupSnapshotContentMismatch"
	ReasonGroupSnapshotBindFailed            = "GroupSnapshotBindFailed"
	ReasonGroupSnapshotValidationError       = "GroupSnapshotValidationError"
	ReasonGroupSnapshotMemberFailed          = "GroupSnapshotMemberCreationFailed"
	// On VolumeGroupSnapshotContents, from the CSI side.
	ReasonGroupCreationFailed = "GroupSnapshotCreationFailed"
	ReasonGroupCheckFailed    = "GroupSnapshotContentCheckandUpdateFailed"
	ReasonGroupDeleteError    = "GroupSnapshotDeleteError"
)
