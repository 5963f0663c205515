package binder

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/sync/workloop"
	"github.com/snapkeeper/snapkeeper/pkg/writer"
)

// The one lifecycle of a VolumeSnapshot and a VolumeGroupSnapshot: a
// dispatcher over small state steps, each reading only the listers,
// computing what must change and writing only that (kinds.go says what a
// kind brings). The members of a dynamic group are ordinary VolumeSnapshots
// and contents: once the group created them they go through these steps
// as snapshots, which know only that a member is never cut or deleted on
// its own.

// sync dispatches one subject to the state step that fits it.
func (c *Controller) sync(ctx context.Context, s *scope) (workloop.Result, error) {
	obj := s.obj
	if c.cfg.Writer.Stale(obj) {
		// Our last write is not in the cache yet; its watch event brings
		// the subject back. Acting now would repeat that write.
		return workloop.Result{}, nil
	}
	if obj.GetDeletionTimestamp() != nil {
		return c.deleting(ctx, s)
	}
	if p := s.problem; p != nil {
		// Stored before the CRD's rules existed: shown once, never acted on.
		return c.failed(ctx, s, p)
	}
	if s.namedContent != "" {
		return c.bindNamedContent(ctx, s)
	}
	return c.dynamic(ctx, s)
}

// dynamic cuts a new content for a subject that is not being deleted.
func (c *Controller) dynamic(ctx context.Context, s *scope) (workloop.Result, error) {
	n := s.names
	if content := s.content; content != nil {
		if cc, ok := s.hooks.(contentChecker); ok {
			if p := cc.dynamicMismatch(content); p != nil {
				return c.failed(ctx, s, p)
			}
		}
		return c.bound(ctx, s, content)
	}
	if m, ok := s.hooks.(groupMember); ok && m.waitsForGroup() {
		// A member of a group is never cut on its own: the group makes
		// its content right after it, and that content's event brings the
		// snapshot back.
		return workloop.Result{RequeueAfter: c.recheck()}, nil
	}
	if name := s.boundName; name != "" {
		return c.failed(ctx, s, problemf(n.contentMissing, "%s %q that this %s was bound to is gone; delete and re-create the %s",
			n.content, name, n.what, n.subject))
	}
	plan, prob := s.plan(ctx)
	if prob != nil {
		return c.failed(ctx, s, prob)
	}
	obj := s.obj
	c.cfg.Metrics.start(obj.GetUID(), n.ops.create)
	c.cfg.Metrics.start(obj.GetUID(), n.ops.createAndReady)
	if ok, err := c.protect(ctx, s, plan); !ok || err != nil {
		return workloop.Result{}, err // its events bring it back
	}
	// The content, born with its finalizer. The CSI side puts the
	// being-created mark on it right before it calls the driver. The
	// writer remembers the created content until the cache has it
	// (content).
	content := plan.content
	name := content.obj.GetName()
	err := content.create(ctx, c.cfg.Writer)
	switch {
	case err == nil:
		klog.FromContext(ctx).V(2).Info("Created the content", n.logKey, objKey(obj.GetNamespace(), obj.GetName()), "content", name)
	case !apierrors.IsAlreadyExists(err):
		// Shown to the user, and retried with the loop's backoff.
		if serr := c.report(ctx, s, problemf(n.createFailed, "cannot create %s %q: %v", n.content, name, err)); serr != nil {
			return workloop.Result{}, serr
		}
		return workloop.Result{}, fmt.Errorf("creating %s %s: %w", n.content, name, err)
	}
	if n.creating != "" {
		c.cfg.Recorder.Eventf(obj, corev1.EventTypeNormal, n.creating, n.creatingMessage, obj.GetNamespace(), obj.GetName())
	}
	return workloop.Result{}, nil
}

