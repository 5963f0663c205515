package csiside

import (
	"context"
	"fmt"
	"sort"
	"time"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/snapkeeper/snapkeeper/pkg/csi"
	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/writer"
)

// groupNames are a VolumeGroupSnapshotContent's names for the lifecycle's
// rules.
var groupNames = &kindNames{
	beingCreated: snapshot.AnnGroupBeingCreated,
	beingDeleted: snapshot.AnnGroupBeingDeleted,
	finalizer:    snapshot.FinalizerGroupContentBound,
	reasonCreate: snapshot.ReasonGroupCreationFailed,
	reasonCheck:  snapshot.ReasonGroupCheckFailed,
	reasonDelete: snapshot.ReasonGroupDeleteError,
	createCall:   "CreateVolumeGroupSnapshot",
	deleteCall:   "DeleteVolumeGroupSnapshot",
	what:         "group snapshot",
	checkFailed:  "Failed to check and update group snapshot content: ",
	logKey:       "groupContent",
}

// groupContentItem is a VolumeGroupSnapshotContent's hooks in the
// lifecycle. Its members' backend snapshots are cut and deleted by its
// calls.
type groupContentItem struct {
	c *Controller
	*groupv1.VolumeGroupSnapshotContent
}

// group is the item of one sync of content.
func (c *Controller) group(content *groupv1.VolumeGroupSnapshotContent) *item {
	g := groupContentItem{c: c, VolumeGroupSnapshotContent: content}
	st := content.Status
	it := &item{hooks: g, obj: content, names: groupNames, key: groupKey(content.Name),
		ours: c.handles(content.Spec.Driver, content), snapshotUID: content.Spec.VolumeGroupSnapshotRef.UID,
		deletes: content.Spec.DeletionPolicy == snapv1.VolumeSnapshotContentDelete, dynamic: len(content.Spec.Source.VolumeHandles) > 0,
		statusHandle: g.statusHandle(), knownHandle: g.knownHandle(),
		ready: st != nil && st.ReadyToUse != nil && *st.ReadyToUse, readyUnset: st == nil || st.ReadyToUse == nil}
	if st != nil && st.Error != nil && st.Error.Message != nil {
		it.errorMessage = *st.Error.Message
	}
	return it
}

// groupKey keeps the group contents' backoffs apart from the contents'.
func groupKey(name string) string { return "group/" + name }

func (g groupContentItem) statusHandle() string {
	if st := g.Status; st != nil && st.VolumeGroupSnapshotHandle != nil {
		return *st.VolumeGroupSnapshotHandle
	}
	return ""
}

// knownHandle is the backend group id the content knows, from its status
// or (pre-provisioned) its source.
func (g groupContentItem) knownHandle() string {
	if h := g.statusHandle(); h != "" {
		return h
	}
	if h := g.Spec.Source.GroupSnapshotHandles; h != nil {
		return h.VolumeGroupSnapshotHandle
	}
	return ""
}

func (g groupContentItem) prepareCut(ctx context.Context) (cutCall, error) {
	req, err := g.c.groupCreateRequest(ctx, g.VolumeGroupSnapshotContent)
	if err != nil {
		return cutCall{}, err
	}
	return cutCall{
		name:   req.Name,
		logKVs: []any{"volumes", req.SourceVolumeIDs},
		run: func(ctx context.Context) (answer, error) {
			gs, err := g.c.groups.driver.CreateGroupSnapshot(ctx, req)
			if err != nil {
				return answer{}, err
			}
			return groupAnswer(gs), nil
		},
	}, nil
}

// read polls a cut group: CreateVolumeGroupSnapshot again for a dynamic
// content (idempotent by name), GetVolumeGroupSnapshot with the class's
// get secret for a pre-provisioned one.
func (g groupContentItem) read(ctx context.Context) (answer, error) {
	h := g.Spec.Source.GroupSnapshotHandles
	if h == nil {
		call, err := g.prepareCut(ctx)
		if err != nil {
			return answer{}, err
		}
		return call.run(ctx)
	}
	secrets, err := g.c.groupGetSecrets(ctx, g.VolumeGroupSnapshotContent)
	if err != nil {
		return answer{}, err
	}
	gs, err := g.c.groups.driver.GetGroupSnapshot(ctx, h.VolumeGroupSnapshotHandle, h.VolumeSnapshotHandles, secrets)
	if err != nil {
		return answer{}, err
	}
	if gs == nil {
		return answer{}, fmt.Errorf("the driver does not know group snapshot %q", h.VolumeGroupSnapshotHandle)
	}
	return groupAnswer(gs), nil
}

