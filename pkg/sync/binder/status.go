package binder

import (
	"context"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/sync/workloop"
)

// desiredStatus mirrors a content's status into its snapshot's. As soon as
// the snapshot is bound, its status names the content (backup tools look
// for boundVolumeSnapshotContentName) and says readyToUse=false until the
// CSI side reports; an error no longer on the content is cleared.
func desiredStatus(vs *snapv1.VolumeSnapshot, content *snapv1.VolumeSnapshotContent, group string) *snapv1.VolumeSnapshotStatus {
	name := content.Name
	notReady := false
	st := &snapv1.VolumeSnapshotStatus{BoundVolumeSnapshotContentName: &name, ReadyToUse: &notReady}
	if cs := content.Status; cs != nil {
		if cs.CreationTime != nil {
			// The API stores times to the second: compare what will be stored.
			t := metav1.NewTime(time.Unix(0, *cs.CreationTime).Truncate(time.Second))
			st.CreationTime = &t
		}
		if cs.ReadyToUse != nil {
			ready := *cs.ReadyToUse
			st.ReadyToUse = &ready
		}
		if cs.RestoreSize != nil {
			st.RestoreSize = resource.NewQuantity(*cs.RestoreSize, resource.BinarySI)
		}
		if cs.Error != nil {
			st.Error = cs.Error.DeepCopy()
		}
	}
	if group != "" {
		st.VolumeGroupSnapshotName = &group
	}
	return st
}

// mirrorStatus writes the snapshot status when the content's changed it,
// with an event on the transitions a user cares about. The CreateSnapshot
// operation ends when the snapshot is cut (it gets its creationTime), the
// CreateSnapshotAndReady operation when it is ready. noCSI, when set, is
// the error of a driver without a CSI side (csipresence.go).
func (c *Controller) mirrorStatus(ctx context.Context, vs *snapv1.VolumeSnapshot, content *snapv1.VolumeSnapshotContent, group string, noCSI *snapv1.VolumeSnapshotError) error {
	want := desiredStatus(vs, content, group)
	if want.Error == nil && noCSI != nil {
		want.Error = noCSI
	}
	if statusEqual(vs.Status, want) {
		return nil
	}
	if _, err := c.cfg.Writer.PatchSnapshotStatus(ctx, vs, statusPatch(want)); err != nil {
		return err
	}
	wasReady := vs.Status != nil && vs.Status.ReadyToUse != nil && *vs.Status.ReadyToUse
	nowReady := want.ReadyToUse != nil && *want.ReadyToUse
	wasCut := vs.Status != nil && vs.Status.CreationTime != nil
	if want.CreationTime != nil && !wasCut {
		c.cfg.Metrics.finish(vs.UID, OpCreateSnapshot, content.Spec.Driver, snapType(vs), "success", vs.CreationTimestamp.Time)
	}
	switch {
	case noCSI != nil && want.Error == noCSI && !sameErrorMessage(vs.Status, *noCSI.Message):
		c.cfg.Recorder.Event(vs, corev1.EventTypeWarning, snapshot.ReasonNoCSISide, *noCSI.Message)
	case nowReady && !wasReady:
		c.cfg.Recorder.Event(vs, corev1.EventTypeNormal, snapshot.ReasonSnapshotReady,
			"Snapshot "+vs.Namespace+"/"+vs.Name+" is ready to use.")
		c.cfg.Metrics.finish(vs.UID, OpCreateSnapshotAndReady, content.Spec.Driver, snapType(vs), "success", vs.CreationTimestamp.Time)
	}
	return nil
}

// statusEqual compares what we own of a status; restore sizes compare by
// value, not by their textual form.
func statusEqual(a, b *snapv1.VolumeSnapshotStatus) bool {
	if a == nil || b == nil {
		return a == b
	}
	return equality.Semantic.DeepEqual(a, b)
}

// statusPatch renders a full merge patch of the status: absent fields are
// sent as null so a stale error or size is cleared.
func statusPatch(st *snapv1.VolumeSnapshotStatus) map[string]any {
	m := map[string]any{
		"boundVolumeSnapshotContentName": st.BoundVolumeSnapshotContentName,
		"creationTime":                   st.CreationTime,
		"readyToUse":                     st.ReadyToUse,
		"restoreSize":                    st.RestoreSize,
		"error":                          st.Error,
		"volumeGroupSnapshotName":        st.VolumeGroupSnapshotName,
	}
	return m
}

// setError records a problem on the snapshot's status.error (report).
func (c *Controller) setError(ctx context.Context, vs *snapv1.VolumeSnapshot, p *problem) error {
	return c.report(ctx, snapSubject{vs}, p)
}

// report records a problem on a snapshot's or a group's status.error, with
// a Warning event, only when the message changes. As the community
// controller: a class problem leaves readyToUse as it is; any other says
// "not ready".
func (c *Controller) report(ctx context.Context, s subject, p *problem) error {
	msg := snapshot.TrimMessage(p.Message)
	if e := s.statusError(); e != nil && e.Message != nil && *e.Message == msg {
		return nil
	}
	now := metav1.Now()
	status := map[string]any{"error": &snapv1.VolumeSnapshotError{Time: &now, Message: &msg}}
	if r := s.classes(); p.Reason != r.getFailed && p.Reason != r.noDefault {
		ready := false
		status["readyToUse"] = &ready
	}
	if err := s.patchStatus(ctx, c.cfg.Writer, status); err != nil {
		return err
	}
	c.cfg.Recorder.Event(s.object(), corev1.EventTypeWarning, p.Reason, msg)
	return nil
}

// failed records a problem and re-checks later; the objects a snapshot or
// group waits for re-queue it through the indexes sooner.
func (c *Controller) failed(ctx context.Context, s subject, p *problem) (workloop.Result, error) {
	if err := c.report(ctx, s, p); err != nil {
		return workloop.Result{}, err
	}
	return workloop.Result{RequeueAfter: c.recheck()}, nil
}
