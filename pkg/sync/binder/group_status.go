package binder

import (
	"context"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/sync/workloop"
)

// desiredGroupStatus mirrors a group content's status into its group's, as
// desiredStatus does for single snapshots. The group is ready only once its
// content is and every member exists.
func desiredGroupStatus(content *groupv1.VolumeGroupSnapshotContent, membersComplete bool) *groupv1.VolumeGroupSnapshotStatus {
	name := content.Name
	ready := false
	st := &groupv1.VolumeGroupSnapshotStatus{BoundVolumeGroupSnapshotContentName: &name, ReadyToUse: &ready}
	if cs := content.Status; cs != nil {
		if cs.CreationTime != nil {
			t := metav1.NewTime(cs.CreationTime.Time.Truncate(1e9))
			st.CreationTime = &t
		}
		if cs.ReadyToUse != nil && *cs.ReadyToUse && membersComplete {
			ready = true
		}
		if cs.Error != nil {
			st.Error = cs.Error.DeepCopy()
		}
	}
	return st
}

// mirrorGroupStatus writes the group's status when its content changed it,
// with the community's events and operation metrics on the transitions.
func (c *Controller) mirrorGroupStatus(ctx context.Context, g *groupv1.VolumeGroupSnapshot, content *groupv1.VolumeGroupSnapshotContent, membersComplete bool) error {
	want := desiredGroupStatus(content, membersComplete)
	if g.Status != nil && equality.Semantic.DeepEqual(g.Status, want) {
		return nil
	}
	if _, err := c.cfg.Writer.PatchGroupStatus(ctx, g, map[string]any{
		"boundVolumeGroupSnapshotContentName": want.BoundVolumeGroupSnapshotContentName,
		"creationTime":                        want.CreationTime,
		"readyToUse":                          want.ReadyToUse,
		"error":                               want.Error,
	}); err != nil {
		return err
	}
	typ := groupType(g)
	wasCut := g.Status != nil && g.Status.CreationTime != nil
	if want.CreationTime != nil && !wasCut {
		c.cfg.Recorder.Eventf(g, corev1.EventTypeNormal, snapshot.ReasonGroupSnapshotCreated,
			"GroupSnapshot %s/%s was successfully created by the CSI driver.", g.Namespace, g.Name)
		c.cfg.Metrics.finish(g.UID, OpCreateGroupSnapshot, content.Spec.Driver, typ, "success", g.CreationTimestamp.Time)
	}
	wasReady := g.Status != nil && g.Status.ReadyToUse != nil && *g.Status.ReadyToUse
	if *want.ReadyToUse && !wasReady {
		c.cfg.Recorder.Eventf(g, corev1.EventTypeNormal, snapshot.ReasonGroupSnapshotReady,
			"GroupSnapshot %s/%s is ready to use.", g.Namespace, g.Name)
		c.cfg.Metrics.finish(g.UID, OpCreateGroupSnapshotAndReady, content.Spec.Driver, typ, "success", g.CreationTimestamp.Time)
	}
	return nil
}

func groupType(g *groupv1.VolumeGroupSnapshot) string {
	if g.Spec.Source.VolumeGroupSnapshotContentName != nil {
		return typePreProvisioned
	}
	return typeDynamic
}

// setGroupError records a problem on the group's status.error (report).
func (c *Controller) setGroupError(ctx context.Context, g *groupv1.VolumeGroupSnapshot, p *problem) error {
	return c.report(ctx, groupSubject{g}, p)
}

// groupFail records a problem and re-checks later (failed).
func (c *Controller) groupFail(ctx context.Context, g *groupv1.VolumeGroupSnapshot, p *problem) (workloop.Result, error) {
	return c.failed(ctx, groupSubject{g}, p)
}
