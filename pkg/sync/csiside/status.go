package csiside

import (
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"

	"github.com/snapkeeper/snapkeeper/pkg/csi"
	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
)

// isDynamic reports whether the backend snapshot of content is cut from a
// volume (as opposed to a pre-provisioned snapshot handle).
func isDynamic(content *snapv1.VolumeSnapshotContent) bool {
	h := content.Spec.Source.VolumeHandle
	return h != nil && *h != ""
}

// statusHandle is the handle the CSI side stored in status, or "".
func statusHandle(content *snapv1.VolumeSnapshotContent) string {
	if content.Status == nil || content.Status.SnapshotHandle == nil {
		return ""
	}
	return *content.Status.SnapshotHandle
}

// knownHandle is the backend snapshot the content stands for: the stored
// status handle, else the pre-provisioned one, else "".
func knownHandle(content *snapv1.VolumeSnapshotContent) string {
	if h := statusHandle(content); h != "" {
		return h
	}
	if h := content.Spec.Source.SnapshotHandle; h != nil {
		return *h
	}
	return ""
}

// isGroupMember reports whether content is a member of a group snapshot.
func isGroupMember(content *snapv1.VolumeSnapshotContent) bool {
	_, member := content.Annotations[snapshot.AnnVolumeGroupSnapshotHandle]
	return member
}

func isReady(content *snapv1.VolumeSnapshotContent) bool {
	st := content.Status
	return statusHandle(content) != "" && st.ReadyToUse != nil && *st.ReadyToUse
}

// statusFrom returns the status fields that differ from what the driver
// said about snap, clearing status.error: the call succeeded. The first
// creationTime and restoreSize are kept, as the community sidecar keeps them:
// later polls never move the time of the cut. A driver that gives no
// creation time gets the time of its answer (the community stores 1970
// then), and a size of 0 (CSI: unknown) leaves restoreSize unset until the
// driver reports one.
func statusFrom(content *snapv1.VolumeSnapshotContent, snap *csi.Snapshot, now time.Time) map[string]any {
	cur := content.Status
	if cur == nil {
		cur = &snapv1.VolumeSnapshotContentStatus{}
	}
	out := map[string]any{}
	if statusHandle(content) != snap.ID {
		out["snapshotHandle"] = snap.ID
	}
	if cur.CreationTime == nil {
		t := snap.CreationTime
		if t.IsZero() {
			t = now
		}
		out["creationTime"] = t.UnixNano()
	}
	if snap.SizeBytes > 0 && cur.RestoreSize == nil {
		out["restoreSize"] = snap.SizeBytes
	}
	if cur.ReadyToUse == nil || *cur.ReadyToUse != snap.ReadyToUse {
		out["readyToUse"] = snap.ReadyToUse
	}
	if cur.Error != nil {
		out["error"] = nil
	}
	return out
}
