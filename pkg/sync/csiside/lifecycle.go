package csiside

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/snapkeeper/snapkeeper/pkg/csi"
	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/sync/workloop"
	"github.com/snapkeeper/snapkeeper/pkg/writer"
)

// syncItem handles one content of either kind, read from its informer
// cache (it is nil when the cache does not hold it). NEVER modify that
// copy: it is shared with every other reader of the cache.
func (c *Controller) syncItem(ctx context.Context, key string, it *item, err error) (workloop.Result, error) {
	if apierrors.IsNotFound(err) || (err == nil && (it == nil || !it.ours)) {
		c.forget(key)
		return workloop.Result{}, nil
	}
	if err != nil {
		return workloop.Result{}, fmt.Errorf("reading %s from the cache: %w", key, err)
	}
	logger := klog.FromContext(ctx).WithValues(it.names.logKey, it.obj.GetName())
	if c.cfg.Writer.Stale(it.obj) {
		logger.V(5).Info("Cached copy predates our last write; waiting for its event", "resourceVersion", it.obj.GetResourceVersion())
		return workloop.Result{RequeueAfter: staleRecheck}, nil
	}
	return c.dispatch(klog.NewContext(ctx, logger), it)
}

// dispatch picks the state step of a content.
func (c *Controller) dispatch(ctx context.Context, it *item) (workloop.Result, error) {
	switch {
	case snapshot.IsBeingDeleted(it.obj):
		return c.deleting(ctx, it)
	case it.member:
		return workloop.Result{}, nil // the binder writes a member's status
	case it.specError != "":
		// Stored before the CRD's rules existed: no CSI call, the error is
		// shown once, and only a new version of the object brings it back.
		_, err := c.setError(ctx, it, snapshot.ReasonContentValidationError, it.specError)
		return workloop.Result{}, err
	case it.dynamic && it.statusHandle == "":
		return c.creating(ctx, it)
	}
	it, err := c.fixMetadata(ctx, it)
	if err != nil {
		return workloop.Result{}, err
	}
	if it.ready {
		c.forget(it.key)
		return workloop.Result{}, nil
	}
	return c.unready(ctx, it)
}

// creating cuts the backend snapshot (or group) of a dynamic content that
// has no handle yet. The being-created mark is on the API server before the
// call and leaves it only once the handle is stored or the driver said,
// finally, that nothing was cut: a call that timed out may still be
// cutting, and the mark is what makes a later deletion finish it first
// (external-snapshotter issue 134).
func (c *Controller) creating(ctx context.Context, it *item) (workloop.Result, error) {
	logger := klog.FromContext(ctx)
	n := it.names
	if it.snapshotUID == "" {
		// The CSI name derives from the UID; the binder's update brings
		// the content back.
		logger.V(4).Info("Waiting for the UID that names the backend snapshot")
		return workloop.Result{}, nil
	}
	if left, ok := c.retries.wait(it.key); ok {
		return workloop.Result{RequeueAfter: left}, nil
	}
	call, err := it.prepareCut(ctx)
	if err != nil {
		// Nothing was called now, but an earlier call may be in flight:
		// the mark stays as it is.
		return c.failed(ctx, it, n.reasonCreate, "Failed to prepare the "+n.createCall+" call: "+err.Error())
	}
	// A mark already there is an earlier attempt whose outcome is not
	// known (a lost reply, a timeout, a crash during the call).
	earlier := snapshot.HasAnnotation(it.obj, n.beingCreated, snapshot.ValueYes)
	if it, err = c.markCreating(ctx, it); err != nil {
		return workloop.Result{}, err
	}
	logger.V(2).Info("Calling "+n.createCall, append([]any{"name", call.name}, call.logKVs...)...)
	a, err := call.run(ctx)
	if err != nil {
		return c.createFailed(ctx, it, err, earlier)
	}
	if _, err := c.store(ctx, it, a); err != nil {
		return workloop.Result{}, err
	}
	return c.answered(ctx, it, a), nil
}

// markCreating puts the being-created mark, and for a Delete content the
// bound finalizer, on the API server in one write (nothing when both are
// there already). Without the finalizer a content deleted during the call
// could vanish before its backend snapshot is deleted.
func (c *Controller) markCreating(ctx context.Context, it *item) (*item, error) {
	n := it.names
	p := &writer.Patch{}
	p.Meta.SetAnnotation(it.obj, n.beingCreated, snapshot.ValueYes)
	if it.deletes {
		p.Meta.AddFinalizers(it.obj, n.finalizer)
	}
	return c.patchMeta(ctx, it, p)
}

// store writes what the driver answered in one status patch, THEN removes
// the being-created mark: never before the handle is stored, or a deletion
// in between could forget the backend snapshot.
func (c *Controller) store(ctx context.Context, it *item, a answer) (*item, error) {
	it, err := c.patchStatus(ctx, it, it.statusFor(a, c.now()))
	if err != nil {
		return it, err
	}
	p := &writer.Patch{}
	p.Meta.RemoveAnnotation(it.obj, it.names.beingCreated)
	return c.patchMeta(ctx, it, p)
}

// answered is what follows a stored answer: the next readiness poll, or
// nothing once the backend is ready.
func (c *Controller) answered(ctx context.Context, it *item, a answer) workloop.Result {
	logger := klog.FromContext(ctx)
	c.retries.forget(it.key)
	if !a.ready {
		d := c.polls.next(it.key)
		logger.V(4).Info("Not ready yet", "handle", a.id, "nextPoll", d)
		return workloop.Result{RequeueAfter: d}
	}
	logger.V(2).Info("Ready", "handle", a.id)
	c.polls.forget(it.key)
	return workloop.Result{}
}

