package scheduler

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/snapkeeper/snapkeeper/pkg/apis/snapkeeper/v1alpha1"
	"github.com/snapkeeper/snapkeeper/pkg/schedule"
	"github.com/snapkeeper/snapkeeper/pkg/sync/workloop"
)

// maxRequeue bounds how long a schedule waits between syncs, so that a
// maxAge retention and a clock step are looked at at least this often.
const maxRequeue = time.Hour

// writeParallelism bounds the writes of one sync in flight at once, a
// run's creates and a retention's deletes: over thousands of claims, neither
// one at a time nor thousands.
const writeParallelism = 16

// inParallel calls fn(i) for every i in [0, n), writeParallelism at a time,
// and returns when all have.
func inParallel(n int, fn func(i int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, writeParallelism)
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			fn(i)
		}()
	}
	wg.Wait()
}

// parsed is a schedule's spec as the decisions take it.
type parsed struct {
	spec     *schedule.Spec
	policy   schedule.Policy
	deadline *time.Duration
}

func parse(s *v1alpha1.SnapshotSchedule) (parsed, error) {
	tz := ""
	if s.Spec.TimeZone != nil {
		tz = *s.Spec.TimeZone
	}
	spec, err := schedule.Parse(s.Spec.Schedule, tz)
	if err != nil {
		return parsed{}, err
	}
	policy, err := schedule.PolicyFrom(s.Spec.Retention)
	if err != nil {
		return parsed{}, err
	}
	p := parsed{spec: spec, policy: policy}
	if d := s.Spec.StartingDeadlineSeconds; d != nil {
		dd := time.Duration(*d) * time.Second
		p.deadline = &dd
	}
	return p, nil
}

// sync is one look at a schedule: cut what is due, prune what retention
// does not keep, write the status, and come back at the next time.
func (c *Controller) sync(ctx context.Context, key string) (workloop.Result, error) {
	obj, exists, err := c.schedules.GetByKey(key)
	if err != nil {
		return workloop.Result{}, err
	}
	if !exists {
		// Deleted: its snapshots stay (docs/schedules.md says how to
		// remove them); only its metric series go.
		c.cfg.Metrics.forget(key)
		return workloop.Result{}, nil
	}
	s, ok := obj.(*v1alpha1.SnapshotSchedule)
	if !ok || s.DeletionTimestamp != nil {
		return workloop.Result{}, nil
	}
	if c.cfg.Writer.Stale(s) {
		// Our own status write is not in the cache yet: deciding on the
		// old lastScheduleTime would only find the same run again.
		return workloop.Result{RequeueAfter: c.cfg.Settle}, nil
	}
	logger := klog.FromContext(ctx).WithValues("schedule", key)
	ctx = klog.NewContext(ctx, logger)
	now := c.clock.Now()
	st := s.Status.DeepCopy()
	st.ObservedGeneration = s.Generation

	p, err := parse(s)
	if err != nil {
		c.setReady(s, st, metav1.ConditionFalse, ReasonInvalidSpec, err.Error())
		return workloop.Result{}, c.writeStatus(ctx, s, st)
	}
	if s.Spec.GroupSnapshot != nil && !c.cfg.Groups {
		c.setReady(s, st, metav1.ConditionFalse, ReasonGroupsUnavailable,
			"spec.groupSnapshot needs volume group snapshots, which this controller does not serve: install the group snapshot CRDs (charts/snapkeeper/files/crds) and keep the CSIVolumeGroupSnapshot feature gate on")
		return workloop.Result{}, c.writeStatus(ctx, s, st)
	}

	last := s.CreationTimestamp.Time
	if st.LastScheduleTime != nil {
		last = st.LastScheduleTime.Time
	}
	if st.LastMissedTime != nil && st.LastMissedTime.After(last) {
		last = st.LastMissedTime.Time
	}
	due := p.spec.Due(last, now, p.deadline)
	suspended := s.Spec.Suspend != nil && *s.Spec.Suspend
	var out runOutcome
	var runErr error
	if !suspended && (!due.Run.IsZero() || due.Missed > 0) {
		if !due.Run.IsZero() {
			out, runErr = c.run(ctx, s, due.Run)
		}
		if runErr == nil {
			c.recordRun(s, st, due, out)
		}
	}
	pruned, pruneErr := c.prune(ctx, s, p, now)
	c.eventDeleted(s, pruned)
	sum := c.summarize(s, pruned)
	c.applySummary(s, st, sum)

	switch {
	case runErr != nil:
		c.setReady(s, st, metav1.ConditionFalse, ReasonRunFailed, runErr.Error())
		c.cfg.Metrics.runs.WithLabelValues(s.Namespace, s.Name, "failed").Inc()
	case suspended:
		c.setReady(s, st, metav1.ConditionTrue, ReasonSuspended, "spec.suspend is true: no new snapshots; retention still applies")
	case sum.selected == 0:
		c.setReady(s, st, metav1.ConditionFalse, ReasonNoClaims,
			"spec.claimSelector selects no claim in namespace "+s.Namespace+": label the claims to snapshot, or change the selector")
	case len(sum.failing) > 0:
		c.setReady(s, st, metav1.ConditionFalse, ReasonClaimsFailing, failingMessage(sum.failing))
	default:
		c.setReady(s, st, metav1.ConditionTrue, ReasonScheduled, "cutting at "+p.spec.Location().String()+" times of \""+s.Spec.Schedule+"\"")
	}
	st.NextScheduleTime = nil
	if !suspended && !due.Next.IsZero() {
		st.NextScheduleTime = &metav1.Time{Time: due.Next}
	}
	c.cfg.Metrics.observe(s, sum)
	if err := c.writeStatus(ctx, s, st); err != nil {
		return workloop.Result{}, err
	}
	if err := errors.Join(runErr, pruneErr); err != nil {
		return workloop.Result{}, err
	}
	wait := maxRequeue
	if !suspended && !due.Next.IsZero() {
		wait = min(maxRequeue, due.Next.Sub(now)+10*time.Millisecond)
	}
	return workloop.Result{RequeueAfter: max(wait, 10*time.Millisecond)}, nil
}

