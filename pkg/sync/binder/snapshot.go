package binder

import (
	"context"
	"fmt"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/snapkeeper/snapkeeper/pkg/cachelag"
	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/sync/workloop"
	"github.com/snapkeeper/snapkeeper/pkg/writer"
)

// syncSnapshot syncs one VolumeSnapshot through the lifecycle.
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
	return c.sync(ctx, c.snap(vs))
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

// snapshotNames are a VolumeSnapshot's names for the lifecycle's rules.
var snapshotNames = kindNames{
	subject: snapshot.KindSnapshot, content: "VolumeSnapshotContent", what: "snapshot", logKey: "snapshot",
	classField: "volumeSnapshotClassName", refField: "volumeSnapshotRef",
	finalizers:       []string{snapshot.FinalizerSnapshotBound, snapshot.FinalizerSnapshotAsSource, snapshot.FinalizerSnapshotInGroup},
	contentFinalizer: snapshot.FinalizerContentBound,
	ops:              snapshotOps,
	misbound:         snapshot.ReasonSnapshotMisbound, contentMissing: snapshot.ReasonSnapshotContentMissing,
	createFailed: snapshot.ReasonCreateSnapshotContentFailed,
	ready:        snapshot.ReasonSnapshotReady, readyMessage: "Snapshot %s/%s is ready to use.",
}

// snap is a VolumeSnapshot's hooks in the lifecycle.
type snap struct {
	c *Controller
	*snapv1.VolumeSnapshot
}

// snap is the scope of one sync of vs.
func (c *Controller) snap(vs *snapv1.VolumeSnapshot) *scope {
	s := snap{c: c, VolumeSnapshot: vs}
	sc := &scope{hooks: s, obj: vs, names: &snapshotNames, classes: snapshotClasses, class: s.class(),
		namedContent: s.namedContent(), boundName: s.boundName(), status: s.currentStatus(), problem: s.specProblem()}
	if content := c.contentOf(vs); content != nil {
		sc.content = s.bindTo(content)
	}
	return sc
}

func (s snap) class() string                                       { return ptr.Deref(s.Spec.VolumeSnapshotClassName, "") }
func (s snap) finalizersFor(policy snapv1.DeletionPolicy) []string { return snapshotFinalizers(policy) }
func (s snap) namedContent() string                                { return ptr.Deref(s.Spec.Source.VolumeSnapshotContentName, "") }
func (s snap) waitsForGroup() bool                                 { return isMember(s.VolumeSnapshot) }
func (s snap) classDriver() string                                 { return s.c.classDriver(s.class()) }

func (s snap) specProblem() *problem {
	if msg := snapshot.SnapshotSpecError(s.VolumeSnapshot); msg != "" {
		return &problem{Reason: snapshot.ReasonSnapshotValidationError, Message: msg}
	}
	return nil
}

func (s snap) boundName() string {
	if s.Status == nil {
		return ""
	}
	return ptr.Deref(s.Status.BoundVolumeSnapshotContentName, "")
}

func (s snap) currentStatus() *statusView {
	st := s.Status
	if st == nil {
		return nil
	}
	return &statusView{Content: st.BoundVolumeSnapshotContentName, CreationTime: st.CreationTime, ReadyToUse: st.ReadyToUse,
		RestoreSize: st.RestoreSize, Error: st.Error, Group: st.VolumeGroupSnapshotName}
}

func (s snap) statusPatch(st *statusView) map[string]any {
	return map[string]any{
		"boundVolumeSnapshotContentName": st.Content,
		"creationTime":                   st.CreationTime,
		"readyToUse":                     st.ReadyToUse,
		"restoreSize":                    st.RestoreSize,
		"error":                          st.Error,
		"volumeGroupSnapshotName":        st.Group,
	}
}

func (s snap) findNamedContent() (*boundContent, *problem) {
	content, prob := checkNamedContent(snapshotNamedContent, s.namedContent(), s.c.contents.Get,
		func(content *snapv1.VolumeSnapshotContent) namedContentFacts {
			return namedContentFacts{ref: content.Spec.VolumeSnapshotRef, dynamic: content.Spec.Source.SnapshotHandle == nil, deleting: content.DeletionTimestamp != nil}
		}, s.Namespace, s.Name, s.UID)
	if prob != nil {
		return nil, prob
	}
	return s.bindTo(content), nil
}

func (s snap) plan(ctx context.Context) (*dynamicPlan, *problem) {
	plan, prob := s.c.planContent(ctx, s.VolumeSnapshot)
	if prob != nil {
		return nil, prob
	}
	return &dynamicPlan{
		finalizers: snapshotFinalizers(plan.class.DeletionPolicy),
		class:      plan.class.Name,
		claim:      plan.pvc,
		content:    s.bindTo(s.c.newContent(s.VolumeSnapshot, plan)),
	}, nil
}

// releaseSource: the source claim may go.
func (s snap) releaseSource() {
	if pvc := s.Spec.Source.PersistentVolumeClaimName; pvc != nil {
		s.c.pvcLoop.Add(objKey(s.Namespace, *pvc))
	}
}

