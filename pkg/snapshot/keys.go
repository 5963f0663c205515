// Package snapshot is the only place that knows the annotation, finalizer and
// label keys of the snapshot API and how names are derived from UIDs. Every
// key here is part of the wire contract shared with the community
// external-snapshotter (see docs/contract.md): changing one breaks clusters
// that mix components.
package snapshot

import "strings"

// Annotations.
const (
	AnnDefaultClass      = "snapshot.storage.kubernetes.io/is-default-class"
	AnnGroupDefaultClass = "groupsnapshot.storage.kubernetes.io/is-default-class"

	AnnBeingCreated = "snapshot.storage.kubernetes.io/volumesnapshot-being-created"
	AnnBeingDeleted = "snapshot.storage.kubernetes.io/volumesnapshot-being-deleted"

	AnnDeletionSecretName      = "snapshot.storage.kubernetes.io/deletion-secret-name"
	AnnDeletionSecretNamespace = "snapshot.storage.kubernetes.io/deletion-secret-namespace"

	AnnAllowVolumeModeChange = "snapshot.storage.kubernetes.io/allow-volume-mode-change"

	AnnGroupBeingCreated            = "groupsnapshot.storage.kubernetes.io/volumegroupsnapshot-being-created"
	AnnGroupBeingDeleted            = "groupsnapshot.storage.kubernetes.io/volumegroupsnapshot-being-deleted"
	AnnGroupDeletionSecretName      = "groupsnapshot.storage.kubernetes.io/deletion-secret-name"
	AnnGroupDeletionSecretNamespace = "groupsnapshot.storage.kubernetes.io/deletion-secret-namespace"

	// AnnVolumeGroupSnapshotHandle marks a member content of a group: it is
	// never created or deleted on its own. Note the k8s.io domain.
	AnnVolumeGroupSnapshotHandle = "groupsnapshot.storage.k8s.io/volumeGroupSnapshotHandle"

	// ValueYes is the value of the being-created/being-deleted marks.
	ValueYes = "yes"
)

// LabelManagedBy names the node whose CSI side handles a content when
// distributed snapshotting is on.
const LabelManagedBy = "snapshot.storage.kubernetes.io/managed-by"

// Finalizers.
const (
	FinalizerSnapshotAsSource   = "snapshot.storage.kubernetes.io/volumesnapshot-as-source-protection"
	FinalizerSnapshotBound      = "snapshot.storage.kubernetes.io/volumesnapshot-bound-protection"
	FinalizerContentBound       = "snapshot.storage.kubernetes.io/volumesnapshotcontent-bound-protection"
	FinalizerPVCAsSource        = "snapshot.storage.kubernetes.io/pvc-as-source-protection"
	FinalizerSnapshotInGroup    = "snapshot.storage.kubernetes.io/volumesnapshot-in-group-protection"
	FinalizerGroupSnapshotBound = "groupsnapshot.storage.kubernetes.io/volumegroupsnapshot-bound-protection"
	FinalizerGroupContentBound  = "groupsnapshot.storage.kubernetes.io/volumegroupsnapshotcontent-bound-protection"
)

// FinalizerProvisionerSource is not ours: the csi-provisioner (v6.1.1 and
// later) puts it on a VolumeSnapshot it restores a claim from, right
// before CreateVolume, and removes it when the restore finished, or, for a
// claim deleted after a failed restore, in its orphan sweep
// (--snapshot-orphan-sweep-interval, 5 minutes by default).
const FinalizerProvisionerSource = "provisioner.storage.kubernetes.io/volumesnapshot-as-source-protection"

// IsOurFinalizer reports whether f is a finalizer of the snapshot
// controllers (ours and the community's), as opposed to another
// component's.
func IsOurFinalizer(f string) bool {
	return strings.HasPrefix(f, "snapshot.storage.kubernetes.io/") || strings.HasPrefix(f, "groupsnapshot.storage.kubernetes.io/")
}

// API groups and kinds that PVC data sources point at.
const (
	GroupName         = "snapshot.storage.k8s.io"
	GroupSnapshotName = "groupsnapshot.storage.k8s.io"
	KindSnapshot      = "VolumeSnapshot"
	KindPVC           = "PersistentVolumeClaim"
)