// recordRun notes a run (or a missed time with nothing to run) in the
// status, the events and the metrics.
func (c *Controller) recordRun(s *v1alpha1.SnapshotSchedule, st *v1alpha1.SnapshotScheduleStatus, due schedule.Due, out runOutcome) {
	if due.Missed > 0 {
		st.MissedRuns += due.Missed
		if due.Run.IsZero() {
			// Nothing runs: the next look must not count these again.
			st.LastMissedTime = &metav1.Time{Time: due.Latest}
		}
		c.cfg.Metrics.missed.WithLabelValues(s.Namespace, s.Name).Add(float64(due.Missed))
		c.cfg.Recorder.Eventf(s, corev1.EventTypeWarning, EventMissedRuns,
			"Skipped %d scheduled time(s) (the controller was not running, or past startingDeadlineSeconds)", due.Missed)
	}
	if due.Run.IsZero() {
		return
	}
	st.LastScheduleTime = &metav1.Time{Time: due.Run}
	result := out.result()
	c.cfg.Metrics.runs.WithLabelValues(s.Namespace, s.Name, result).Inc()
	switch {
	case out.cut > 0 && len(out.behind)+len(out.unbound) == 0:
		c.cfg.Recorder.Eventf(s, corev1.EventTypeNormal, EventCut, "Cut %d snapshot(s) for %s", out.cut, due.Run.UTC().Format(time.RFC3339))
	case out.cut > 0 || len(out.behind)+len(out.unbound) > 0:
		c.cfg.Recorder.Eventf(s, corev1.EventTypeWarning, EventCutPartly, "Cut %d snapshot(s) for %s; skipped %s",
			out.cut, due.Run.UTC().Format(time.RFC3339), out.skippedText())
	}
}

// runOutcome is what one run did.
type runOutcome struct {
	cut int
	// existed counts snapshots of this time found already (a retried
	// run, or another leader's).
	existed int
	// behind are claims skipped because two of their snapshots are not
	// ready yet; unbound are claims not bound to a volume yet.
	behind, unbound []string
	noClaims        bool
}

func (o runOutcome) result() string {
	switch {
	case o.noClaims:
		return "no_claims"
	case len(o.behind)+len(o.unbound) > 0:
		return "partial"
	default:
		return "cut"
	}
}

