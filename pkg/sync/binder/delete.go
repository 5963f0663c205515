package binder

import (
	"context"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/sync/workloop"
	"github.com/snapkeeper/snapkeeper/pkg/writer"
)

// deleting tears a subject down. While a claim restores from it (or, for
// a snapshot, from a member of its group while the group lives), nothing is
// touched: every finalizer stays and the content is neither marked nor
// deleted (SnapshotDeletePending), for Delete and Retain alike. Then its
// content gets the being-deleted mark whatever its policy; a Delete content
// is deleted and the subject waits until it is gone; what else it owns (a
// group's members) is deleted; a Retain content is left and the subject
// released at once.
func (c *Controller) deleting(ctx context.Context, s *scope) (workloop.Result, error) {
	n, obj := s.names, s.obj
	releaseSource(s)
	if !hasAnyFinalizer(obj, n.finalizers) {
		return workloop.Result{}, nil
	}
	c.cfg.Metrics.start(obj.GetUID(), n.ops.delete)
	content, wait, err := c.tearDownAll(ctx, s)
	if err != nil || wait {
		return workloop.Result{}, err
	}
	p := &writer.Patch{}
	p.Meta.RemoveFinalizers(obj, n.finalizers...)
	c.releasedUIDs.add(obj.GetUID(), time.Now()) // before its delete event can come
	if err := s.patchMeta(ctx, p); err != nil {
		c.releasedUIDs.take(obj.GetUID())
		if apierrors.IsNotFound(err) {
			return workloop.Result{}, nil
		}
		return workloop.Result{}, err
	}
	// Without a content (a Delete content is gone by now) the driver is
	// the class's, as for the gauges.
	driver, why := s.classDriver(), "no content exists for it"
	if content != nil {
		driver, why = content.driver, "its content is retained"
	}
	// Said at -v=2: a subject released while its content lives would
	// leave the content and its backend snapshot behind for good.
	klog.FromContext(ctx).V(2).Info("Released the deleted "+n.subject, n.logKey, objKey(obj.GetNamespace(), obj.GetName()), "why", why)
	c.cfg.Metrics.released(obj.GetUID(), n.ops, driver, kindType(s), obj.GetCreationTimestamp().Time, obj.GetDeletionTimestamp().Time)
	return workloop.Result{}, nil
}

// tearDownAll does to a deleted subject's content and what it owns what
// its delete asks (deleting): it returns the subject's own content (nil
// when there is none) and whether to wait for an event before releasing
// the subject. A vanished group's clean-up shares it.
func (c *Controller) tearDownAll(ctx context.Context, s *scope) (*boundContent, bool, error) {
	if why := s.deletionBlocker(); why != "" {
		c.cfg.Recorder.Event(s.obj, corev1.EventTypeWarning, snapshot.ReasonSnapshotDeletePending, why)
		return nil, true, nil // the holder's events bring us back
	}
	content, err := s.ownContent(ctx)
	if err != nil {
		return nil, false, err
	}
	if content != nil && c.cfg.Writer.Stale(content.obj) {
		return content, true, nil // our mark is on its way back as an event
	}
	if content != nil {
		err := c.tearDown(ctx, klog.FromContext(ctx), content)
		switch {
		case apierrors.IsNotFound(err):
			// Gone between the cache's copy and our write (its finalizer
			// removed by its CSI side, or by hand): nothing is left to mark,
			// delete or wait for, and it is not an error (as in v8.7.0).
			klog.FromContext(ctx).V(2).Info("The content of a deleted "+s.names.subject+" is already gone", "content", content.obj.GetName())
			content = nil
		case err != nil:
			return content, false, err
		}
	}
	if o, ok := s.hooks.(owner); ok {
		if err := o.deleteOwned(ctx); err != nil {
			return content, false, err
		}
	}
	// A Delete content's delete event brings the subject back once the
	// CSI side removed the backend snapshot and its finalizer.
	return content, content != nil && deletes(content), nil
}

func hasAnyFinalizer(obj object, fs []string) bool {
	for _, f := range fs {
		if snapshot.HasFinalizer(obj, f) {
			return true
		}
	}
	return false
}

// tearDown puts the being-deleted mark on the content of a deleted
// snapshot or group, whatever its policy, and deletes a Delete content: the
// CSI side then removes its backend snapshot (or group) and its finalizer.
// A NotFound from either write says the content is gone already.
func (c *Controller) tearDown(ctx context.Context, logger klog.Logger, content *boundContent) error {
	obj := content.obj
	mark := &writer.Patch{}
	mark.Meta.SetAnnotation(obj, content.beingDeleted, snapshot.ValueYes)
	if err := content.patchMeta(ctx, c.cfg.Writer, mark); err != nil {
		return err
	}
	// The cache may show it undeleted a moment after our delete: the
	// writer remembers the delete until it does.
	if !deletes(content) || obj.GetDeletionTimestamp() != nil || c.lag.DeleteSent(obj.GetUID()) {
		return nil
	}
	if err := content.delete(ctx, c.cfg.Writer); err != nil {
		return err
	}
	logger.V(2).Info("Deleted the content of a deleted snapshot", "content", obj.GetName())
	return nil
}

// ownContent returns the content bound to vs, if it exists and is really
// this snapshot's. For a dynamic snapshot not yet seen bound, the API server
// is asked directly: a content created a moment ago must not be orphaned by
// releasing the snapshot before the cache has it.
func (c *Controller) ownContent(ctx context.Context, vs *snapv1.VolumeSnapshot) (*snapv1.VolumeSnapshotContent, error) {
	content := c.contentOf(vs)
	// A dynamic content created a moment ago, or a pre-provisioned one bound
	// a moment ago (the cached copy has no UID yet), is read from the API
	// server: releasing the snapshot on a stale copy would leave its
	// content bound to nothing, never deleted.
	staleBind := content != nil && content.Spec.VolumeSnapshotRef.UID == "" &&
		content.Spec.VolumeSnapshotRef.Name == vs.Name && content.Spec.VolumeSnapshotRef.Namespace == vs.Namespace
	if staleBind || (content == nil && vs.Spec.Source.PersistentVolumeClaimName != nil) {
		name := contentNameOf(vs)
		if content != nil {
			name = content.Name
		}
		if content == nil && vs.DeletionTimestamp != nil && c.goneContents.has(vs.UID) {
			return nil, nil // its delete event came: gone, not yet to come
		}
		live, err := c.cfg.Snap.SnapshotV1().VolumeSnapshotContents().Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil, nil
		case err != nil:
			return nil, err
		}
		content = live
	}
	if content == nil {
		return nil, nil
	}
	ref := content.Spec.VolumeSnapshotRef
	if ref.UID != vs.UID || ref.Name != vs.Name || ref.Namespace != vs.Namespace {
		return nil, nil // not ours: never touch it
	}
	return content, nil
}

// restoringClaims lists the Pending claims that restore from vs.
func (c *Controller) restoringClaims(vs *snapv1.VolumeSnapshot) []string {
	objs, err := c.pvcIndex.ByIndex(indexRestoring, objKey(vs.Namespace, vs.Name))
	if err != nil {
		return nil
	}
	var out []string
	for _, o := range objs {
		pvc, ok := o.(*corev1.PersistentVolumeClaim)
		if ok && pvc.Status.Phase == corev1.ClaimPending && pvc.DeletionTimestamp == nil {
			out = append(out, objKey(pvc.Namespace, pvc.Name))
		}
	}
	return out
}