// createFailed shows a failed create in status.error. An error that may
// mean "still cutting" keeps the mark; a final one clears it, since this
// call cut nothing, unless an earlier attempt of unknown outcome (earlier)
// may have cut: then only a driver that rejects the request itself proves
// nothing was cut (csi.RejectsRequest). Either way the create is retried
// with backoff.
func (c *Controller) createFailed(ctx context.Context, it *item, callErr error, earlier bool) (workloop.Result, error) {
	n := it.names
	inProgress := csi.MayBeInProgress(callErr) || (earlier && !csi.RejectsRequest(callErr))
	klog.FromContext(ctx).V(2).Info(n.createCall+" failed", "err", snapshot.TrimMessage(callErr.Error()), "mayBeInProgress", inProgress, "earlierAttempt", earlier)
	it, err := c.setError(ctx, it, n.reasonCreate, "Failed to create "+n.what+": "+csi.DriverMessage(callErr))
	if err != nil {
		return workloop.Result{}, err
	}
	if !inProgress {
		p := &writer.Patch{}
		p.Meta.RemoveAnnotation(it.obj, n.beingCreated)
		if _, err := c.patchMeta(ctx, it, p); err != nil {
			return workloop.Result{}, err
		}
	}
	return workloop.Result{RequeueAfter: c.retries.next(it.key)}, nil
}

// unready reads the status of a backend snapshot (or group) that is not
// known to be ready: a dynamic one cut earlier, or a pre-provisioned one.
// It polls with a per-content backoff for as long as the content exists
// (external-snapshotter issue 953: a
// snapshot never polled again stays unready forever).
func (c *Controller) unready(ctx context.Context, it *item) (workloop.Result, error) {
	for _, d := range []*delays{c.polls, c.retries} {
		if left, ok := d.wait(it.key); ok {
			return workloop.Result{RequeueAfter: left}, nil
		}
	}
	a, err := it.read(ctx)
	if err != nil {
		klog.FromContext(ctx).V(2).Info("Reading the status failed", "err", snapshot.TrimMessage(err.Error()))
		return c.failed(ctx, it, it.names.reasonCheck, it.names.checkFailed+csi.DriverMessage(err))
	}
	if _, err := c.store(ctx, it, a); err != nil {
		return workloop.Result{}, err
	}
	return c.answered(ctx, it, a), nil
}

// fixMetadata adds the finalizer a Delete content with a handle lacks and
// drops a being-created mark whose handle is already stored, in one write.
// Backup tools (Velero) create a content with a handle and delete it
// seconds later to remove the backend snapshot; without the finalizer the
// object could vanish first.
func (c *Controller) fixMetadata(ctx context.Context, it *item) (*item, error) {
	n := it.names
	obj := it.obj
	p := &writer.Patch{}
	if it.deletes && it.knownHandle != "" && !snapshot.IsBeingDeleted(obj) && !snapshot.HasFinalizer(obj, n.finalizer) {
		p.Meta.AddFinalizers(obj, n.finalizer)
	}
	if it.statusHandle != "" {
		p.Meta.RemoveAnnotation(obj, n.beingCreated)
	}
	return c.patchMeta(ctx, it, p)
}

// failed shows msg in status.error and retries the state with backoff. The
// failure is the user's to see (a CSI error, a missing class or secret), so
// it is reported there rather than returned to the loop.
func (c *Controller) failed(ctx context.Context, it *item, reason, msg string) (workloop.Result, error) {
	if _, err := c.setError(ctx, it, reason, msg); err != nil {
		return workloop.Result{}, err
	}
	return workloop.Result{RequeueAfter: c.retries.next(it.key)}, nil
}

// setError shows msg in status.error, where the binder mirrors it to the
// object the user looks at, and sends one Warning event. Nothing is written
// or sent when status.error already says msg: retries do not repeat
// themselves. msg must never carry secret data.
func (c *Controller) setError(ctx context.Context, it *item, reason, msg string) (*item, error) {
	msg = snapshot.TrimMessage(msg)
	if it.errorMessage == msg {
		return it, nil
	}
	now := metav1.NewTime(c.now())
	fields := map[string]any{"error": map[string]any{"message": msg, "time": now}}
	if it.readyUnset {
		// As the community sidecar: an error says "not ready", which is
		// also what makes a community binder mirror it.
		fields["readyToUse"] = false
	}
	out, err := c.patchStatus(ctx, it, fields)
	if err != nil {
		return it, err
	}
	klog.FromContext(ctx).Info("Content error", "reason", reason, "message", msg)
	c.cfg.Recorder.Event(it.obj, corev1.EventTypeWarning, reason, msg)
	return out, nil
}

// patchMeta writes p (nothing when it is empty). The writer remembers that
// the cached copy is now stale; when the patch removed the last finalizer,
// the API server deleted the object and every cached copy is outdated (else
// the backend would be deleted once more) until the delete event.
func (c *Controller) patchMeta(ctx context.Context, it *item, p *writer.Patch) (*item, error) {
	if p.Empty() {
		return it, nil
	}
	out, err := it.patchMeta(ctx, p)
	if err != nil {
		return it, err
	}
	return out, nil
}

// patchStatus merge-patches status with the given fields (nothing when
// there are none).
func (c *Controller) patchStatus(ctx context.Context, it *item, fields map[string]any) (*item, error) {
	if len(fields) == 0 {
		return it, nil
	}
	out, err := it.patchStatus(ctx, fields)
	if err != nil {
		return it, err
	}
	return out, nil
}
