package doctor

import (
	"fmt"
	"strings"
	"time"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
)

const (
	kindGroup        = "VolumeGroupSnapshot"
	kindGroupContent = "VolumeGroupSnapshotContent"
)

// groupContentOf is the content a group is bound to (or names), or nil.
func (w *world) groupContentOf(g *groupv1.VolumeGroupSnapshot) *groupv1.VolumeGroupSnapshotContent {
	if n := g.Spec.Source.VolumeGroupSnapshotContentName; n != nil {
		return w.groupContents[*n]
	}
	if g.Status != nil && g.Status.BoundVolumeGroupSnapshotContentName != nil {
		return w.groupContents[*g.Status.BoundVolumeGroupSnapshotContentName]
	}
	return w.groupContents[snapshot.GroupContentNameFor(g.UID)]
}

// group explains a VolumeGroupSnapshot that is not ready or is deleting.
func (w *world) group(g *groupv1.VolumeGroupSnapshot) (Finding, bool) {
	deleting := g.DeletionTimestamp != nil
	if !deleting && g.Status != nil && ready(g.Status.ReadyToUse) {
		return Finding{}, false
	}
	f := Finding{Kind: kindGroup, Namespace: g.Namespace, Name: g.Name}
	c := w.groupContentOf(g)
	var ok bool
	if c != nil {
		f.Code, f.Reason, f.Fix, ok = w.groupContentProblem(c)
	}
	switch {
	case ok:
	case c == nil && g.Spec.VolumeGroupSnapshotClassName != nil && w.groupClasses[*g.Spec.VolumeGroupSnapshotClassName] == nil:
		f.Code, f.Reason = GroupClassNotFound, fmt.Sprintf("VolumeGroupSnapshotClass %q does not exist", *g.Spec.VolumeGroupSnapshotClassName)
		f.Fix = "create it, or name an existing class (kubectl get volumegroupsnapshotclass) in a new VolumeGroupSnapshot"
	case c == nil && untouched(g, w.in.Now):
		f.Code, f.Reason = GroupsNotServed, fmt.Sprintf("no binder has acted on it in %s: no status, finalizer or content", w.in.Now.Sub(g.CreationTimestamp.Time).Round(time.Second))
		f.Fix = "run the controller without --feature-gates=CSIVolumeGroupSnapshot=false (group snapshots are on by default; chart: groupSnapshots: true); one that started before the group CRDs were installed exits within --group-crd-check-interval (1m) and its restart serves them, or restart it now (kubectl rollout restart)"
	case deleting:
		f.Code, f.Reason = DeletionHeld, fmt.Sprintf("deletion held by finalizers %s", strings.Join(g.Finalizers, ", "))
		f.Fix = "the binder removes them once the group's content and member snapshots are gone; see their lines"
	case g.Status != nil && g.Status.Error != nil && g.Status.Error.Message != nil:
		f.Code, f.Reason = SnapshotError, "status.error: "+*g.Status.Error.Message
		f.Fix = "follow the message; kubectl describe volumegroupsnapshot -n " + g.Namespace + " " + g.Name
	case w.lastWarning(kindGroup, g.Namespace, g.Name) != "":
		f.Code, f.Reason = SnapshotError, "event "+w.lastWarning(kindGroup, g.Namespace, g.Name)
		f.Fix = "follow the message; kubectl describe volumegroupsnapshot -n " + g.Namespace + " " + g.Name
	default:
		f.Code, f.Reason = WaitingForCSISide, "not ready yet"
		f.Fix = "wait; if it lasts, read the binder's and the CSI side's logs"
	}
	return f, true
}

// untouchedAfter is how long a binder that serves groups takes, at most, to
// act on a new VolumeGroupSnapshot (finalizer, status or content).
const untouchedAfter = time.Minute

// untouched reports a group no binder has acted on for untouchedAfter.
func untouched(g *groupv1.VolumeGroupSnapshot, now time.Time) bool {
	return g.DeletionTimestamp == nil && g.Status == nil && len(g.Finalizers) == 0 &&
		!g.CreationTimestamp.IsZero() && now.Sub(g.CreationTimestamp.Time) >= untouchedAfter
}

// groupContentProblem: no CSI side for the driver, or the driver's error.
func (w *world) groupContentProblem(c *groupv1.VolumeGroupSnapshotContent) (code, reason, fix string, ok bool) {
	finished := c.Status != nil && ready(c.Status.ReadyToUse) && c.DeletionTimestamp == nil
	if !finished && w.csiSideDown(c.Spec.Driver) {
		return NoCSISide, fmt.Sprintf("no CSI side (csi-snapshotter or snapkeeper --components=csi) is running for driver %s, and VolumeGroupSnapshotContent %s waits for it",
			c.Spec.Driver, c.Name), NoCSISideFix(c.Spec.Driver), true
	}
	if c.Status != nil && c.Status.Error != nil && c.Status.Error.Message != nil {
		return DriverError, fmt.Sprintf("VolumeGroupSnapshotContent %s: %s", c.Name, *c.Status.Error.Message),
			"follow the driver's message (kubectl describe volumegroupsnapshotcontent " + c.Name + "); the CSI side retries with backoff", true
	}
	return "", "", "", false
}

// groupContent explains a group content stuck deleting.
func (w *world) groupContent(c *groupv1.VolumeGroupSnapshotContent) (Finding, bool) {
	if c.DeletionTimestamp == nil || len(c.Finalizers) == 0 {
		return Finding{}, false
	}
	f := Finding{Kind: kindGroupContent, Name: c.Name, scope: c.Spec.VolumeGroupSnapshotRef.Namespace}
	if code, reason, fix, ok := w.groupContentProblem(c); ok {
		f.Code, f.Reason, f.Fix = code, reason, fix
		return f, true
	}
	f.Code, f.Reason = DeletionHeld, fmt.Sprintf("deletion held by finalizers %s", strings.Join(c.Finalizers, ", "))
	if c.Spec.DeletionPolicy == snapv1.VolumeSnapshotContentDelete {
		f.Fix = "the CSI side of " + c.Spec.Driver + " removes it after DeleteVolumeGroupSnapshot succeeds; read its log"
	} else {
		f.Fix = "the binder removes it once the VolumeGroupSnapshot is gone; check that the binder runs"
	}
	return f, true
}
