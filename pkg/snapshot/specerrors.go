package snapshot

import (
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
)

// SnapshotSpecError says what is wrong with a VolumeSnapshot's spec.source
// (both or neither of its fields set) and how to fix it, or "". Nothing may
// be done with such a snapshot: which source it means is unknown.
func SnapshotSpecError(vs *snapv1.VolumeSnapshot) string {
	src := vs.Spec.Source
	hasPVC := src.PersistentVolumeClaimName != nil && *src.PersistentVolumeClaimName != ""
	hasContent := src.VolumeSnapshotContentName != nil && *src.VolumeSnapshotContentName != ""
	switch {
	case hasPVC && hasContent:
		return "VolumeSnapshot " + vs.Namespace + "/" + vs.Name + " sets both spec.source.persistentVolumeClaimName and spec.source.volumeSnapshotContentName; " +
			"exactly one must be set: delete it and create a VolumeSnapshot with persistentVolumeClaimName (a new snapshot of a claim) or volumeSnapshotContentName (an existing content)"
	case !hasPVC && !hasContent:
		return "VolumeSnapshot " + vs.Namespace + "/" + vs.Name + " sets neither spec.source.persistentVolumeClaimName nor spec.source.volumeSnapshotContentName; " +
			"exactly one must be set: delete it and create a VolumeSnapshot with persistentVolumeClaimName (a new snapshot of a claim) or volumeSnapshotContentName (an existing content)"
	}
	return ""
}

// ContentSpecError says what is wrong with a VolumeSnapshotContent's spec
// (both or neither of spec.source.volumeHandle and snapshotHandle;
// spec.volumeSnapshotRef without name or namespace) and how to fix it, or
// "". No CSI call may be made for such a content: with both handles it is
// unknown whether to cut a snapshot or to read one.
func ContentSpecError(content *snapv1.VolumeSnapshotContent) string {
	src := content.Spec.Source
	hasVolume := src.VolumeHandle != nil && *src.VolumeHandle != ""
	hasSnapshot := src.SnapshotHandle != nil && *src.SnapshotHandle != ""
	const fix = "; the fields cannot be changed: delete the content and create one with exactly one of them " +
		"(volumeHandle for a new snapshot of a volume, snapshotHandle for an existing backend snapshot)"
	switch {
	case hasVolume && hasSnapshot:
		return "VolumeSnapshotContent " + content.Name + " sets both spec.source.volumeHandle and spec.source.snapshotHandle" + fix
	case !hasVolume && !hasSnapshot:
		return "VolumeSnapshotContent " + content.Name + " sets neither spec.source.volumeHandle nor spec.source.snapshotHandle" + fix
	}
	ref := content.Spec.VolumeSnapshotRef
	if ref.Name == "" || ref.Namespace == "" {
		return "VolumeSnapshotContent " + content.Name + " has a spec.volumeSnapshotRef without name or namespace (name \"" + ref.Name +
			"\", namespace \"" + ref.Namespace + "\"); both must name the VolumeSnapshot it belongs to: delete the content and create it with both set"
	}
	return ""
}
