package binder

import (
	"context"
	"fmt"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/pkg/cachelag"
	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
)

// ensureMembers makes the member VolumeSnapshot and VolumeSnapshotContent of
// every volume the driver reported for a dynamic group, and keeps each
// member content's status in line with the group: its snapshot handle and
// size, ready when the group is. It reports whether every member exists.
// Members are created snapshot first, so the content is born bound to the
// snapshot's UID: two creates and one status write per member.
func (c *Controller) ensureMembers(ctx context.Context, g *groupv1.VolumeGroupSnapshot, content *groupv1.VolumeGroupSnapshotContent) (bool, error) {
	if content.Spec.Source.GroupSnapshotHandles != nil {
		return true, nil // pre-provisioned: members are the user's, adopted by their snapshots
	}
	st := content.Status
	if st == nil || st.VolumeGroupSnapshotHandle == nil || len(st.VolumeSnapshotInfoList) == 0 {
		return false, nil // not cut yet
	}
	for _, info := range st.VolumeSnapshotInfoList {
		vs, err := c.ensureMemberSnapshot(ctx, g, content, info.VolumeHandle)
		if err != nil {
			return false, err
		}
		member, err := c.ensureMemberContent(ctx, vs, content, info.VolumeHandle)
		if err != nil {
			return false, err
		}
		if err := c.syncMemberStatus(ctx, member, content, info); err != nil {
			return false, err
		}
	}
	return true, nil
}

func (c *Controller) ensureMemberSnapshot(ctx context.Context, g *groupv1.VolumeGroupSnapshot, content *groupv1.VolumeGroupSnapshotContent, handle string) (*snapv1.VolumeSnapshot, error) {
	name := snapshot.MemberSnapshotName(g.UID, handle)
	if vs, err := c.snapshots.VolumeSnapshots(g.Namespace).Get(name); err == nil {
		return vs, nil
	}
	if vs, ok := cachelag.Created[*snapv1.VolumeSnapshot](c.lag, g.Namespace, name); ok {
		return vs, nil
	}
	claim := ""
	if pv := c.volumeByHandle(content.Spec.Driver, handle); pv != nil && pv.Spec.ClaimRef != nil {
		claim = pv.Spec.ClaimRef.Name
	}
	vs := &snapv1.VolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       g.Namespace,
			OwnerReferences: []metav1.OwnerReference{snapshot.GroupOwnerReference(g)},
			Finalizers: append([]string{snapshot.FinalizerSnapshotInGroup},
				snapshotFinalizers(content.Spec.DeletionPolicy)...),
		},
		Spec: snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{PersistentVolumeClaimName: &claim}},
	}
	out, err := c.cfg.Writer.CreateSnapshot(ctx, vs)
	if apierrors.IsAlreadyExists(err) {
		return c.cfg.Snap.SnapshotV1().VolumeSnapshots(g.Namespace).Get(ctx, name, metav1.GetOptions{})
	}
	return out, err
}