// protect stores what must be stored before a dynamic subject's content
// exists, since nothing can be cut earlier: the subject's finalizers and
// resolved default class in one write, and its source claim's protection;
// they are independent of each other, so they are sent together. It
// reports whether the content may be made.
func (c *Controller) protect(ctx context.Context, s *scope, plan *dynamicPlan) (bool, error) {
	p := &writer.Patch{}
	p.Meta.AddFinalizers(s.obj, plan.finalizers...)
	if s.class == "" {
		p.Fields = map[string]any{"spec": map[string]any{s.names.classField: plan.class}}
	}
	// With nothing to add, the finalizers were stored earlier (a crash or
	// an error between here and the content), or the cached copy is older
	// than the object: a cache listed while another process released the
	// subject shows it alive and protected after it is gone. The content is
	// made only for a subject the API server still holds, protected and not
	// deleting; otherwise it would outlive the subject for good.
	confirm := p.Meta.Empty()
	claimErr := make(chan error, 1)
	if plan.claim == nil {
		claimErr <- nil
	} else {
		pp := &writer.Patch{}
		pp.Meta.AddFinalizers(plan.claim, snapshot.FinalizerPVCAsSource)
		go func() {
			_, err := c.cfg.Writer.UpdatePVC(ctx, plan.claim, pp)
			claimErr <- err
		}()
	}
	subjectErr := s.patchMeta(ctx, p)
	if err := errors.Join(subjectErr, <-claimErr); err != nil {
		return false, err
	}
	if !confirm {
		return true, nil
	}
	return c.stillProtected(ctx, s, plan.finalizers)
}

// stillProtected reads the subject from the API server: true when it is the
// same object, not being deleted, and holds every finalizer in fs.
func (c *Controller) stillProtected(ctx context.Context, s *scope, fs []string) (bool, error) {
	obj := s.obj
	live, err := s.readLive(ctx)
	switch {
	case err != nil:
		return false, fmt.Errorf("reading %s %s/%s before creating its content: %w", s.names.subject, obj.GetNamespace(), obj.GetName(), err)
	case live == nil:
		return false, nil
	}
	if live.GetUID() != obj.GetUID() || live.GetDeletionTimestamp() != nil {
		klog.FromContext(ctx).V(2).Info("Not creating a content: the cached copy is outdated", s.names.logKey, objKey(obj.GetNamespace(), obj.GetName()),
			"deleting", live.GetDeletionTimestamp() != nil, "sameUID", live.GetUID() == obj.GetUID())
		return false, nil
	}
	for _, f := range fs {
		if !snapshot.HasFinalizer(live, f) {
			return false, nil
		}
	}
	return true, nil
}

// bindNamedContent binds a subject to the content it names: the subject's
// finalizers first, then the content's finalizer and, once, its reference's
// uid (with the subject's class), guarded by the content's resourceVersion
// so a concurrent bind of another subject cannot be overwritten.
func (c *Controller) bindNamedContent(ctx context.Context, s *scope) (workloop.Result, error) {
	content, prob := s.findNamedContent()
	if prob != nil {
		return c.failed(ctx, s, prob)
	}
	n, obj := s.names, s.obj
	c.cfg.Metrics.start(obj.GetUID(), n.ops.createAndReady)
	p := &writer.Patch{}
	p.Meta.AddFinalizers(obj, s.finalizersFor(content.policy)...)
	if err := s.patchMeta(ctx, p); err != nil {
		return workloop.Result{}, err
	}
	unbound := content.ref.UID == ""
	cp := &writer.Patch{}
	cp.Meta.AddFinalizers(content.obj, n.contentFinalizer)
	if unbound {
		spec := map[string]any{n.refField: map[string]any{"uid": string(obj.GetUID())}}
		if class := s.class; class != "" && (!n.keepContentClass || content.className == nil) {
			spec[n.classField] = class
		}
		cp.Fields = map[string]any{"spec": spec}
		cp.Precondition = content.obj.GetResourceVersion()
	}
	if err := content.patchMeta(ctx, c.cfg.Writer, cp); err != nil {
		return workloop.Result{}, err
	}
	if unbound {
		return workloop.Result{}, nil // the content's update event brings us back
	}
	return c.bound(ctx, s, content)
}

