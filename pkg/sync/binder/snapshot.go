package binder

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/snapkeeper/snapkeeper/pkg/cachelag"
	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/sync/workloop"
	"github.com/snapkeeper/snapkeeper/pkg/writer"
)

// problem is a condition the user must fix (or wait for); it becomes the
// snapshot's status.error and a Warning event with Reason.
type problem struct {
	Reason  string
	Message string
	// mayBeLag: the problem may only be the informer cache lagging the
	// API server (snapshotSource reads again before reporting it).
	mayBeLag bool
}

func (p *problem) Error() string { return p.Message }

func problemf(reason, format string, args ...any) *problem {
	return &problem{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// syncSnapshot dispatches one VolumeSnapshot to the state function that
// fits it. Each state function reads only the listers, computes what must
// change, and writes only that.
func (c *Controller) syncSnapshot(ctx context.Context, key string) (workloop.Result, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return workloop.Result{}, nil
	}
	vs, err := c.snapshots.VolumeSnapshots(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return workloop.Result{}, nil
	}
	if err != nil {
		return workloop.Result{}, err
	}
	if c.cfg.Writer.Stale(vs) {
		// Our last write is not in the cache yet; its watch event brings
		// the snapshot back. Acting now would repeat that write.
		return workloop.Result{}, nil
	}
	switch {
	case vs.DeletionTimestamp != nil:
		return c.deleting(ctx, vs)
	case snapshot.SnapshotSpecError(vs) != "":
		// Stored before the CRD's rules existed: shown once, never acted on.
		return c.fail(ctx, vs, &problem{Reason: snapshot.ReasonSnapshotValidationError, Message: snapshot.SnapshotSpecError(vs)})
	case vs.Spec.Source.VolumeSnapshotContentName != nil:
		return c.preProvisioned(ctx, vs)
	default:
		return c.dynamic(ctx, vs)
	}
}

// contentOf returns the content a snapshot is (or will be) bound to, from
// the cache, or nil.
func (c *Controller) contentOf(vs *snapv1.VolumeSnapshot) *snapv1.VolumeSnapshotContent {
	name := contentNameOf(vs)
	if content, err := c.contents.Get(name); err == nil {
		return content
	}
	// A content we created a moment ago, not in the cache yet.
	if content, ok := cachelag.Created[*snapv1.VolumeSnapshotContent](c.lag, "", name); ok {
		return content
	}
	return nil
}

// contentNameOf names the content a snapshot is (or will be) bound to.
func contentNameOf(vs *snapv1.VolumeSnapshot) string {
	switch {
	case vs.Spec.Source.VolumeSnapshotContentName != nil:
		return *vs.Spec.Source.VolumeSnapshotContentName
	case vs.Status != nil && vs.Status.BoundVolumeSnapshotContentName != nil:
		return *vs.Status.BoundVolumeSnapshotContentName
	case isMember(vs) && snapshot.MemberContentNameOf(vs.Name) != "":
		return snapshot.MemberContentNameOf(vs.Name)
	default:
		return snapshot.ContentNameFor(vs.UID)
	}
}

// dynamic handles a snapshot of a PVC that is not being deleted.
func (c *Controller) dynamic(ctx context.Context, vs *snapv1.VolumeSnapshot) (workloop.Result, error) {
	if content := c.contentOf(vs); content != nil {
		return c.bound(ctx, vs, content)
	}
	if isMember(vs) {
		// A member of a group is never cut on its own: the group makes
		// its content right after it, and that content's event brings the
		// snapshot back.
		return workloop.Result{RequeueAfter: c.recheck()}, nil
	}
	if vs.Status != nil && vs.Status.BoundVolumeSnapshotContentName != nil {
		return c.fail(ctx, vs, problemf(snapshot.ReasonSnapshotContentMissing,
			"VolumeSnapshotContent %q that this snapshot was bound to is gone; delete and re-create the VolumeSnapshot",
			*vs.Status.BoundVolumeSnapshotContentName))
	}
	plan, prob := c.planContent(ctx, vs)
	if prob != nil {
		return c.fail(ctx, vs, prob)
	}
	c.cfg.Metrics.start(vs.UID, OpCreateSnapshot)
	c.cfg.Metrics.start(vs.UID, OpCreateSnapshotAndReady)
	// 1. The snapshot's finalizers, and the resolved default class, in one
	// write; 2. the source claim's protection. Both must be stored before
	// the content exists (nothing can be cut earlier); they are independent
	// of each other, so they are sent together.
	p := &writer.Patch{}
	p.Meta.AddFinalizers(vs, snapshotFinalizers(plan.class.DeletionPolicy)...)
	if vs.Spec.VolumeSnapshotClassName == nil {
		p.Fields = map[string]any{"spec": map[string]any{"volumeSnapshotClassName": plan.class.Name}}
	}
	// With nothing to add, the finalizers were stored earlier (a crash or
	// an error between here and the content), or the cached copy is older
	// than the object: a cache listed while another process released the
	// snapshot shows it alive and protected after it is gone. The content
	// is made only for a snapshot the API server still holds, protected
	// and not deleting; otherwise it would outlive the snapshot for good.
	confirm := p.Meta.Empty()
	pp := &writer.Patch{}
	pp.Meta.AddFinalizers(plan.pvc, snapshot.FinalizerPVCAsSource)
	claimErr := make(chan error, 1)
	go func() {
		_, err := c.cfg.Writer.UpdatePVC(ctx, plan.pvc, pp)
		claimErr <- err
	}()
	_, snapErr := c.cfg.Writer.PatchSnapshot(ctx, vs, p)
	if err := errors.Join(snapErr, <-claimErr); err != nil {
		return workloop.Result{}, err
	}
	if confirm {
		if ok, err := c.stillProtected(ctx, vs, snapshotFinalizers(plan.class.DeletionPolicy)); !ok || err != nil {
			return workloop.Result{}, err // its events bring it back
		}
	}
	// 3. The content, born with its finalizer. The CSI side puts the
	// being-created mark on it right before it calls the driver.
	content := c.newContent(vs, plan)
	// The writer remembers the created content until the cache has it
	// (contentOf).
	_, err := c.cfg.Writer.CreateContent(ctx, content)
	switch {
	case err == nil:
		klog.FromContext(ctx).V(2).Info("Created VolumeSnapshotContent", "snapshot", objKey(vs.Namespace, vs.Name), "content", content.Name)
	case !apierrors.IsAlreadyExists(err):
		// Shown to the user, and retried with the loop's backoff.
		if serr := c.setError(ctx, vs, problemf(snapshot.ReasonCreateSnapshotContentFailed,
			"cannot create VolumeSnapshotContent %q: %v", content.Name, err)); serr != nil {
			return workloop.Result{}, serr
		}
		return workloop.Result{}, fmt.Errorf("creating VolumeSnapshotContent %s: %w", content.Name, err)
	}
	return workloop.Result{}, nil
}

// stillProtected reads vs from the API server: true when it is the same
// object, not being deleted, and holds every finalizer in fs.
func (c *Controller) stillProtected(ctx context.Context, vs *snapv1.VolumeSnapshot, fs []string) (bool, error) {
	live, err := c.cfg.Snap.SnapshotV1().VolumeSnapshots(vs.Namespace).Get(ctx, vs.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("reading VolumeSnapshot %s/%s before creating its content: %w", vs.Namespace, vs.Name, err)
	}
	if live.UID != vs.UID || live.DeletionTimestamp != nil {
		klog.FromContext(ctx).V(2).Info("Not creating a content: the cached VolumeSnapshot is outdated", "snapshot", objKey(vs.Namespace, vs.Name),
			"deleting", live.DeletionTimestamp != nil, "sameUID", live.UID == vs.UID)
		return false, nil
	}
	for _, f := range fs {
		if !snapshot.HasFinalizer(live, f) {
			return false, nil
		}
	}
	return true, nil
}

// preProvisioned binds a snapshot to the content it names.
func (c *Controller) preProvisioned(ctx context.Context, vs *snapv1.VolumeSnapshot) (workloop.Result, error) {
	content, prob := c.preProvisionedContent(vs)
	if prob != nil {
		return c.fail(ctx, vs, prob)
	}
	ref := content.Spec.VolumeSnapshotRef
	c.cfg.Metrics.start(vs.UID, OpCreateSnapshotAndReady)
	p := &writer.Patch{}
	p.Meta.AddFinalizers(vs, snapshotFinalizers(content.Spec.DeletionPolicy)...)
	if _, err := c.cfg.Writer.PatchSnapshot(ctx, vs, p); err != nil {
		return workloop.Result{}, err
	}
	cp := &writer.Patch{}
	cp.Meta.AddFinalizers(content, snapshot.FinalizerContentBound)
	if ref.UID == "" {
		// Set the uid once, guarded by the content's resourceVersion so a
		// concurrent bind of another snapshot cannot be overwritten. The
		// snapshot's class goes with it, as the community binder copies it.
		spec := map[string]any{"volumeSnapshotRef": map[string]any{"uid": string(vs.UID)}}
		if n := vs.Spec.VolumeSnapshotClassName; n != nil && *n != "" {
			spec["volumeSnapshotClassName"] = *n
		}
		cp.Fields = map[string]any{"spec": spec}
		cp.Precondition = content.ResourceVersion
	}
	if _, err := c.cfg.Writer.PatchContent(ctx, content, cp); err != nil {
		return workloop.Result{}, err
	}
	if ref.UID == "" {
		return workloop.Result{}, nil // the content's update event brings us back
	}
	return c.bound(ctx, vs, content)
}

// preProvisionedContent returns the content a pre-provisioned snapshot
// names, or the problem that keeps them from binding.
func (c *Controller) preProvisionedContent(vs *snapv1.VolumeSnapshot) (*snapv1.VolumeSnapshotContent, *problem) {
	return preProvisioned(staticSnapshot, *vs.Spec.Source.VolumeSnapshotContentName, c.contents.Get,
		func(content *snapv1.VolumeSnapshotContent) staticContent {
			return staticContent{ref: content.Spec.VolumeSnapshotRef, dynamic: content.Spec.Source.SnapshotHandle == nil, deleting: content.DeletionTimestamp != nil}
		}, vs.Namespace, vs.Name, vs.UID)
}

// bound keeps a bound snapshot's finalizers and status in line with its
// content. A ready snapshot whose objects are unchanged costs no write.
func (c *Controller) bound(ctx context.Context, vs *snapv1.VolumeSnapshot, content *snapv1.VolumeSnapshotContent) (workloop.Result, error) {
	if content.Spec.VolumeSnapshotRef.UID != vs.UID {
		return c.fail(ctx, vs, problemf(snapshot.ReasonSnapshotMisbound,
			"VolumeSnapshotContent %q belongs to another VolumeSnapshot (uid %q); delete this VolumeSnapshot and create a new one",
			content.Name, content.Spec.VolumeSnapshotRef.UID))
	}
	group := c.groupOf(vs, content)
	p := &writer.Patch{}
	p.Meta.AddFinalizers(vs, snapshotFinalizers(content.Spec.DeletionPolicy)...)
	if content.Spec.DeletionPolicy == snapv1.VolumeSnapshotContentRetain {
		p.Meta.RemoveFinalizers(vs, snapshot.FinalizerSnapshotBound)
	}
	if g := c.liveGroup(vs.Namespace, group); g != nil && snapshot.GroupOwner(vs) == "" {
		// A pre-provisioned member is adopted by its group.
		p.Meta.AddOwnerReference(vs, snapshot.GroupOwnerReference(g))
		p.Meta.AddFinalizers(vs, snapshot.FinalizerSnapshotInGroup)
	}
	if _, err := c.cfg.Writer.PatchSnapshot(ctx, vs, p); err != nil {
		return workloop.Result{}, err
	}
	noCSI, lookAgain := c.presence.check(vs, content, time.Now())
	if err := c.mirrorStatus(ctx, vs, content, group, noCSI); err != nil {
		return workloop.Result{}, err
	}
	if !contentReady(content) {
		return workloop.Result{RequeueAfter: minPositive(c.recheck(), lookAgain)}, nil
	}
	if pvc := vs.Spec.Source.PersistentVolumeClaimName; pvc != nil {
		c.pvcLoop.Add(objKey(vs.Namespace, *pvc)) // ready: the claim may go
	}
	return workloop.Result{}, nil
}

func contentReady(content *snapv1.VolumeSnapshotContent) bool {
	return content.Status != nil && content.Status.ReadyToUse != nil && *content.Status.ReadyToUse
}

// cutInFlight reports whether a CreateSnapshot may still be running for the
// content: a CSI side (ours or the community's) puts the being-created mark
// on it right before the call and removes it after a final answer.
func cutInFlight(content *snapv1.VolumeSnapshotContent) bool {
	return snapshot.HasAnnotation(content, snapshot.AnnBeingCreated, snapshot.ValueYes)
}

func snapshotFinalizers(policy snapv1.DeletionPolicy) []string {
	if policy == snapv1.VolumeSnapshotContentDelete {
		return []string{snapshot.FinalizerSnapshotAsSource, snapshot.FinalizerSnapshotBound}
	}
	return []string{snapshot.FinalizerSnapshotAsSource}
}

// recheck is the jittered safety re-check of a waiting snapshot.
func (c *Controller) recheck() time.Duration {
	d := c.cfg.Recheck
	return d + time.Duration(rand.Int64N(int64(d)/2+1))
}

// fail records a problem on the snapshot and re-checks later (failed).
func (c *Controller) fail(ctx context.Context, vs *snapv1.VolumeSnapshot, p *problem) (workloop.Result, error) {
	return c.failed(ctx, snapSubject{vs}, p)
}
