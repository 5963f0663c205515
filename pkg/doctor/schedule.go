package doctor

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/snapkeeper/snapkeeper/pkg/apis/snapkeeper/v1alpha1"
	"github.com/snapkeeper/snapkeeper/pkg/schedule"
	"github.com/snapkeeper/snapkeeper/pkg/scheduleview"
	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/validation"
)

const kindSchedule = "SnapshotSchedule"

// SchedulesLease is the schedule component's Lease (cmd/controller's
// SchedulesLease), in the controller's namespace.
const SchedulesLease = "snapkeeper-schedules-leader"

// The Ready reasons and the event the schedule component writes
// (pkg/sync/scheduler), kept here so the doctor stays free of the
// controller's packages.
const (
	readyCondition          = "Ready"
	reasonInvalidSpec       = "InvalidSpec"
	reasonNoClaims          = "NoClaimsSelected"
	reasonClaimsFailing     = "ClaimsFailing"
	reasonRunFailed         = "RunFailed"
	reasonGroupsUnavailable = "GroupSnapshotsUnavailable"
	eventMissedRuns         = "MissedRuns"
)

const (
	// lateAfter is how far past status.nextScheduleTime a schedule may be
	// before the component counts as not looking at it: a sync takes
	// milliseconds, so a minute is no lag.
	lateAfter = time.Minute
	// recentlyMissed is how old lastMissedTime may be to be reported;
	// older misses are history. A MissedRuns event (events live an hour)
	// counts as recent too.
	recentlyMissed = 24 * time.Hour
	// fewNames is how many claims or labels a line names in full.
	fewNames = 5
)

// schedule explains a SnapshotSchedule that does not cut, or does not cut
// all it should: every reason found, the spec's first.
func (w *world) schedule(s *v1alpha1.SnapshotSchedule) []Finding {
	if s.DeletionTimestamp != nil {
		return nil
	}
	var out []Finding
	add := func(code, reason, fix string) {
		out = append(out, Finding{Kind: kindSchedule, Namespace: s.Namespace, Name: s.Name, Code: code, Reason: reason, Fix: fix})
	}
	edit := fmt.Sprintf("kubectl edit snapshotschedule -n %s %s", s.Namespace, s.Name)
	sel, selErr := metav1.LabelSelectorAsSelector(&s.Spec.ClaimSelector)
	var selected []*corev1.PersistentVolumeClaim
	if selErr == nil {
		selected = w.claimsOf(s.Namespace, sel)
	}
	// The webhook's own rules, over the doctor's objects: they judge the
	// spec, and the class against the drivers of the claims selected.
	errs, warnings := validation.Validator{Lookup: w.lookup()}.Schedule(validation.Create, s, nil)
	self := fmt.Sprintf("%s %q", kindSchedule, s.Namespace+"/"+s.Name)
	invalid := false
	for _, e := range errs {
		code, fix := ScheduleClass, "name a class that exists and is of the claims' driver, or create it: "+edit
		if specError(e) {
			code, fix, invalid = ScheduleInvalid, "correct the field the message names ("+edit+"); until then the schedule component neither cuts nor deletes", true
		}
		add(code, ownWords(e.Detail, self)+" (field "+e.Field+")", fix)
	}
	if invalid {
		return out
	}
	suspended := s.Spec.Suspend != nil && *s.Spec.Suspend
	if suspended {
		add(ScheduleSuspended, "spec.suspend is true: no run cuts a snapshot (retention still deletes)",
			fmt.Sprintf(`resume it if it should cut: kubectl patch snapshotschedule -n %s %s --type=merge -p '{"spec":{"suspend":false}}'`+
				"; on resume the most recent time missed meanwhile is run once, unless it is older than startingDeadlineSeconds", s.Namespace, s.Name))
	}
	if len(selected) == 0 {
		add(NoClaimsSelected, fmt.Sprintf("spec.claimSelector %q selects no PersistentVolumeClaim in namespace %s; %s",
			metav1.FormatLabelSelector(&s.Spec.ClaimSelector), s.Namespace, w.claimLabels(s.Namespace)),
			fmt.Sprintf("label the claims to snapshot (kubectl label pvc -n %s CLAIM KEY=VALUE), or change spec.claimSelector: %s", s.Namespace, edit))
	}
	for _, m := range warnings {
		// Warnings about classes say what would fail; the others (no claim
		// yet, a class group mode ignores) are said above or harmless.
		if strings.Contains(m, "would fail") {
			add(ScheduleClass, ownWords(m, self), "set spec.snapshotTemplate.volumeSnapshotClassName, or mark one class of the driver default: "+edit)
		}
	}
	if s.Spec.GroupSnapshot == nil {
		if unbound := unboundClaims(selected); len(unbound) > 0 {
			add(ClaimsUnbound, fmt.Sprintf("%s not bound to a volume yet; runs skip each until it is: %s",
				count(len(unbound), "selected claim is", "selected claims are"), few(unbound)),
				fmt.Sprintf("a claim is cut from the first run after it is Bound: kubectl describe pvc -n %s %s", s.Namespace, unbound[0]))
		}
	}
	if suspended {
		return out
	}
	w.scheduleSeries(s, selected, add)
	w.scheduleStatus(s, add)
	return out
}

