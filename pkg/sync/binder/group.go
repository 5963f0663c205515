package binder

import (
	"context"
	"fmt"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/snapkeeper/snapkeeper/pkg/cachelag"
	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/sync/workloop"
	"github.com/snapkeeper/snapkeeper/pkg/writer"
)

// syncGroup syncs one VolumeGroupSnapshot through the lifecycle, after
// tearing down any vanished group of its name (vanished_group.go).
func (c *Controller) syncGroup(ctx context.Context, key string) (workloop.Result, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return workloop.Result{}, nil
	}
	g, err := c.groups.VolumeGroupSnapshots(ns).Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return workloop.Result{}, err
	}
	if verr := c.cleanVanishedGroups(ctx, key, g); verr != nil {
		return workloop.Result{}, verr
	}
	if err != nil {
		return workloop.Result{}, nil // gone
	}
	return c.sync(ctx, c.group(g))
}

// groupContentOf returns the content a group is (or will be) bound to, from
// the cache or as we created it a moment ago, or nil.
func (c *Controller) groupContentOf(g *groupv1.VolumeGroupSnapshot) *groupv1.VolumeGroupSnapshotContent {
	name := c.groupContentName(g)
	if content, err := c.groupContents.Get(name); err == nil {
		return content
	}
	if content, ok := cachelag.Created[*groupv1.VolumeGroupSnapshotContent](c.lag, "", name); ok {
		return content
	}
	return nil
}

// groupContentName names the content a group is (or will be) bound to.
func (c *Controller) groupContentName(g *groupv1.VolumeGroupSnapshot) string {
	switch {
	case g.Spec.Source.VolumeGroupSnapshotContentName != nil:
		return *g.Spec.Source.VolumeGroupSnapshotContentName
	case g.Status != nil && g.Status.BoundVolumeGroupSnapshotContentName != nil:
		return *g.Status.BoundVolumeGroupSnapshotContentName
	}
	return snapshot.GroupContentNameFor(g.UID)
}

func groupContentReady(content *groupv1.VolumeGroupSnapshotContent) bool {
	return content.Status != nil && content.Status.ReadyToUse != nil && *content.Status.ReadyToUse
}

// groupNames are a VolumeGroupSnapshot's names for the lifecycle's rules,
// with the community's group events.
var groupNames = kindNames{
	subject: snapshot.KindGroupSnapshot, content: "VolumeGroupSnapshotContent", what: "group snapshot", logKey: "group",
	classField: "volumeGroupSnapshotClassName", refField: "volumeGroupSnapshotRef",
	finalizers:       []string{snapshot.FinalizerGroupSnapshotBound},
	contentFinalizer: snapshot.FinalizerGroupContentBound,
	keepContentClass: true,
	ops:              groupOps,
	misbound:         snapshot.ReasonGroupSnapshotContentMisbound, contentMissing: snapshot.ReasonGroupSnapshotContentMissing,
	createFailed: snapshot.ReasonCreateGroupSnapshotContentFailed,
	creating:     snapshot.ReasonCreatingGroupSnapshot, creatingMessage: "Waiting for group snapshot %s/%s to be created by the CSI driver.",
	created: snapshot.ReasonGroupSnapshotCreated, createdMessage: "GroupSnapshot %s/%s was successfully created by the CSI driver.",
	ready: snapshot.ReasonGroupSnapshotReady, readyMessage: "GroupSnapshot %s/%s is ready to use.",
}

// group is a VolumeGroupSnapshot's hooks in the lifecycle: the selector's
// plan, the members made once the driver cut the group (ready only when
// they all exist), and the members restoring and deleted with it.
type group struct {
	c *Controller
	*groupv1.VolumeGroupSnapshot
}