// deletionBlocker: a claim restoring from the snapshot, or its live group.
func (s snap) deletionBlocker() string {
	vs := s.VolumeSnapshot
	if restoring := s.c.restoringClaims(vs); len(restoring) > 0 {
		return fmt.Sprintf("Snapshot is being deleted; it and its content stay until claim %s finishes restoring from it", restoring[0])
	}
	if g := s.c.groupOf(vs, s.c.contentOf(vs)); s.c.liveGroup(vs.Namespace, g) != nil {
		return fmt.Sprintf("Snapshot %s/%s is a member of group snapshot %s and cannot be deleted on its own; delete VolumeGroupSnapshot %s/%s to delete all its members",
			vs.Namespace, vs.Name, g, vs.Namespace, g)
	}
	return ""
}

func (s snap) ownContent(ctx context.Context) (*boundContent, error) {
	content, err := s.c.ownContent(ctx, s.VolumeSnapshot)
	if content == nil || err != nil {
		return nil, err
	}
	return s.bindTo(content), nil
}

func (s snap) patchMeta(ctx context.Context, p *writer.Patch) error {
	_, err := s.c.cfg.Writer.PatchSnapshot(ctx, s.VolumeSnapshot, p)
	return err
}

func (s snap) patchStatus(ctx context.Context, fields map[string]any) error {
	_, err := s.c.cfg.Writer.PatchSnapshotStatus(ctx, s.VolumeSnapshot, fields)
	return err
}

func (s snap) readLive(ctx context.Context) (object, error) {
	live, err := s.c.cfg.Snap.SnapshotV1().VolumeSnapshots(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return live, err
}

// snapContent is a VolumeSnapshotContent's hooks as the content of
// snapshot s, both typed. s is zero for the content of a snapshot that
// vanished: only its deletion runs.
type snapContent struct {
	*snapv1.VolumeSnapshotContent
	s snap
}

// bindTo is content as the content of s.
func (s snap) bindTo(content *snapv1.VolumeSnapshotContent) *boundContent {
	return &boundContent{contentHooks: snapContent{content, s}, obj: content, beingDeleted: snapshot.AnnBeingDeleted,
		policy: content.Spec.DeletionPolicy, driver: content.Spec.Driver, ref: content.Spec.VolumeSnapshotRef,
		className: content.Spec.VolumeSnapshotClassName, dynamic: content.Spec.Source.SnapshotHandle == nil}
}

// snapContentStatus is what a content's status says, in the snapshot's
// shape.
func snapContentStatus(content *snapv1.VolumeSnapshotContent) statusView {
	cs := content.Status
	if cs == nil {
		return statusView{}
	}
	out := statusView{ReadyToUse: cs.ReadyToUse, Error: cs.Error}
	if cs.CreationTime != nil {
		t := metav1.NewTime(time.Unix(0, *cs.CreationTime))
		out.CreationTime = &t
	}
	if cs.RestoreSize != nil {
		out.RestoreSize = resource.NewQuantity(*cs.RestoreSize, resource.BinarySI)
	}
	return out
}

// boundMetadata: a Retain content leaves the bound finalizer off, and a
// pre-provisioned member is adopted by its live group.
func (b snapContent) boundMetadata(p *writer.Patch) {
	s, vs := b.s, b.s.VolumeSnapshot
	if b.Spec.DeletionPolicy == snapv1.VolumeSnapshotContentRetain {
		p.Meta.RemoveFinalizers(vs, snapshot.FinalizerSnapshotBound)
	}
	group := s.c.groupOf(vs, b.VolumeSnapshotContent)
	if g := s.c.liveGroup(vs.Namespace, group); g != nil && snapshot.GroupOwner(vs) == "" {
		p.Meta.AddOwnerReference(vs, snapshot.GroupOwnerReference(g))
		p.Meta.AddFinalizers(vs, snapshot.FinalizerSnapshotInGroup)
	}
}

// targetStatus is the content's status, with the group the snapshot is a
// member of and the error of a driver without a CSI side.
func (b snapContent) targetStatus(context.Context) (*target, error) {
	s, vsc := b.s, b.VolumeSnapshotContent
	st := statusFromContent(vsc.Name, snapContentStatus(vsc), true)
	if group := s.c.groupOf(s.VolumeSnapshot, vsc); group != "" {
		st.Group = &group
	}
	noCSI, lookAgain := s.c.presence.check(s.VolumeSnapshot, vsc, time.Now())
	return &target{status: st, noCSI: noCSI, lookAgain: lookAgain}, nil
}

func (s snapContent) create(ctx context.Context, w *writer.Writer) error {
	_, err := w.CreateContent(ctx, s.VolumeSnapshotContent)
	return err
}

func (s snapContent) patchMeta(ctx context.Context, w *writer.Writer, p *writer.Patch) error {
	_, err := w.PatchContent(ctx, s.VolumeSnapshotContent, p)
	return err
}

func (s snapContent) delete(ctx context.Context, w *writer.Writer) error {
	return w.DeleteContent(ctx, s.VolumeSnapshotContent)
}
