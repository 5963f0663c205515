package csiside

import (
	"context"
	"fmt"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/pkg/csi"
	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/writer"
)

// singleNames are a VolumeSnapshotContent's names for the lifecycle's rules.
var singleNames = &kindNames{
	beingCreated: snapshot.AnnBeingCreated,
	beingDeleted: snapshot.AnnBeingDeleted,
	finalizer:    snapshot.FinalizerContentBound,
	reasonCreate: ReasonCreationFailed,
	reasonCheck:  ReasonCheckFailed,
	reasonDelete: ReasonDeleteError,
	createCall:   "CreateSnapshot",
	deleteCall:   "DeleteSnapshot",
	what:         "snapshot",
	checkFailed:  "Failed to check snapshot status: ",
	logKey:       "content",
}

// contentItem is a VolumeSnapshotContent's hooks in the lifecycle.
type contentItem struct {
	c *Controller
	*snapv1.VolumeSnapshotContent
}

// single is the item of one sync of content.
func (c *Controller) single(content *snapv1.VolumeSnapshotContent) *item {
	s := contentItem{c: c, VolumeSnapshotContent: content}
	it := &item{hooks: s, obj: content, names: singleNames, key: content.Name,
		ours: c.handles(content.Spec.Driver, content), snapshotUID: content.Spec.VolumeSnapshotRef.UID,
		deletes: content.Spec.DeletionPolicy == snapv1.VolumeSnapshotContentDelete, dynamic: isDynamic(content),
		statusHandle: statusHandle(content), knownHandle: knownHandle(content),
		ready: isReady(content), readyUnset: content.Status == nil || content.Status.ReadyToUse == nil,
		member: isGroupMember(content), specError: snapshot.ContentSpecError(content)}
	if st := content.Status; st != nil && st.Error != nil && st.Error.Message != nil {
		it.errorMessage = *st.Error.Message
	}
	return it
}

func (s contentItem) prepareCut(ctx context.Context) (cutCall, error) {
	req, err := s.c.createRequest(ctx, s.VolumeSnapshotContent)
	if err != nil {
		return cutCall{}, err
	}
	return cutCall{
		name:   req.Name,
		logKVs: []any{"volumeHandle", req.SourceVolumeID},
		run: func(ctx context.Context) (answer, error) {
			snap, err := s.c.callCreate(ctx, req)
			if err != nil {
				return answer{}, err
			}
			return snapAnswer(snap), nil
		},
	}, nil
}

// read asks the driver about the content's snapshot. A dynamic content is
// polled with CreateSnapshot again (idempotent by name), with the class
// parameters and the create secret, as the community sidecar does: a
// driver that needs credentials gets the ones it was cut with, and
// ListSnapshots is never needed for it. A pre-provisioned content is read
// with ListSnapshots and the class's list secret when the driver offers
// it; otherwise it cannot be read and is taken to be ready.
func (s contentItem) read(ctx context.Context) (answer, error) {
	handle := knownHandle(s.VolumeSnapshotContent)
	switch {
	case isDynamic(s.VolumeSnapshotContent):
		call, err := s.prepareCut(ctx)
		if err != nil {
			return answer{}, err
		}
		a, err := call.run(ctx)
		if err != nil {
			return answer{}, err
		}
		if a.id != handle {
			return answer{}, fmt.Errorf("CreateSnapshot %q answered with snapshot %q, but the content holds %q", call.name, a.id, handle)
		}
		return a, nil
	case s.c.cfg.Driver.Capabilities().ListSnapshots:
		secrets, err := s.c.listSecrets(ctx, s.VolumeSnapshotContent)
		if err != nil {
			return answer{}, err
		}
		snap, err := s.c.callGet(ctx, handle, secrets)
		if err != nil {
			return answer{}, err
		}
		if snap == nil {
			return answer{}, fmt.Errorf("the CSI driver does not know snapshot %q", handle)
		}
		return snapAnswer(snap), nil
	default:
		return snapAnswer(&csi.Snapshot{ID: handle, ReadyToUse: true}), nil
	}
}

func (s contentItem) deleteBackend(ctx context.Context, handle string) error {
	secrets, err := s.c.deletionSecrets(ctx, s.VolumeSnapshotContent)
	if err != nil {
		return err
	}
	return s.c.callDelete(ctx, handle, secrets)
}

func (s contentItem) statusFor(a answer, now time.Time) map[string]any {
	return statusFrom(s.VolumeSnapshotContent, a.single, now)
}

func (s contentItem) handleCleared() map[string]any { return map[string]any{"snapshotHandle": nil} }

func (s contentItem) patchMeta(ctx context.Context, p *writer.Patch) (*item, error) {
	out, err := s.c.cfg.Writer.PatchContent(ctx, s.VolumeSnapshotContent, p)
	if err != nil {
		return nil, err
	}
	return s.c.single(out), nil
}

func (s contentItem) patchStatus(ctx context.Context, fields map[string]any) (*item, error) {
	out, err := s.c.cfg.Writer.PatchContentStatus(ctx, s.VolumeSnapshotContent, fields)
	if err != nil {
		return nil, err
	}
	return s.c.single(out), nil
}

func (s contentItem) liveVersion(ctx context.Context) (string, error) {
	live, err := s.c.cfg.Snap.SnapshotV1().VolumeSnapshotContents().Get(ctx, s.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return live.ResourceVersion, nil
}