// bound keeps a bound subject's finalizers, what it depends on, and its
// status in line with its content. A ready subject whose objects are
// unchanged costs no write.
func (c *Controller) bound(ctx context.Context, s *scope, content *boundContent) (workloop.Result, error) {
	n, obj := s.names, s.obj
	if uid := content.ref.UID; uid != obj.GetUID() {
		return c.failed(ctx, s, problemf(n.misbound, "%s %q belongs to another %s (uid %q); delete this %s and create a new one",
			n.content, content.obj.GetName(), n.subject, uid, n.subject))
	}
	p := &writer.Patch{}
	p.Meta.AddFinalizers(obj, s.finalizersFor(content.policy)...)
	if k, ok := content.contentHooks.(metadataKeeper); ok {
		k.boundMetadata(p)
	}
	if err := s.patchMeta(ctx, p); err != nil {
		return workloop.Result{}, err
	}
	w, err := content.targetStatus(ctx)
	if p := (*problem)(nil); errors.As(err, &p) {
		// A failed step the user is shown; it is retried with the loop's
		// backoff.
		if serr := c.report(ctx, s, p); serr != nil {
			return workloop.Result{}, serr
		}
	}
	if err != nil {
		return workloop.Result{}, err
	}
	if err := c.writeStatus(ctx, s, content, w); err != nil {
		return workloop.Result{}, err
	}
	if !*w.status.ReadyToUse {
		return workloop.Result{RequeueAfter: minPositive(c.recheck(), w.lookAgain)}, nil
	}
	releaseSource(s)
	return workloop.Result{}, nil
}

// writeStatus writes the subject's status when its content changed it, with an
// event on the transitions a user cares about. The create operation ends
// when the subject is cut (it gets its creationTime), the create-and-ready
// operation when it is ready.
func (c *Controller) writeStatus(ctx context.Context, s *scope, content *boundContent, w *target) error {
	st := w.status
	if st.Error == nil && w.noCSI != nil {
		st.Error = w.noCSI
	}
	had := s.status
	if had != nil && equality.Semantic.DeepEqual(had, st) {
		return nil
	}
	if err := s.patchStatus(ctx, s.statusPatch(st)); err != nil {
		return err
	}
	n, obj := s.names, s.obj
	typ, created := kindType(s), obj.GetCreationTimestamp().Time
	if st.CreationTime != nil && (had == nil || had.CreationTime == nil) {
		if n.created != "" {
			c.cfg.Recorder.Eventf(obj, corev1.EventTypeNormal, n.created, n.createdMessage, obj.GetNamespace(), obj.GetName())
		}
		c.cfg.Metrics.finish(obj.GetUID(), n.ops.create, content.driver, typ, "success", created)
	}
	wasReady := had != nil && had.ReadyToUse != nil && *had.ReadyToUse
	switch {
	case w.noCSI != nil && st.Error == w.noCSI && !had.says(*w.noCSI.Message):
		c.cfg.Recorder.Event(obj, corev1.EventTypeWarning, snapshot.ReasonNoCSISide, *w.noCSI.Message)
	case *st.ReadyToUse && !wasReady:
		c.cfg.Recorder.Eventf(obj, corev1.EventTypeNormal, n.ready, n.readyMessage, obj.GetNamespace(), obj.GetName())
		c.cfg.Metrics.finish(obj.GetUID(), n.ops.createAndReady, content.driver, typ, "success", created)
	}
	return nil
}

// says reports whether a status shows the error msg.
func (s *statusView) says(msg string) bool {
	return s != nil && s.Error != nil && s.Error.Message != nil && *s.Error.Message == msg
}

// kindType is the metrics' snapshot type of a subject.
func kindType(s *scope) string {
	if s.namedContent != "" {
		return typePreProvisioned
	}
	return typeDynamic
}

// recheck is the jittered safety re-check of a waiting snapshot.
func (c *Controller) recheck() time.Duration {
	d := c.cfg.Recheck
	return d + time.Duration(rand.Int64N(int64(d)/2+1))
}