// specError reports an error of the spec itself, not of the objects it
// names: the class rules name the class fields, or in group mode the
// selector's drivers (forbidden).
func specError(e *field.Error) bool {
	switch e.Field {
	case "spec.snapshotTemplate.volumeSnapshotClassName", "spec.groupSnapshot.volumeGroupSnapshotClassName":
		return e.Type == field.ErrorTypeInvalid && e.BadValue == "" // the empty name
	case "spec.claimSelector":
		return e.Type != field.ErrorTypeForbidden
	}
	return e.Type != field.ErrorTypeInternal
}

// ownWords drops the object's name a webhook message starts with: the
// finding names it already.
func ownWords(msg, self string) string {
	if rest, ok := strings.CutPrefix(msg, self+": "); ok {
		return rest
	}
	if rest, ok := strings.CutPrefix(msg, self+" "); ok {
		return "it " + rest
	}
	return msg
}

// scheduleSeries reports the series the runs skip (two snapshots not ready
// yet) and those whose newest snapshot failed.
func (w *world) scheduleSeries(s *v1alpha1.SnapshotSchedule, selected []*corev1.PersistentVolumeClaim, add func(code, reason, fix string)) {
	type series struct {
		name  string
		items []schedule.Item
		errs  map[string]string // item name -> status.error.message
	}
	var all []series
	if s.Spec.GroupSnapshot != nil {
		groups := scheduleview.GroupsOf(s, w.in.Groups)
		se := series{name: s.Name, items: schedule.GroupItems(groups), errs: map[string]string{}}
		for _, g := range groups {
			if g.Status != nil && g.Status.Error != nil && g.Status.Error.Message != nil {
				se.errs[g.Name] = *g.Status.Error.Message
			}
		}
		all = append(all, se)
	} else {
		bySeries := scheduleview.ClaimSeries(s, w.in.Snapshots)
		for _, pvc := range selected {
			if pvc.DeletionTimestamp != nil || pvc.Status.Phase != corev1.ClaimBound {
				continue // the runs skip it for that reason already
			}
			se := series{name: pvc.Name, items: schedule.SnapshotItems(bySeries[pvc.Name], w.restoring), errs: map[string]string{}}
			for _, vs := range bySeries[pvc.Name] {
				se.errs[vs.Name] = errorOf(vs.Status)
			}
			all = append(all, se)
		}
	}
	var behind, failing []string
	for _, se := range all {
		live := slices.DeleteFunc(slices.Clone(se.items), func(it schedule.Item) bool { return it.Deleting })
		// Newest first, ties by name, as retention orders them.
		slices.SortFunc(live, func(a, b schedule.Item) int {
			if c := b.Time.Compare(a.Time); c != 0 {
				return c
			}
			return strings.Compare(b.Name, a.Name)
		})
		if schedule.Behind(se.items) >= 2 {
			var waiting []string
			for _, it := range live {
				if it.Ready {
					break
				}
				waiting = append(waiting, it.Name)
			}
			behind = append(behind, fmt.Sprintf("%s (%s)", se.name, strings.Join(waiting, ", ")))
		}
		if len(live) > 0 && live[0].Failed {
			msg := se.errs[live[0].Name]
			if msg == "" {
				msg = "(no message)"
			}
			failing = append(failing, fmt.Sprintf("%s: %s failed: %s", se.name, live[0].Name, msg))
		}
	}
	one, many, kind := "claim", "claims", "volumesnapshot"
	if s.Spec.GroupSnapshot != nil {
		one, many, kind = "group series", "group series", "volumegroupsnapshot"
	}
	if len(behind) > 0 {
		add(ClaimsBehind, fmt.Sprintf("runs skip %s whose last two scheduled snapshots are not ready yet: %s", count(len(behind), one, many), few(behind)),
			fmt.Sprintf("each is cut again once one of them is ready or gone; the doctor's lines for those snapshots say why they are not, or delete a stuck one: kubectl delete %s -n %s NAME",
				kind, s.Namespace))
	}
	if len(failing) > 0 {
		add(ClaimsFailing, fmt.Sprintf("the newest snapshot of %s failed: %s", count(len(failing), one, many), few(failing)),
			fmt.Sprintf("follow the driver's message (kubectl describe %s -n %s NAME); the next run cuts again, and retention deletes the failed one once a newer one is ready", kind, s.Namespace))
	}
}