func (c *Controller) ensureMemberContent(ctx context.Context, vs *snapv1.VolumeSnapshot, group *groupv1.VolumeGroupSnapshotContent, handle string) (*snapv1.VolumeSnapshotContent, error) {
	name := snapshot.MemberContentNameOf(vs.Name)
	if content, err := c.contents.Get(name); err == nil {
		return content, nil
	}
	if content, ok := cachelag.Created[*snapv1.VolumeSnapshotContent](c.lag, "", name); ok {
		return content, nil
	}
	volumeHandle := handle
	member := &snapv1.VolumeSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{snapshot.AnnVolumeGroupSnapshotHandle: *group.Status.VolumeGroupSnapshotHandle},
			Finalizers:  []string{snapshot.FinalizerContentBound},
		},
		Spec: snapv1.VolumeSnapshotContentSpec{
			// Kind, namespace, name and uid: the community's member
			// reference has no apiVersion.
			VolumeSnapshotRef: corev1.ObjectReference{
				Kind:      snapshot.KindSnapshot,
				Namespace: vs.Namespace,
				Name:      vs.Name,
				UID:       vs.UID,
			},
			DeletionPolicy: group.Spec.DeletionPolicy,
			Driver:         group.Spec.Driver,
			Source:         snapv1.VolumeSnapshotContentSource{VolumeHandle: &volumeHandle},
		},
	}
	if n, ns := group.Annotations[snapshot.AnnGroupDeletionSecretName], group.Annotations[snapshot.AnnGroupDeletionSecretNamespace]; n != "" && ns != "" {
		member.Annotations[snapshot.AnnDeletionSecretName] = n
		member.Annotations[snapshot.AnnDeletionSecretNamespace] = ns
	}
	if pv := c.volumeByHandle(group.Spec.Driver, handle); pv != nil && c.cfg.SourceVolumeMode {
		mode := corev1.PersistentVolumeFilesystem
		if pv.Spec.VolumeMode != nil {
			mode = *pv.Spec.VolumeMode
		}
		member.Spec.SourceVolumeMode = &mode
	}
	out, err := c.cfg.Writer.CreateContent(ctx, member)
	if apierrors.IsAlreadyExists(err) {
		return c.cfg.Snap.SnapshotV1().VolumeSnapshotContents().Get(ctx, name, metav1.GetOptions{})
	}
	return out, err
}

// syncMemberStatus writes what the driver said of one member into its
// content's status; ready once the member or the whole group is.
func (c *Controller) syncMemberStatus(ctx context.Context, member *snapv1.VolumeSnapshotContent, group *groupv1.VolumeGroupSnapshotContent, info groupv1.VolumeSnapshotInfo) error {
	if member.Spec.VolumeSnapshotRef.UID == "" {
		return fmt.Errorf("member content %s is not bound to its snapshot", member.Name)
	}
	want := map[string]any{}
	cur := member.Status
	if cur == nil {
		cur = &snapv1.VolumeSnapshotContentStatus{}
	}
	if cur.SnapshotHandle == nil || *cur.SnapshotHandle != info.SnapshotHandle {
		want["snapshotHandle"] = info.SnapshotHandle
	}
	if cur.VolumeGroupSnapshotHandle == nil {
		want["volumeGroupSnapshotHandle"] = *group.Status.VolumeGroupSnapshotHandle
	}
	if cur.CreationTime == nil {
		switch {
		case info.CreationTime != nil && *info.CreationTime > 0:
			want["creationTime"] = *info.CreationTime
		case group.Status.CreationTime != nil:
			want["creationTime"] = group.Status.CreationTime.UnixNano()
		}
	}
	if cur.RestoreSize == nil && info.RestoreSize != nil && *info.RestoreSize > 0 {
		want["restoreSize"] = *info.RestoreSize
	}
	ready := (info.ReadyToUse != nil && *info.ReadyToUse) || groupContentReady(group)
	if cur.ReadyToUse == nil || *cur.ReadyToUse != ready {
		want["readyToUse"] = ready
	}
	if len(want) == 0 {
		return nil
	}
	_, err := c.cfg.Writer.PatchContentStatus(ctx, member, want)
	return err
}

// volumeByHandle finds the PersistentVolume of a CSI volume handle, or nil.
func (c *Controller) volumeByHandle(driver, handle string) *corev1.PersistentVolume {
	objs, err := c.pvIndex.ByIndex(indexByVolumeHandle, driver+"/"+handle)
	if err != nil || len(objs) != 1 {
		return nil
	}
	pv, _ := objs[0].(*corev1.PersistentVolume)
	return pv
}