// group is the scope of one sync of g.
func (c *Controller) group(g *groupv1.VolumeGroupSnapshot) *scope {
	gs := group{c: c, VolumeGroupSnapshot: g}
	sc := &scope{hooks: gs, obj: g, names: &groupNames, classes: groupClasses, class: gs.class(),
		namedContent: gs.namedContent(), boundName: gs.boundName(), status: gs.currentStatus(), problem: gs.specProblem()}
	if content := c.groupContentOf(g); content != nil {
		sc.content = gs.bindTo(content)
	}
	return sc
}

func (g group) class() string                                { return ptr.Deref(g.Spec.VolumeGroupSnapshotClassName, "") }
func (g group) finalizersFor(snapv1.DeletionPolicy) []string { return groupNames.finalizers }
func (g group) namedContent() string {
	return ptr.Deref(g.Spec.Source.VolumeGroupSnapshotContentName, "")
}
func (g group) boundName() string {
	return ptr.Deref(groupStatus(g).BoundVolumeGroupSnapshotContentName, "")
}

func (g group) findNamedContent() (*boundContent, *problem) {
	content, prob := checkNamedContent(groupNamedContent, g.namedContent(), g.c.groupContents.Get,
		func(content *groupv1.VolumeGroupSnapshotContent) namedContentFacts {
			return namedContentFacts{ref: content.Spec.VolumeGroupSnapshotRef, dynamic: content.Spec.Source.GroupSnapshotHandles == nil, deleting: content.DeletionTimestamp != nil}
		}, g.Namespace, g.Name, g.UID)
	if prob != nil {
		return nil, prob
	}
	return g.bindTo(content), nil
}

func (g group) plan(ctx context.Context) (*dynamicPlan, *problem) {
	plan, prob := g.c.planGroup(ctx, g.VolumeGroupSnapshot)
	if prob != nil {
		return nil, prob
	}
	return &dynamicPlan{finalizers: groupNames.finalizers, class: plan.class.Name, content: g.bindTo(newGroupContent(g.VolumeGroupSnapshot, plan))}, nil
}

// dynamicMismatch: a pre-provisioned content named like a dynamic group's.
func (g group) dynamicMismatch(content *boundContent) *problem {
	if content.dynamic {
		return nil
	}
	return problemf(snapshot.ReasonGroupSnapshotContentMismatch,
		"VolumeGroupSnapshotContent %q is pre-provisioned (spec.source.groupSnapshotHandles) but this group takes a new snapshot of its selector's claims; delete that content",
		content.obj.GetName())
}

func groupStatus(g group) *groupv1.VolumeGroupSnapshotStatus {
	if g.Status == nil {
		return &groupv1.VolumeGroupSnapshotStatus{}
	}
	return g.Status
}

func (g group) specProblem() *problem {
	src := g.Spec.Source
	if (src.Selector == nil) == (src.VolumeGroupSnapshotContentName == nil) {
		return problemf(snapshot.ReasonGroupSnapshotValidationError,
			"exactly one of spec.source.selector and spec.source.volumeGroupSnapshotContentName must be set; delete the VolumeGroupSnapshot and create it with one of them")
	}
	return nil
}

func (g group) currentStatus() *statusView {
	st := g.Status
	if st == nil {
		return nil
	}
	return &statusView{Content: st.BoundVolumeGroupSnapshotContentName, CreationTime: st.CreationTime, ReadyToUse: st.ReadyToUse, Error: st.Error}
}

func (g group) statusPatch(st *statusView) map[string]any {
	return map[string]any{
		"boundVolumeGroupSnapshotContentName": st.Content,
		"creationTime":                        st.CreationTime,
		"readyToUse":                          st.ReadyToUse,
		"error":                               st.Error,
	}
}

// deletionBlocker: a claim restoring from any member.
func (g group) deletionBlocker() string {
	for _, vs := range g.c.groupMembers(g.VolumeGroupSnapshot) {
		if restoring := g.c.restoringClaims(vs); len(restoring) > 0 {
			return fmt.Sprintf("Group snapshot is being deleted; it and its members stay until claim %s finishes restoring from member %s", restoring[0], vs.Name)
		}
	}
	return ""
}