// scheduleStatus reads what the component wrote: missed runs, a Ready
// condition false for a reason not found above, and a next time long past.
func (w *world) scheduleStatus(s *v1alpha1.SnapshotSchedule, add func(code, reason, fix string)) {
	st := s.Status
	now := w.in.Now
	check := "kubectl get lease -A | grep " + SchedulesLease
	if st.MissedRuns > 0 {
		event, _ := w.lastEvent(kindSchedule, s.Namespace, s.Name, eventMissedRuns)
		recent := st.LastMissedTime != nil && now.Sub(st.LastMissedTime.Time) <= recentlyMissed
		if event != "" || recent {
			reason := fmt.Sprintf("status.missedRuns: %d scheduled times were skipped since it was created", st.MissedRuns)
			if st.LastMissedTime != nil {
				reason += ", the last at " + st.LastMissedTime.UTC().Format(time.RFC3339)
			}
			if event != "" {
				reason += "; event " + eventMissedRuns + ": " + event
			}
			fix := "the schedule component was not running or not leading then (" + check + "); after downtime it runs only the most recent missed time"
			if d := s.Spec.StartingDeadlineSeconds; d != nil {
				fix += fmt.Sprintf(", and only when it is at most startingDeadlineSeconds (%ds) old: raise or remove that to catch up", *d)
			}
			add(MissedRuns, reason, fix)
		}
	}
	if c := meta.FindStatusCondition(st.Conditions, readyCondition); c != nil && c.Status == metav1.ConditionFalse {
		switch c.Reason {
		case reasonInvalidSpec, reasonNoClaims, reasonClaimsFailing:
			// Explained above from the objects themselves, which are newer.
		default:
			fix := "follow the message; kubectl describe snapshotschedule -n " + s.Namespace + " " + s.Name
			switch c.Reason {
			case reasonRunFailed:
				fix = "creating the snapshots failed with an API error, retried with backoff: follow the message (RBAC: the component's ClusterRole creates VolumeSnapshots and VolumeGroupSnapshots; an admission webhook; a quota)"
			case reasonGroupsUnavailable:
				fix = "install the group snapshot CRDs (charts/snapkeeper/files/crds) and keep the CSIVolumeGroupSnapshot feature gate on, then restart the controller; or remove spec.groupSnapshot"
			}
			add(ScheduleNotReady, fmt.Sprintf("Ready is False, reason %s: %s", c.Reason, c.Message), fix)
		}
	}
	var late string
	switch {
	case st.NextScheduleTime != nil && now.Sub(st.NextScheduleTime.Time) > lateAfter:
		late = fmt.Sprintf("status.nextScheduleTime %s is %s past, so no schedule component has looked at it since",
			st.NextScheduleTime.UTC().Format(time.RFC3339), now.Sub(st.NextScheduleTime.Time).Round(time.Second))
	case meta.FindStatusCondition(st.Conditions, readyCondition) == nil && !s.CreationTimestamp.IsZero() && now.Sub(s.CreationTimestamp.Time) > lateAfter:
		late = fmt.Sprintf("no status %s after it was created: no schedule component has synced it", now.Sub(s.CreationTimestamp.Time).Round(time.Second))
	default:
		return
	}
	reason, fix := w.schedulesLease(check)
	add(SchedulesNotRunning, late+"; "+reason, fix)
}

