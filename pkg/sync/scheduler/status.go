package scheduler

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/snapkeeper/snapkeeper/pkg/apis/snapkeeper/v1alpha1"
)

// The Ready condition's reasons.
const (
	ConditionReady          = "Ready"
	ReasonScheduled         = "Scheduled"
	ReasonSuspended         = "Suspended"
	ReasonInvalidSpec       = "InvalidSpec"
	ReasonGroupsUnavailable = "GroupSnapshotsUnavailable"
	ReasonNoClaims          = "NoClaimsSelected"
	ReasonClaimsFailing     = "ClaimsFailing"
	ReasonRunFailed         = "RunFailed"
)

// Event reasons (on transitions and runs, not on every sync).
const (
	EventCut         = "SnapshotsCut"
	EventCutPartly   = "SnapshotsCutPartly"
	EventPruned      = "RetentionDeleted"
	EventMissedRuns  = "MissedRuns"
	EventInvalidSpec = "InvalidSpec"
	EventRunFailed   = "RunFailed"
)

// summary is what the schedule's snapshots look like after a prune.
type summary struct {
	selected int
	kept     int
	claims   []v1alpha1.ClaimStatus
	// failing names the series whose newest snapshot failed.
	failing []string
	// lastSuccess is the latest scheduled time all of whose snapshots
	// are ready.
	lastSuccess time.Time
}

func (c *Controller) summarize(s *v1alpha1.SnapshotSchedule, pruned []series) summary {
	var sum summary
	if claims, err := c.selectedClaims(s); err == nil {
		sum.selected = len(claims)
		if s.Spec.GroupSnapshot == nil {
			// A selected claim with no snapshot yet is listed too.
			seen := make(map[string]bool, len(pruned))
			for _, se := range pruned {
				seen[se.name] = true
			}
			for _, pvc := range claims {
				if !seen[pvc.Name] {
					pruned = append(pruned, series{name: pvc.Name})
				}
			}
		}
	}
	type run struct{ all, ready int }
	runs := map[time.Time]*run{}
	for _, se := range pruned {
		cs := v1alpha1.ClaimStatus{Name: se.name}
		newestReadyFound := false
		for _, k := range se.decision.Keep {
			it := k.Item
			if se.deleted[it.Name] {
				continue
			}
			cs.Kept++
			if cs.LastSnapshot == "" {
				cs.LastSnapshot = it.Name
			}
			r := runs[it.Time]
			if r == nil {
				r = &run{}
				runs[it.Time] = r
			}
			r.all++
			switch {
			case it.Ready:
				cs.Ready++
				r.ready++
				if !newestReadyFound {
					cs.LastReadySnapshot, newestReadyFound = it.Name, true
				}
			case it.Failed:
				cs.Failed++
				if !newestReadyFound && cs.LastSnapshot == it.Name {
					sum.failing = append(sum.failing, se.name)
				}
			}
		}
		sum.kept += int(cs.Kept)
		sum.claims = append(sum.claims, cs)
	}
	for t, r := range runs {
		if r.all == r.ready && t.After(sum.lastSuccess) {
			sum.lastSuccess = t
		}
	}
	sort.Slice(sum.claims, func(i, j int) bool { return sum.claims[i].Name < sum.claims[j].Name })
	sort.Strings(sum.failing)
	return sum
}

func (c *Controller) applySummary(s *v1alpha1.SnapshotSchedule, st *v1alpha1.SnapshotScheduleStatus, sum summary) {
	st.Kept = int32(sum.kept)
	st.ClaimsNotListed = 0
	st.Claims = sum.claims
	if n := len(sum.claims); n > v1alpha1.MaxClaimStatuses {
		st.Claims = sum.claims[:v1alpha1.MaxClaimStatuses]
		st.ClaimsNotListed = int32(n - v1alpha1.MaxClaimStatuses)
	}
	if !sum.lastSuccess.IsZero() && (st.LastSuccessfulTime == nil || sum.lastSuccess.After(st.LastSuccessfulTime.Time)) {
		st.LastSuccessfulTime = &metav1.Time{Time: sum.lastSuccess}
	}
}

func failingMessage(failing []string) string {
	what := "claim"
	if len(failing) > 1 {
		what = "claims"
	}
	return fmt.Sprintf("the newest snapshot of %d %s failed (%s): kubectl describe volumesnapshot shows the driver's error; snapctl doctor explains it",
		len(failing), what, strings.Trim(firstNames(failing), "[]"))
}

// setReady sets the Ready condition, with an event when it turns to a
// failure reason.
func (c *Controller) setReady(s *v1alpha1.SnapshotSchedule, st *v1alpha1.SnapshotScheduleStatus, status metav1.ConditionStatus, reason, msg string) {
	prev := meta.FindStatusCondition(st.Conditions, ConditionReady)
	changed := prev == nil || prev.Reason != reason
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: ConditionReady, Status: status, Reason: reason, Message: msg, ObservedGeneration: s.Generation,
	})
	if !changed {
		return
	}
	switch reason {
	case ReasonInvalidSpec:
		c.cfg.Recorder.Event(s, corev1.EventTypeWarning, EventInvalidSpec, msg)
	case ReasonRunFailed:
		c.cfg.Recorder.Event(s, corev1.EventTypeWarning, EventRunFailed, msg)
	}
}

// writeStatus patches what changed of the status; keys that went away are
// sent as null, which a merge patch needs to clear them.
func (c *Controller) writeStatus(ctx context.Context, s *v1alpha1.SnapshotSchedule, st *v1alpha1.SnapshotScheduleStatus) error {
	if equality.Semantic.DeepEqual(&s.Status, st) {
		return nil
	}
	next, err := runtime.DefaultUnstructuredConverter.ToUnstructured(st)
	if err != nil {
		return err
	}
	prev, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&s.Status)
	if err != nil {
		return err
	}
	patch := map[string]any{}
	for k, v := range next {
		if !equality.Semantic.DeepEqual(prev[k], v) {
			patch[k] = v
		}
	}
	for k := range prev {
		if _, ok := next[k]; !ok {
			patch[k] = nil
		}
	}
	if len(patch) == 0 {
		return nil
	}
	_, err = c.cfg.Writer.PatchScheduleStatus(ctx, s, patch)
	return err
}