func (g group) ownContent(context.Context) (*boundContent, error) {
	content := g.c.groupContentOf(g.VolumeGroupSnapshot)
	if content == nil || content.Spec.VolumeGroupSnapshotRef.UID != g.UID {
		return nil, nil // none, or not ours: never touch it
	}
	return g.bindTo(content), nil
}

// deleteOwned deletes the members; each is released once the group is gone
// (deleting).
func (g group) deleteOwned(ctx context.Context) error {
	for _, vs := range g.c.groupMembers(g.VolumeGroupSnapshot) {
		if vs.DeletionTimestamp != nil || g.c.lag.DeleteSent(vs.UID) {
			continue
		}
		if err := g.c.cfg.Writer.DeleteSnapshot(ctx, vs); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

func (g group) classDriver() string {
	if g.c.groupClasses == nil || g.class() == "" {
		return ""
	}
	if cl, err := g.c.groupClasses.Get(g.class()); err == nil {
		return cl.Driver
	}
	return ""
}

func (g group) patchMeta(ctx context.Context, p *writer.Patch) error {
	_, err := g.c.cfg.Writer.PatchGroup(ctx, g.VolumeGroupSnapshot, p)
	return err
}

func (g group) patchStatus(ctx context.Context, fields map[string]any) error {
	_, err := g.c.cfg.Writer.PatchGroupStatus(ctx, g.VolumeGroupSnapshot, fields)
	return err
}

func (g group) readLive(ctx context.Context) (object, error) {
	live, err := g.c.cfg.Snap.GroupsnapshotV1().VolumeGroupSnapshots(g.Namespace).Get(ctx, g.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return live, err
}

// groupContent is a VolumeGroupSnapshotContent's hooks as the content of
// group g, both typed.
type groupContent struct {
	*groupv1.VolumeGroupSnapshotContent
	g group
}

// bindTo is content as the content of g.
func (g group) bindTo(content *groupv1.VolumeGroupSnapshotContent) *boundContent {
	return &boundContent{contentHooks: groupContent{content, g}, obj: content, beingDeleted: snapshot.AnnGroupBeingDeleted,
		policy: content.Spec.DeletionPolicy, driver: content.Spec.Driver, ref: content.Spec.VolumeGroupSnapshotRef,
		className: content.Spec.VolumeGroupSnapshotClassName, dynamic: content.Spec.Source.GroupSnapshotHandles == nil}
}

// targetStatus makes the members of a dynamic group the driver cut; the
// group is ready only once its content is and every member exists.
func (b groupContent) targetStatus(ctx context.Context) (*target, error) {
	complete, err := b.g.c.ensureMembers(ctx, b.g.VolumeGroupSnapshot, b.VolumeGroupSnapshotContent)
	if err != nil {
		p := problemf(snapshot.ReasonGroupSnapshotMemberFailed, "cannot create the member snapshots of the group: %v", err)
		p.cause = err
		return nil, p
	}
	var cs statusView
	if st := b.Status; st != nil {
		cs = statusView{ReadyToUse: st.ReadyToUse, Error: st.Error, CreationTime: st.CreationTime}
	}
	return &target{status: statusFromContent(b.Name, cs, complete)}, nil
}

func (g groupContent) create(ctx context.Context, w *writer.Writer) error {
	_, err := w.CreateGroupContent(ctx, g.VolumeGroupSnapshotContent)
	return err
}

func (g groupContent) patchMeta(ctx context.Context, w *writer.Writer, p *writer.Patch) error {
	_, err := w.PatchGroupContent(ctx, g.VolumeGroupSnapshotContent, p)
	return err
}

func (g groupContent) delete(ctx context.Context, w *writer.Writer) error {
	return w.DeleteGroupContent(ctx, g.VolumeGroupSnapshotContent)
}