// schedulesLease says what the schedule component's Lease tells.
func (w *world) schedulesLease(check string) (reason, fix string) {
	enable := "enable it: chart value controller.schedules.enabled=true, or --components=binder,schedules on the controller"
	if !w.in.LeasesKnown {
		return "the Leases could not be read", "check that the schedule component runs: " + check + " (renewed within seconds); else " + enable
	}
	var lease *leaseHolder
	for i := range w.in.Leases {
		if l := &w.in.Leases[i]; l.Name == SchedulesLease {
			if until, ok := snapshot.LeaseFreshUntil(l); ok && (lease == nil || until.After(lease.until)) {
				lease = &leaseHolder{ns: l.Namespace, holder: *l.Spec.HolderIdentity, until: until}
			}
		}
	}
	switch {
	case lease == nil:
		return "no Lease " + SchedulesLease + " is held: the schedule component does not run", enable
	case !w.in.Now.Before(lease.until):
		return fmt.Sprintf("Lease %s/%s, held by %s, is stale: no replica of the component leads", lease.ns, SchedulesLease, lease.holder),
			fmt.Sprintf("check the controller's pods and their logs (kubectl get pods -n %s)", lease.ns)
	}
	return fmt.Sprintf("%s leads (Lease %s/%s) but has not synced it", lease.holder, lease.ns, SchedulesLease),
		fmt.Sprintf("read that replica's log (kubectl logs -n %s POD): an error syncing the schedule is logged there", lease.ns)
}

// leaseHolder is who holds a Lease, and until when it counts as alive.
type leaseHolder struct {
	ns, holder string
	until      time.Time
}

// claimsOf is the claims of ns that sel selects, by name.
func (w *world) claimsOf(ns string, sel labels.Selector) []*corev1.PersistentVolumeClaim {
	var out []*corev1.PersistentVolumeClaim
	for i := range w.in.PVCs {
		if c := &w.in.PVCs[i]; c.Namespace == ns && sel.Matches(labels.Set(c.Labels)) {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// claimLabels says, briefly, which labels the claims of ns carry.
func (w *world) claimLabels(ns string) string {
	count, claims := map[string]int{}, 0
	for _, c := range w.in.PVCs {
		if c.Namespace != ns {
			continue
		}
		claims++
		for k, v := range c.Labels {
			count[k+"="+v]++
		}
	}
	if claims == 0 {
		return "the namespace has no claims"
	}
	if len(count) == 0 {
		return fmt.Sprintf("the namespace's claims (%d) have no labels", claims)
	}
	pairs := make([]string, 0, len(count))
	for p := range count {
		pairs = append(pairs, p)
	}
	sort.Slice(pairs, func(i, j int) bool {
		if count[pairs[i]] != count[pairs[j]] {
			return count[pairs[i]] > count[pairs[j]]
		}
		return pairs[i] < pairs[j]
	})
	for i, p := range pairs {
		pairs[i] = fmt.Sprintf("%s (%d)", p, count[p])
	}
	return fmt.Sprintf("labels of the namespace's claims (%d): %s", claims, few(pairs))
}

func unboundClaims(claims []*corev1.PersistentVolumeClaim) []string {
	var out []string
	for _, c := range claims {
		if c.DeletionTimestamp == nil && c.Status.Phase != corev1.ClaimBound {
			out = append(out, c.Name)
		}
	}
	return out
}

// count is "n one" or "n many", as n says.
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// few joins names, the first fewNames of them and a count of the rest.
func few(names []string) string {
	if len(names) <= fewNames {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:fewNames], ", "), len(names)-fewNames)
}

// lastEvent is the message and time of the newest event of an object with
// the given reason.
func (w *world) lastEvent(kind, ns, name, reason string) (string, time.Time) {
	var msg string
	var at time.Time
	for _, e := range w.in.Events {
		o := e.InvolvedObject
		if e.Reason != reason || o.Kind != kind || o.Namespace != ns || o.Name != name {
			continue
		}
		t := e.LastTimestamp.Time
		if t.IsZero() {
			t = e.EventTime.Time
		}
		if msg == "" || t.After(at) {
			msg, at = e.Message, t
		}
	}
	return msg, at
}
