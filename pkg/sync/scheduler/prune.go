package scheduler

import (
	"context"
	"errors"
	"sort"
	"time"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"

	"github.com/snapkeeper/snapkeeper/pkg/apis/snapkeeper/v1alpha1"
	"github.com/snapkeeper/snapkeeper/pkg/schedule"
)

// claimSeries is a schedule's snapshots by the claim they were cut of:
// retention counts per claim. A scheduled snapshot without a claim source
// is in no series and never deleted.
func (c *Controller) claimSeries(s *v1alpha1.SnapshotSchedule) map[string][]*snapv1.VolumeSnapshot {
	series := map[string][]*snapv1.VolumeSnapshot{}
	for _, vs := range c.snapshotsOf(s.Namespace + "/" + s.Name) {
		if claim := vs.Spec.Source.PersistentVolumeClaimName; claim != nil {
			series[*claim] = append(series[*claim], vs)
		}
	}
	return series
}

// restoring reports whether a claim not bound yet restores from the
// snapshot ns/name.
func (c *Controller) restoring(ns, name string) bool {
	objs, err := c.pvcIndex.ByIndex(byRestoreSource, ns+"/"+name)
	return err != nil || len(objs) > 0 // on doubt, protect
}

// series is one retention series after pruning: its name (the claim's,
// or the schedule's in group mode), its decision, and what was deleted.
type series struct {
	name     string
	decision schedule.Decision
	deleted  map[string]bool
}

// prune applies the retention to each series of the schedule and deletes
// what it does not keep, writeParallelism deletes at a time. Deletes carry
// the object's UID as a precondition, so only the very snapshot decided on
// is deleted.
func (c *Controller) prune(ctx context.Context, s *v1alpha1.SnapshotSchedule, p parsed, now time.Time) ([]series, error) {
	loc := p.spec.Location()
	var out []series
	// One delete of a decision, and what it returned.
	type deletion struct {
		se    series
		del   schedule.Deletion
		write func() error
		err   error
	}
	var todo []*deletion
	if s.Spec.GroupSnapshot != nil {
		groups := c.groupsOf(s.Namespace + "/" + s.Name)
		byName := make(map[string]*groupv1.VolumeGroupSnapshot, len(groups))
		for _, g := range groups {
			byName[g.Name] = g
		}
		d := schedule.Decide(schedule.GroupItems(groups), p.policy, now, loc)
		se := series{name: s.Name, decision: d, deleted: map[string]bool{}}
		for _, del := range d.Delete {
			g := byName[del.Item.Name]
			todo = append(todo, &deletion{se: se, del: del, write: func() error { return c.cfg.Writer.DeleteGroup(ctx, g) }})
		}
		out = append(out, se)
	} else {
		all := c.claimSeries(s)
		names := make([]string, 0, len(all))
		for name := range all {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, claim := range names {
			list := all[claim]
			byName := make(map[string]*snapv1.VolumeSnapshot, len(list))
			for _, vs := range list {
				byName[vs.Name] = vs
			}
			d := schedule.Decide(schedule.SnapshotItems(list, c.restoring), p.policy, now, loc)
			se := series{name: claim, decision: d, deleted: map[string]bool{}}
			for _, del := range d.Delete {
				vs := byName[del.Item.Name]
				todo = append(todo, &deletion{se: se, del: del, write: func() error { return c.cfg.Writer.DeleteSnapshot(ctx, vs) }})
			}
			out = append(out, se)
		}
	}
	inParallel(len(todo), func(i int) { todo[i].err = todo[i].write() })
	var errs []error
	for _, d := range todo {
		errs = append(errs, c.deleted(ctx, s, d.se, d.del, d.err))
	}
	return out, errors.Join(errs...)
}

// deleted records one retention delete's outcome; a snapshot gone already
// is as good as deleted.
func (c *Controller) deleted(ctx context.Context, s *v1alpha1.SnapshotSchedule, se series, del schedule.Deletion, err error) error {
	switch {
	case apierrors.IsConflict(err):
		// The UID precondition failed: a namesake replaced it, which is
		// not this decision's to delete.
		return nil
	case err != nil && !apierrors.IsNotFound(err):
		return err
	}
	se.deleted[del.Item.Name] = true
	if err == nil {
		c.cfg.Metrics.deletes.WithLabelValues(s.Namespace, s.Name).Inc()
		klog.FromContext(ctx).V(2).Info("Retention deleted a snapshot", "series", se.name, "snapshot", del.Item.Name, "reason", del.Reason)
	}
	return nil
}

// deletedCount sums the deletes of a prune, for the event.
func deletedCount(all []series) int {
	n := 0
	for _, se := range all {
		n += len(se.deleted)
	}
	return n
}

// eventDeleted tells of a prune that deleted something.
func (c *Controller) eventDeleted(s *v1alpha1.SnapshotSchedule, all []series) {
	if n := deletedCount(all); n > 0 {
		c.cfg.Recorder.Eventf(s, corev1.EventTypeNormal, EventPruned, "Retention deleted %d snapshot(s)", n)
	}
}