func (o runOutcome) skippedText() string {
	var parts []string
	if n := len(o.behind); n > 0 {
		parts = append(parts, fmt.Sprintf("%d claim(s) whose last two snapshots are not ready yet (%s)", n, firstNames(o.behind)))
	}
	if n := len(o.unbound); n > 0 {
		parts = append(parts, fmt.Sprintf("%d claim(s) not bound to a volume yet (%s)", n, firstNames(o.unbound)))
	}
	if len(parts) == 0 {
		return "nothing"
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return parts[0] + " and " + parts[1]
}

func firstNames(names []string) string {
	const show = 5
	if len(names) <= show {
		return fmt.Sprint(names)
	}
	return fmt.Sprintf("%v and %d more", names[:show], len(names)-show)
}

// selectedClaims is the claims of the schedule's namespace its selector
// selects, by name.
func (c *Controller) selectedClaims(s *v1alpha1.SnapshotSchedule) ([]*corev1.PersistentVolumeClaim, error) {
	sel, err := metav1.LabelSelectorAsSelector(&s.Spec.ClaimSelector)
	if err != nil {
		return nil, fmt.Errorf("spec.claimSelector: %w", err)
	}
	claims, err := c.pvcs.PersistentVolumeClaims(s.Namespace).List(sel)
	if err != nil {
		return nil, err
	}
	sort.Slice(claims, func(i, j int) bool { return claims[i].Name < claims[j].Name })
	return claims, nil
}

// run cuts the snapshots of one scheduled time. Names come from the time,
// so a retry, a restart or a new leader finds what was cut already.
func (c *Controller) run(ctx context.Context, s *v1alpha1.SnapshotSchedule, t time.Time) (runOutcome, error) {
	claims, err := c.selectedClaims(s)
	if err != nil {
		return runOutcome{}, err
	}
	if len(claims) == 0 {
		return runOutcome{noClaims: true}, nil
	}
	if s.Spec.GroupSnapshot != nil {
		return c.runGroup(ctx, s, t)
	}
	series := c.claimSeries(s)
	var out runOutcome
	var todo []*snapv1.VolumeSnapshot
	for _, pvc := range claims {
		switch {
		case pvc.DeletionTimestamp != nil:
			continue
		case pvc.Status.Phase != corev1.ClaimBound:
			out.unbound = append(out.unbound, pvc.Name)
			continue
		}
		name := schedule.SnapshotName(s.Name, pvc.Name, t)
		if _, exists, _ := c.snapIndex.GetByKey(s.Namespace + "/" + name); exists {
			out.existed++
			continue
		}
		if schedule.Behind(schedule.SnapshotItems(series[pvc.Name], c.restoring)) >= 2 {
			out.behind = append(out.behind, pvc.Name)
			continue
		}
		todo = append(todo, c.newSnapshot(s, pvc.Name, name, t))
	}
	cut, err := c.createAll(ctx, todo)
	out.cut = cut
	return out, err
}

func (c *Controller) newSnapshot(s *v1alpha1.SnapshotSchedule, claim, name string, t time.Time) *snapv1.VolumeSnapshot {
	tmpl := s.Spec.SnapshotTemplate
	return &snapv1.VolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Namespace:   s.Namespace,
			Labels:      schedule.Labels(tmpl.Labels, s.Name, claim),
			Annotations: schedule.Annotations(tmpl.Annotations, t),
		},
		Spec: snapv1.VolumeSnapshotSpec{
			Source:                  snapv1.VolumeSnapshotSource{PersistentVolumeClaimName: &claim},
			VolumeSnapshotClassName: tmpl.VolumeSnapshotClassName,
		},
	}
}

// createAll creates the snapshots, writeParallelism at a time. A name
// that exists already counts as cut: it is this run's, from an earlier try.
func (c *Controller) createAll(ctx context.Context, todo []*snapv1.VolumeSnapshot) (int, error) {
	results := make([]error, len(todo))
	inParallel(len(todo), func(i int) {
		_, results[i] = c.cfg.Writer.CreateSnapshot(ctx, todo[i])
	})
	cut := 0
	var errs []error
	for _, err := range results {
		if err == nil || apierrors.IsAlreadyExists(err) {
			cut++
		} else {
			errs = append(errs, err)
		}
	}
	return cut, errors.Join(errs...)
}

// runGroup cuts the one group snapshot of a scheduled time.
func (c *Controller) runGroup(ctx context.Context, s *v1alpha1.SnapshotSchedule, t time.Time) (runOutcome, error) {
	name := schedule.GroupName(s.Name, t)
	key := s.Namespace + "/" + s.Name
	if _, exists, _ := c.groupIndex.GetByKey(s.Namespace + "/" + name); exists {
		return runOutcome{existed: 1}, nil
	}
	if schedule.Behind(schedule.GroupItems(c.groupsOf(key))) >= 2 {
		return runOutcome{behind: []string{s.Name}}, nil
	}
	sel := s.Spec.ClaimSelector.DeepCopy()
	g := &groupv1.VolumeGroupSnapshot{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Namespace:   s.Namespace,
			Labels:      schedule.Labels(s.Spec.SnapshotTemplate.Labels, s.Name, ""),
			Annotations: schedule.Annotations(s.Spec.SnapshotTemplate.Annotations, t),
		},
		Spec: groupv1.VolumeGroupSnapshotSpec{
			Source:                       groupv1.VolumeGroupSnapshotSource{Selector: sel},
			VolumeGroupSnapshotClassName: s.Spec.GroupSnapshot.VolumeGroupSnapshotClassName,
		},
	}
	if _, err := c.cfg.Writer.CreateGroup(ctx, g); err != nil && !apierrors.IsAlreadyExists(err) {
		return runOutcome{}, err
	}
	return runOutcome{cut: 1}, nil
}
