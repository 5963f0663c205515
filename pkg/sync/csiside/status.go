package csiside

import (
	"context"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/snapkeeper/snapkeeper/pkg/csi"
	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/writer"
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

func isMarkedCreating(content *snapv1.VolumeSnapshotContent) bool {
	_, ok := content.Annotations[snapshot.AnnBeingCreated]
	return ok
}

// needsFinalizer reports whether content must get the bound finalizer now:
// Delete policy and a backend snapshot, bound or not. Backup tools (Velero)
// create such a content and delete it seconds later to remove the backend
// snapshot; without the finalizer the object could vanish first.
func needsFinalizer(content *snapv1.VolumeSnapshotContent) bool {
	return content.Spec.DeletionPolicy == snapv1.VolumeSnapshotContentDelete &&
		knownHandle(content) != "" &&
		!snapshot.IsBeingDeleted(content) &&
		!snapshot.HasFinalizer(content, snapshot.FinalizerContentBound)
}

// fixMetadata adds the finalizer a Delete content with a handle lacks and
// drops a being-created mark whose handle is already stored, in one write.
func (c *Controller) fixMetadata(ctx context.Context, content *snapv1.VolumeSnapshotContent) (*snapv1.VolumeSnapshotContent, error) {
	p := &writer.Patch{}
	if needsFinalizer(content) {
		p.Meta.AddFinalizers(content, snapshot.FinalizerContentBound)
	}
	if statusHandle(content) != "" {
		p.Meta.RemoveAnnotation(content, snapshot.AnnBeingCreated)
	}
	return c.patchMeta(ctx, content, p)
}

// patchMeta writes p (nothing when it is empty). The writer remembers that
// the cached copy is now stale; when the patch removed the last finalizer,
// the API server deleted the object and every cached copy is outdated (else
// DeleteSnapshot would be called once more) until the delete event.
func (c *Controller) patchMeta(ctx context.Context, content *snapv1.VolumeSnapshotContent, p *writer.Patch) (*snapv1.VolumeSnapshotContent, error) {
	if p.Empty() {
		return content, nil
	}
	out, err := c.cfg.Writer.PatchContent(ctx, content, p)
	if err != nil {
		return content, err
	}
	return out, nil
}

// patchStatus merge-patches status with the given fields (nothing when
// there are none).
func (c *Controller) patchStatus(ctx context.Context, content *snapv1.VolumeSnapshotContent, fields map[string]any) (*snapv1.VolumeSnapshotContent, error) {
	if len(fields) == 0 {
		return content, nil
	}
	out, err := c.cfg.Writer.PatchContentStatus(ctx, content, fields)
	if err != nil {
		return content, err
	}
	return out, nil
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

// errorMessage is the content's status.error message, or "".
func errorMessage(content *snapv1.VolumeSnapshotContent) string {
	if content.Status == nil || content.Status.Error == nil || content.Status.Error.Message == nil {
		return ""
	}
	return *content.Status.Error.Message
}

// setError shows msg in status.error, where the binder mirrors it to the
// VolumeSnapshot the user looks at, and sends one Warning event. Nothing
// is written or sent when status.error already says msg: retries do not
// repeat themselves. msg must never carry secret data.
func (c *Controller) setError(ctx context.Context, content *snapv1.VolumeSnapshotContent, reason, msg string) (*snapv1.VolumeSnapshotContent, error) {
	msg = snapshot.TrimMessage(msg)
	if errorMessage(content) == msg {
		return content, nil
	}
	now := metav1.NewTime(c.now())
	fields := map[string]any{"error": map[string]any{"message": msg, "time": now}}
	if content.Status == nil || content.Status.ReadyToUse == nil {
		// As the community sidecar: an error says "not ready", which is
		// also what makes a community binder mirror it to the snapshot.
		fields["readyToUse"] = false
	}
	out, err := c.patchStatus(ctx, content, fields)
	if err != nil {
		return content, err
	}
	klog.FromContext(ctx).Info("Content error", "reason", reason, "message", msg)
	c.cfg.Recorder.Event(content, corev1.EventTypeWarning, reason, msg)
	return out, nil
}