// groupOf names the group a snapshot belongs to: the owner of a member, or,
// for a pre-provisioned member whose content carries a backend group id,
// the group bound to the group content with that id. "" when none.
func (c *Controller) groupOf(vs *snapv1.VolumeSnapshot, content *snapv1.VolumeSnapshotContent) string {
	if g, stated := statedGroup(vs); stated {
		return g
	}
	if c.groupContentIndex == nil || content == nil || content.Status == nil || content.Status.VolumeGroupSnapshotHandle == nil {
		return ""
	}
	objs, err := c.groupContentIndex.ByIndex(indexByGroupHandle, *content.Status.VolumeGroupSnapshotHandle)
	if err != nil {
		return ""
	}
	for _, o := range objs {
		if gc, ok := o.(*groupv1.VolumeGroupSnapshotContent); ok && gc.Spec.VolumeGroupSnapshotRef.Namespace == vs.Namespace {
			return gc.Spec.VolumeGroupSnapshotRef.Name
		}
	}
	return ""
}

// statedGroup is the group a snapshot itself names: the owner of a member,
// else the group its status shows (once the garbage collector stripped the
// owner reference of a group deleted with Orphan propagation, the status
// still names it); stated is false when it names none.
func statedGroup(vs *snapv1.VolumeSnapshot) (name string, stated bool) {
	if g := snapshot.GroupOwner(vs); g != "" {
		return g, true
	}
	if vs.Status != nil && vs.Status.VolumeGroupSnapshotName != nil {
		return *vs.Status.VolumeGroupSnapshotName, true
	}
	return "", false
}

// liveGroup returns the group named name in vs's namespace, or nil.
func (c *Controller) liveGroup(namespace, name string) *groupv1.VolumeGroupSnapshot {
	if c.groups == nil || name == "" {
		return nil
	}
	g, err := c.groups.VolumeGroupSnapshots(namespace).Get(name)
	if err != nil {
		return nil
	}
	return g
}

// isMember reports whether vs is a member of a dynamic group (made by
// ensureMembers): it is never given a content of its own.
func isMember(vs *snapv1.VolumeSnapshot) bool { return snapshot.GroupOwner(vs) != "" }

// groupMembers are the snapshots a group owns: by owner reference (by
// name, and by UID where the reference carries one: an earlier group of
// the same name owns its own), and, for a dynamic group, the members named
// after its UID and the volumes its content lists. The names matter when
// the group is deleted with Orphan propagation: the garbage collector
// strips the owner references while the binder deletes the members, and a
// member it stripped first would otherwise stay behind.
func (c *Controller) groupMembers(g *groupv1.VolumeGroupSnapshot) []*snapv1.VolumeSnapshot {
	objs, err := c.snapIndex.ByIndex(indexByGroup, objKey(g.Namespace, g.Name))
	if err != nil {
		return nil
	}
	out := make([]*snapv1.VolumeSnapshot, 0, len(objs))
	seen := map[string]bool{}
	for _, o := range objs {
		if vs, ok := o.(*snapv1.VolumeSnapshot); ok && ownedBy(vs, g) {
			out = append(out, vs)
			seen[vs.Name] = true
		}
	}
	content := c.groupContentOf(g)
	if content == nil || content.Spec.Source.GroupSnapshotHandles != nil || content.Status == nil {
		return out // none, or pre-provisioned: its members are the user's
	}
	for _, info := range content.Status.VolumeSnapshotInfoList {
		name := snapshot.MemberSnapshotName(g.UID, info.VolumeHandle)
		if seen[name] {
			continue
		}
		if vs, err := c.snapshots.VolumeSnapshots(g.Namespace).Get(name); err == nil {
			out = append(out, vs)
			seen[name] = true
		}
	}
	return out
}

func ownedBy(vs *snapv1.VolumeSnapshot, g *groupv1.VolumeGroupSnapshot) bool {
	for _, o := range vs.OwnerReferences {
		if o.Kind == snapshot.KindGroupSnapshot && o.Name == g.Name {
			return o.UID == "" || g.UID == "" || o.UID == g.UID
		}
	}
	return false
}