// deleteBackend calls DeleteVolumeGroupSnapshot with every member's
// snapshot id.
func (g groupContentItem) deleteBackend(ctx context.Context, handle string) error {
	secrets, err := g.c.secret(ctx, g.Annotations[snapshot.AnnGroupDeletionSecretNamespace], g.Annotations[snapshot.AnnGroupDeletionSecretName])
	if err != nil {
		return err
	}
	return g.c.groups.driver.DeleteGroupSnapshot(ctx, handle, g.memberIDs(), secrets)
}

func (g groupContentItem) statusFor(a answer, now time.Time) map[string]any {
	return groupStatusFrom(g.VolumeGroupSnapshotContent, a.group, now)
}

func (g groupContentItem) handleCleared() map[string]any {
	return map[string]any{"volumeGroupSnapshotHandle": nil, "readyToUse": nil}
}

func (g groupContentItem) patchMeta(ctx context.Context, p *writer.Patch) (*item, error) {
	out, err := g.c.cfg.Writer.PatchGroupContent(ctx, g.VolumeGroupSnapshotContent, p)
	if err != nil {
		return nil, err
	}
	return g.c.group(out), nil
}

func (g groupContentItem) patchStatus(ctx context.Context, fields map[string]any) (*item, error) {
	out, err := g.c.cfg.Writer.PatchGroupContentStatus(ctx, g.VolumeGroupSnapshotContent, fields)
	if err != nil {
		return nil, err
	}
	return g.c.group(out), nil
}

func (g groupContentItem) liveVersion(ctx context.Context) (string, error) {
	live, err := g.c.cfg.Snap.GroupsnapshotV1().VolumeGroupSnapshotContents().Get(ctx, g.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return live.ResourceVersion, nil
}

// groupStatusFrom returns the status fields that differ from the driver's
// answer. The first creation time and member list are kept; a driver that
// gives no creation time gets the time of its answer.
func groupStatusFrom(content *groupv1.VolumeGroupSnapshotContent, group *csi.GroupSnapshot, now time.Time) map[string]any {
	cur := content.Status
	if cur == nil {
		cur = &groupv1.VolumeGroupSnapshotContentStatus{}
	}
	out := map[string]any{}
	if cur.VolumeGroupSnapshotHandle == nil {
		out["volumeGroupSnapshotHandle"] = group.ID
	}
	if cur.CreationTime == nil {
		t := group.CreationTime
		if t.IsZero() {
			t = now
		}
		out["creationTime"] = metav1.NewTime(t)
	}
	if cur.ReadyToUse == nil || *cur.ReadyToUse != group.ReadyToUse {
		out["readyToUse"] = group.ReadyToUse
	}
	if cur.Error != nil {
		out["error"] = nil
	}
	if len(cur.VolumeSnapshotInfoList) == 0 && len(group.Snapshots) > 0 && content.Spec.Source.GroupSnapshotHandles == nil {
		infos := make([]groupv1.VolumeSnapshotInfo, 0, len(group.Snapshots))
		for _, s := range group.Snapshots {
			info := groupv1.VolumeSnapshotInfo{VolumeHandle: s.SourceVolumeID, SnapshotHandle: s.ID, ReadyToUse: &s.ReadyToUse}
			if !s.CreationTime.IsZero() {
				ns := s.CreationTime.UnixNano()
				info.CreationTime = &ns
			}
			if s.SizeBytes > 0 {
				size := s.SizeBytes
				info.RestoreSize = &size
			}
			infos = append(infos, info)
		}
		out["volumeSnapshotInfoList"] = infos
	}
	return out
}

// memberIDs are the snapshot ids of a group's members: from the status
// member list, from a pre-provisioned source, or, for a group stored
// before the member list existed (v1beta1 objects upgraded in place), from
// the member contents that carry the group's id.
func (g groupContentItem) memberIDs() []string {
	content := g.VolumeGroupSnapshotContent
	var ids []string
	if st := content.Status; st != nil {
		for _, info := range st.VolumeSnapshotInfoList {
			if info.SnapshotHandle != "" {
				ids = append(ids, info.SnapshotHandle)
			}
		}
	}
	if len(ids) > 0 {
		return ids
	}
	if h := content.Spec.Source.GroupSnapshotHandles; h != nil && len(h.VolumeSnapshotHandles) > 0 {
		return append([]string(nil), h.VolumeSnapshotHandles...)
	}
	handle := g.knownHandle()
	all, err := g.c.contents.List(labels.Everything())
	if err != nil || handle == "" {
		return nil
	}
	for _, m := range all {
		// Group handles are unique per driver only: another driver's
		// group (or a leftover one) may carry the same handle.
		if m.Spec.Driver == content.Spec.Driver && m.Annotations[snapshot.AnnVolumeGroupSnapshotHandle] == handle &&
			m.Status != nil && m.Status.SnapshotHandle != nil {
			ids = append(ids, *m.Status.SnapshotHandle)
		}
	}
	sort.Strings(ids)
	return ids
}
