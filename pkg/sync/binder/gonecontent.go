package binder

import (
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
)

// Controller.goneContents remembers, by the snapshot's UID, the snapshots
// being deleted whose dynamic content's delete event the informer
// delivered. The release of that snapshot (ownContent) then knows the
// content is gone and need not ask the API server, which it otherwise does
// to tell a content gone from one created a moment ago that the cache does
// not show yet: a content the informer saw deleted is not one the cache
// has yet to show, and no content of that name is created for a snapshot
// being deleted. That read was one of the three round trips in a row by
// which a worker releases a deleted snapshot. An entry lives until the
// snapshot's own delete event (onSnapshotGone) or vanishedFor; a restarted
// binder remembers nothing and reads, as before.

// onContentGone hears every content delete event: the content of a
// dynamic snapshot being deleted (in the cache, same UID as the content's
// reference) is remembered as gone for that snapshot's release.
func (c *Controller) onContentGone(obj any) {
	content, ok := obj.(*snapv1.VolumeSnapshotContent)
	if !ok {
		return
	}
	ref := content.Spec.VolumeSnapshotRef
	if ref.UID == "" || ref.Name == "" {
		return
	}
	vs, err := c.snapshots.VolumeSnapshots(ref.Namespace).Get(ref.Name)
	if err != nil || vs.UID != ref.UID || vs.DeletionTimestamp == nil ||
		vs.Spec.Source.PersistentVolumeClaimName == nil || contentNameOf(vs) != content.Name {
		return
	}
	c.goneContents.add(vs.UID, time.Now())
}
