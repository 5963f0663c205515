package binder

import (
	"context"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/writer"
)

// The rules the binder applies to both kinds are written once, over these
// two views: subject is the object a user creates and reads (a
// VolumeSnapshot or a VolumeGroupSnapshot), boundContent the content it is
// bound to. Each kind brings its names and its writes; the rule does the
// rest.

// object is what the writer, the events and the metadata helpers take.
type object interface {
	metav1.Object
	runtime.Object
}

// subject is a VolumeSnapshot or a VolumeGroupSnapshot.
type subject interface {
	object() object
	// statusError is status.error, or nil.
	statusError() *snapv1.VolumeSnapshotError
	// classes are the kind's class rules; their reasons (a class that
	// cannot be read or defaulted) leave readyToUse as it is.
	classes() classRules
	patchStatus(ctx context.Context, w *writer.Writer, fields map[string]any) error
}

// boundContent is a VolumeSnapshotContent or a VolumeGroupSnapshotContent.
type boundContent interface {
	object() object
	// beingDeleted is the kind's being-deleted mark.
	beingDeleted() string
	deletePolicy() bool
	patchMeta(ctx context.Context, w *writer.Writer, p *writer.Patch) error
	delete(ctx context.Context, w *writer.Writer) error
}

type snapSubject struct{ *snapv1.VolumeSnapshot }

func (s snapSubject) object() object { return s.VolumeSnapshot }

func (s snapSubject) classes() classRules { return snapshotClasses }

func (s snapSubject) statusError() *snapv1.VolumeSnapshotError {
	if s.Status == nil {
		return nil
	}
	return s.Status.Error
}

func (s snapSubject) patchStatus(ctx context.Context, w *writer.Writer, fields map[string]any) error {
	_, err := w.PatchSnapshotStatus(ctx, s.VolumeSnapshot, fields)
	return err
}

type groupSubject struct{ *groupv1.VolumeGroupSnapshot }

func (g groupSubject) object() object { return g.VolumeGroupSnapshot }

func (g groupSubject) classes() classRules { return groupClasses }

func (g groupSubject) statusError() *snapv1.VolumeSnapshotError {
	if g.Status == nil {
		return nil
	}
	return g.Status.Error
}

func (g groupSubject) patchStatus(ctx context.Context, w *writer.Writer, fields map[string]any) error {
	_, err := w.PatchGroupStatus(ctx, g.VolumeGroupSnapshot, fields)
	return err
}

type snapContent struct{ *snapv1.VolumeSnapshotContent }

func (s snapContent) object() object       { return s.VolumeSnapshotContent }
func (s snapContent) beingDeleted() string { return snapshot.AnnBeingDeleted }

func (s snapContent) deletePolicy() bool {
	return s.Spec.DeletionPolicy == snapv1.VolumeSnapshotContentDelete
}

func (s snapContent) patchMeta(ctx context.Context, w *writer.Writer, p *writer.Patch) error {
	_, err := w.PatchContent(ctx, s.VolumeSnapshotContent, p)
	return err
}

func (s snapContent) delete(ctx context.Context, w *writer.Writer) error {
	return w.DeleteContent(ctx, s.VolumeSnapshotContent)
}

type groupContent struct {
	*groupv1.VolumeGroupSnapshotContent
}

func (g groupContent) object() object       { return g.VolumeGroupSnapshotContent }
func (g groupContent) beingDeleted() string { return snapshot.AnnGroupBeingDeleted }

func (g groupContent) deletePolicy() bool {
	return g.Spec.DeletionPolicy == snapv1.VolumeSnapshotContentDelete
}

func (g groupContent) patchMeta(ctx context.Context, w *writer.Writer, p *writer.Patch) error {
	_, err := w.PatchGroupContent(ctx, g.VolumeGroupSnapshotContent, p)
	return err
}

func (g groupContent) delete(ctx context.Context, w *writer.Writer) error {
	return w.DeleteGroupContent(ctx, g.VolumeGroupSnapshotContent)
}
