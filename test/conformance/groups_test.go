package conformance

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

// Volume group snapshots: what a run observes and records of them, and the
// steps and conditions of the group scenarios.

// observeGroups reads the run's group snapshots (its namespace) and group
// contents (its driver, or naming its namespace), learns their UIDs and the
// names of their members, and the deletion policy of every group handle.
func (r *run) observeGroups(o *obs) error {
	groups, err := r.w.vgs.VolumeGroupSnapshots(r.ns).List(labels.Everything())
	if err != nil {
		return err
	}
	for _, g := range groups {
		o.vgs[g.Name] = g
		r.learnUID(string(g.UID), "VolumeGroupSnapshot/"+g.Name)
		r.learnMembers(g)
	}
	contents, err := r.w.vgsc.List(labels.Everything())
	if err != nil {
		return err
	}
	for _, c := range contents {
		if c.Spec.Driver != r.driverName() && c.Spec.VolumeGroupSnapshotRef.Namespace != r.ns {
			continue
		}
		o.vgsc[c.Name] = c
		r.learnUID(string(c.UID), "VolumeGroupSnapshotContent/"+r.norm(c.Name))
		if h := groupContentHandle(c); h != "" {
			r.handlePolicy[h] = c.Spec.DeletionPolicy
		}
	}
	return nil
}

// learnMembers learns the hash that names the member snapshot and content
// of group g for each of the run's volumes: sha256 of the group's UID and
// the volume handle, whoever computes it. A member shows as
// <member:group/claim>.
func (r *run) learnMembers(g *groupv1.VolumeGroupSnapshot) {
	if g.UID == "" {
		return
	}
	for handle, claim := range r.volumes {
		suffix := snapshot.GroupMemberSuffix(g.UID, handle)
		if _, ok := r.hashes[suffix]; !ok {
			r.hashes[suffix] = "<member:" + g.Name + "/" + claim + ">"
		}
	}
}

var hashRE = regexp.MustCompile(`[0-9a-f]{64}`)

// normHash replaces the hashes in group member names.
func (r *run) normHash(s string) string {
	return hashRE.ReplaceAllStringFunc(s, func(h string) string {
		if p, ok := r.hashes[h]; ok {
			return p
		}
		return "<hash:?>"
	})
}

// groupContentHandle is the backend group a group content holds: its
// status, or (pre-provisioned) its source.
func groupContentHandle(c *groupv1.VolumeGroupSnapshotContent) string {
	if c.Status != nil && c.Status.VolumeGroupSnapshotHandle != nil {
		return *c.Status.VolumeGroupSnapshotHandle
	}
	if h := c.Spec.Source.GroupSnapshotHandles; h != nil {
		return h.VolumeGroupSnapshotHandle
	}
	return ""
}

// groupCallArgs is the part of a group call's signature after its method:
// the name and volumes it cuts, or the group and members it is about.
func (r *run) groupCallArgs(e framework.CallLogEntry) string {
	if e.Method == "CreateVolumeGroupSnapshot" {
		vols := append([]string(nil), e.SourceVolumeIDs...)
		sort.Strings(vols)
		return " name=" + r.norm(e.Name) + " volumes=" + strings.Join(vols, ",")
	}
	return " group=" + r.handle(e.GroupSnapshotID) + " snapshots=" + r.handles(e.SnapshotIDs)
}

// handles names a set of snapshot ids, sorted.
func (r *run) handles(ids []string) string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		out = append(out, r.handle(id))
	}
	sort.Strings(out)
	return "[" + strings.Join(out, ",") + "]"
}

// groupObjects records every group snapshot and group content of the run
// under prefix p.
func (r *run) groupObjects(p string, o *obs, out outcome) {
	recordKind(r, p, "VolumeGroupSnapshot", o.vgs, asIs, out, r.recordGroup)
	recordKind(r, p, "VolumeGroupSnapshotContent", o.vgsc, r.norm, out, r.recordGroupContent)
}

func (r *run) recordGroup(pre string, g *groupv1.VolumeGroupSnapshot, out outcome) {
	setOptional(out, pre+"spec.volumeGroupSnapshotClassName", g.Spec.VolumeGroupSnapshotClassName, asIs)
	setOptional(out, pre+"spec.source.volumeGroupSnapshotContentName", g.Spec.Source.VolumeGroupSnapshotContentName, r.norm)
	if s := g.Spec.Source.Selector; s != nil {
		out.set(pre+"spec.source.selector", metav1.FormatLabelSelector(s))
	}
	if s := g.Status; statusSet(out, pre, s) {
		setOptional(out, pre+"status.boundVolumeGroupSnapshotContentName", s.BoundVolumeGroupSnapshotContentName, r.norm)
		r.recordStatus(pre, s.ReadyToUse, metaTime(s.CreationTime), s.Error, out)
	}
}

func (r *run) recordGroupContent(pre string, c *groupv1.VolumeGroupSnapshotContent, out outcome) {
	sp := c.Spec
	r.recordContentSpec(pre, "GroupSnapshot", sp.DeletionPolicy, sp.Driver, sp.VolumeGroupSnapshotClassName, sp.VolumeGroupSnapshotRef, out)
	if len(sp.Source.VolumeHandles) > 0 {
		vols := append([]string(nil), sp.Source.VolumeHandles...)
		sort.Strings(vols)
		out.set(pre+"spec.source.volumeHandles", strings.Join(vols, ","))
	}
	if h := sp.Source.GroupSnapshotHandles; h != nil {
		out.set(pre+"spec.source.groupSnapshotHandles", r.handle(h.VolumeGroupSnapshotHandle)+" "+r.handles(h.VolumeSnapshotHandles))
	}
	if s := c.Status; statusSet(out, pre, s) {
		setOptional(out, pre+"status.volumeGroupSnapshotHandle", s.VolumeGroupSnapshotHandle, r.handle)
		r.recordStatus(pre, s.ReadyToUse, metaTime(s.CreationTime), s.Error, out)
		for _, info := range s.VolumeSnapshotInfoList {
			ipre := pre + "status.volumeSnapshotInfoList[" + info.VolumeHandle + "]."
			out.set(ipre+"snapshotHandle", r.handle(info.SnapshotHandle))
			out.set(ipre+"readyToUse", boolStr(info.ReadyToUse))
			out.set(ipre+"creationTime", unixTime(info.CreationTime))
			setOptional(out, ipre+"restoreSize", info.RestoreSize, formatInt)
		}
	}
}

// cleanupGroups removes the run's group snapshots, group contents and group
// classes (finalizers stripped).
func (r *run) cleanupGroups(ctx context.Context, strip []byte) {
	groups := r.w.env.Snap.GroupsnapshotV1()
	if list, err := groups.VolumeGroupSnapshots(r.ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, g := range list.Items {
			_, _ = groups.VolumeGroupSnapshots(r.ns).Patch(ctx, g.Name, types.MergePatchType, strip, metav1.PatchOptions{})
			_ = groups.VolumeGroupSnapshots(r.ns).Delete(ctx, g.Name, metav1.DeleteOptions{})
		}
	}
	if list, err := groups.VolumeGroupSnapshotContents().List(ctx, metav1.ListOptions{}); err == nil {
		for _, c := range list.Items {
			if c.Spec.Driver != r.driverName() && c.Spec.VolumeGroupSnapshotRef.Namespace != r.ns {
				continue
			}
			_, _ = groups.VolumeGroupSnapshotContents().Patch(ctx, c.Name, types.MergePatchType, strip, metav1.PatchOptions{})
			_ = groups.VolumeGroupSnapshotContents().Delete(ctx, c.Name, metav1.DeleteOptions{})
		}
	}
	if r.sc.GroupClass {
		_ = groups.VolumeGroupSnapshotClasses().Delete(ctx, r.groupClassName(), metav1.DeleteOptions{})
	}
}

// driverArgs are the mock driver's flags: the scenario's volume sizes.
func (r *run) driverArgs() []string {
	if len(r.sc.VolumeSizes) == 0 {
		return nil
	}
	var sizes []string
	for claim, n := range r.sc.VolumeSizes {
		sizes = append(sizes, fmt.Sprintf("vol-%s=%d", claim, n))
	}
	sort.Strings(sizes)
	return []string{"--volume-sizes=" + strings.Join(sizes, ",")}
}

// skipGroupIDs makes the driver's group snapshot ids of this scenario
// unique in the run: every mock driver counts "group-1", "group-2", ...,
// and the community binder finds the group of a member content by its
// group snapshot id among the group contents of all drivers. Each group
// scenario first cuts and deletes as many groups as group scenarios come
// before it in the catalogue, times ten, before its CSI side starts (these
// calls belong to no step).
func (r *run) skipGroupIDs(ctx context.Context) error {
	n := 0
	for _, sc := range catalogue() {
		if sc.Name == r.sc.Name {
			break
		}
		if sc.GroupClass {
			n += 10
		}
	}
	for i := 0; i < n; i++ {
		id, _, err := r.cutGroup(ctx, fmt.Sprintf("skipped-%d", i), "vol-skipped")
		if err != nil {
			return err
		}
		if err := r.deleteBackendGroup(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// ---- actions for group steps ----

func (r *run) groupClassName() string { return "groupclass-" + r.sc.Name }

// groupClass creates the driver's default group class.
func (r *run) groupClass(ctx context.Context, name string, policy snapv1.DeletionPolicy) error {
	if policy == "" {
		policy = snapv1.VolumeSnapshotContentDelete
	}
	c := &groupv1.VolumeGroupSnapshotClass{
		ObjectMeta:     metav1.ObjectMeta{Name: name, Annotations: map[string]string{snapshot.AnnGroupDefaultClass: "true"}},
		Driver:         r.driverName(),
		DeletionPolicy: policy,
	}
	if _, err := r.w.env.Snap.GroupsnapshotV1().VolumeGroupSnapshotClasses().Create(ctx, c, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("group class %s: %w", name, err)
	}
	return nil
}

// labeledPVC creates a bound claim with labels.
func (r *run) labeledPVC(ctx context.Context, name string, lbls map[string]string) error {
	if err := r.pvc(ctx, name, framework.PVCOptions{}); err != nil {
		return err
	}
	return retryConflict(func() error {
		claims := r.w.env.Kube.CoreV1().PersistentVolumeClaims(r.ns)
		c, err := claims.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c.Labels == nil {
			c.Labels = map[string]string{}
		}
		for k, v := range lbls {
			c.Labels[k] = v
		}
		_, err = claims.Update(ctx, c, metav1.UpdateOptions{})
		return err
	})
}

// dbSelector picks the claims labelled app=db whose tier is data or logs:
// matchLabels and matchExpressions together.
func dbSelector() *metav1.LabelSelector {
	return &metav1.LabelSelector{
		MatchLabels: map[string]string{"app": "db"},
		MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"data", "logs"}},
		},
	}
}

// dbSizes are the driver's snapshot sizes of the db claims, one per claim,
// so that each member's restoreSize says which volume it is of.
var dbSizes = map[string]int64{"data-0": 1 << 30, "data-1": 2 << 30, "logs": 3 << 30, "cache": 4 << 30}

// dbClaims creates the three claims dbSelector matches and one it must not
// (tier=cache).
func dbClaims(ctx context.Context, r *run) error {
	for _, c := range []struct{ name, tier string }{{"data-0", "data"}, {"data-1", "data"}, {"logs", "logs"}, {"cache", "cache"}} {
		if err := r.labeledPVC(ctx, c.name, map[string]string{"app": "db", "tier": c.tier}); err != nil {
			return err
		}
	}
	return nil
}

// createGroup creates a dynamic VolumeGroupSnapshot of the claims sel
// chooses, without a class name (the driver's default group class).
func (r *run) createGroup(ctx context.Context, name string, sel *metav1.LabelSelector) error {
	return r.createVGS(ctx, name, groupv1.VolumeGroupSnapshotSource{Selector: sel})
}

// staticGroup creates a VolumeGroupSnapshot of an existing group content.
func (r *run) staticGroup(ctx context.Context, name, content string) error {
	return r.createVGS(ctx, name, groupv1.VolumeGroupSnapshotSource{VolumeGroupSnapshotContentName: &content})
}

func (r *run) createVGS(ctx context.Context, name string, src groupv1.VolumeGroupSnapshotSource) error {
	g := &groupv1.VolumeGroupSnapshot{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.ns},
		Spec: groupv1.VolumeGroupSnapshotSpec{Source: src}}
	out, err := r.w.env.Snap.GroupsnapshotV1().VolumeGroupSnapshots(r.ns).Create(ctx, g, metav1.CreateOptions{})
	if err == nil {
		r.learnUID(string(out.UID), "VolumeGroupSnapshot/"+name)
		r.learnMembers(out)
	}
	return err
}

func (r *run) deleteGroup(ctx context.Context, name string) error {
	return r.w.env.Snap.GroupsnapshotV1().VolumeGroupSnapshots(r.ns).Delete(ctx, name, metav1.DeleteOptions{})
}

// memberOf returns the name of group's member snapshot of claim (as both
// implementations name it).
func (r *run) memberOf(ctx context.Context, group, claim string) (string, error) {
	g, err := r.w.env.Snap.GroupsnapshotV1().VolumeGroupSnapshots(r.ns).Get(ctx, group, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return snapshot.MemberSnapshotName(g.UID, "vol-"+claim), nil
}

// cutGroup creates a group snapshot of volumes directly on the driver, as
// an admin or a backup tool would before importing it, and returns its id
// and its members' ids.
func (r *run) cutGroup(ctx context.Context, name string, volumes ...string) (string, []string, error) {
	var id string
	var ids []string
	err := r.onDriver(ctx, func(ctx context.Context, conn *grpc.ClientConn) error {
		resp, err := csipb.NewGroupControllerClient(conn).CreateVolumeGroupSnapshot(ctx,
			&csipb.CreateVolumeGroupSnapshotRequest{Name: name, SourceVolumeIds: volumes})
		if err != nil {
			return fmt.Errorf("CreateVolumeGroupSnapshot %s on the driver: %w", name, err)
		}
		gs := resp.GetGroupSnapshot()
		id = gs.GetGroupSnapshotId()
		r.ids[id] = name
		for _, s := range gs.GetSnapshots() {
			r.ids[s.GetSnapshotId()] = name + ":" + s.GetSourceVolumeId()
			ids = append(ids, s.GetSnapshotId())
		}
		return nil
	})
	return id, ids, err
}

// deleteBackendGroup deletes a group snapshot directly on the driver.
func (r *run) deleteBackendGroup(ctx context.Context, id string) error {
	return r.onDriver(ctx, func(ctx context.Context, conn *grpc.ClientConn) error {
		if _, err := csipb.NewGroupControllerClient(conn).DeleteVolumeGroupSnapshot(ctx, &csipb.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: id}); err != nil {
			return fmt.Errorf("DeleteVolumeGroupSnapshot %s on the driver: %w", id, err)
		}
		return nil
	})
}

// importGroupContent creates a pre-provisioned group content for a backend
// group, pre-bound to VolumeGroupSnapshot vgsName of the run's namespace.
func (r *run) importGroupContent(ctx context.Context, short, groupID string, memberIDs []string, vgsName string, policy snapv1.DeletionPolicy) error {
	c := &groupv1.VolumeGroupSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{Name: r.contentName(short)},
		Spec: groupv1.VolumeGroupSnapshotContentSpec{
			VolumeGroupSnapshotRef: corev1.ObjectReference{Namespace: r.ns, Name: vgsName},
			DeletionPolicy:         policy,
			Driver:                 r.driverName(),
			Source: groupv1.VolumeGroupSnapshotContentSource{GroupSnapshotHandles: &groupv1.GroupSnapshotHandles{
				VolumeGroupSnapshotHandle: groupID,
				VolumeSnapshotHandles:     memberIDs,
			}},
		},
	}
	out, err := r.w.env.Snap.GroupsnapshotV1().VolumeGroupSnapshotContents().Create(ctx, c, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	r.learnUID(string(out.UID), "VolumeGroupSnapshotContent/"+r.norm(out.Name))
	return r.settleGroupContent(ctx, out.Name)
}

// settleGroupContent waits until group content name is in the run's
// informer cache, then a moment more (see settleContent).
func (r *run) settleGroupContent(ctx context.Context, name string) error {
	return settle(ctx, "group content "+name, func() error {
		_, err := r.w.vgsc.Get(name)
		return err
	})
}

// deleteAllContents deletes every content and group content of the run
// (what an admin does with retained ones).
func (r *run) deleteAllContents(ctx context.Context) error {
	for name := range r.seenGroupContents {
		if err := r.w.env.Snap.GroupsnapshotV1().VolumeGroupSnapshotContents().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			return err
		}
	}
	for name := range r.seenContents {
		if err := r.deleteContent(ctx, name); err != nil {
			return err
		}
	}
	return nil
}

// ---- conditions for group steps ----

func vgsStatus(g *groupv1.VolumeGroupSnapshot) snapStatus {
	if g == nil || g.Status == nil {
		return snapStatus{}
	}
	return snapStatus{g.Status.ReadyToUse, g.Status.Error}
}

func vgsReady(name string) func(*run, *obs) bool {
	return func(_ *run, o *obs) bool { return vgsStatus(o.vgs[name]).ready() }
}

func vgsError(name string) func(*run, *obs) bool {
	return func(_ *run, o *obs) bool { return vgsStatus(o.vgs[name]).failed() }
}

func vgsGone(name string) func(*run, *obs) bool {
	return func(_ *run, o *obs) bool { return o.vgs[name] == nil }
}

// membersReady: group has member snapshots, each ready. (How many is
// recorded, not waited for: which claims a selector chooses is compared.)
func membersReady(group string) func(*run, *obs) bool {
	return func(_ *run, o *obs) bool {
		got := 0
		for _, v := range o.vs {
			if snapshot.GroupOwner(v) != group {
				continue
			}
			if !vsStatus(v).ready() {
				return false
			}
			got++
		}
		return got > 0
	}
}

// snapshotsGone: no VolumeSnapshot of the run is left.
func snapshotsGone(_ *run, o *obs) bool { return len(o.vs) == 0 }

// groupContentsGone: no group content of the run is left.
func groupContentsGone(_ *run, o *obs) bool { return len(o.vgsc) == 0 }

// backendEmpty: the driver holds no snapshot and no group snapshot.
func backendEmpty(_ *run, o *obs) bool { return len(o.backend) == 0 && len(o.groups) == 0 }

// everythingGone: the run's snapshots, contents, group contents and the
// driver's snapshots are all gone (a Delete policy).
func everythingGone(group string) func(*run, *obs) bool {
	return all(vgsGone(group), snapshotsGone, contentsGone, groupContentsGone, backendEmpty)
}

// ---- group scenarios ----

// claimsAndDB creates the db claims and a dynamic group "db" of three of
// them.
var claimsAndDB = seq(
	dbClaims,
	func(ctx context.Context, r *run) error { return r.createGroup(ctx, "db", dbSelector()) },
)

// createDB: claimsAndDB, ready with its three members.
func createDB() step {
	return step{Name: "claims and group", Do: claimsAndDB, Until: all(vgsReady("db"), membersReady("db"))}
}

// deletingGroup deletes group snapshot name.
func deletingGroup(name string) func(context.Context, *run) error {
	return func(ctx context.Context, r *run) error { return r.deleteGroup(ctx, name) }
}

// deleteGroupAll deletes group snapshot name and waits until everything
// of it is gone (a Delete policy).
func deleteGroupAll(name string) step {
	return step{Name: "delete " + name, Do: deletingGroup(name), Until: everythingGone(name)}
}

func groupScenarios() []*scenario {
	return []*scenario{
		{
			Name: "group-delete", Title: "dynamic group of 3 claims (matchLabels + matchExpressions), ready, delete (Delete policy)", Short: true,
			GroupClass: true, VolumeSizes: dbSizes,
			Steps: []step{createDB(), deleteGroupAll("db")},
		},
		{
			Name: "group-retain", Title: "dynamic group with Retain: delete the group, then the retained contents",
			GroupClass: true, VolumeSizes: dbSizes, Policy: snapv1.VolumeSnapshotContentRetain,
			Steps: []step{
				createDB(),
				{Name: "delete db", Do: deletingGroup("db"), Until: all(vgsGone("db"), snapshotsGone)},
				{Name: "delete contents", Do: func(ctx context.Context, r *run) error { return r.deleteAllContents(ctx) },
					Until: all(contentsGone, groupContentsGone)},
			},
		},
		{
			Name: "group-final-error", Title: "driver fails CreateVolumeGroupSnapshot with a final error; then delete the group",
			GroupClass: true, VolumeSizes: dbSizes,
			Faults: []framework.FaultRule{{Method: "CreateVolumeGroupSnapshot", Code: "InvalidArgument", Message: "unsupported group parameter"}},
			Steps: []step{
				{Name: "claims and group", Do: claimsAndDB, Until: vgsError("db"), Timeout: 30 * time.Second},
				deleteGroupAll("db"),
			},
		},
		{
			Name: "group-import", Title: "pre-provisioned group: import a backend group snapshot, ready, delete (Delete policy)",
			GroupClass: true,
			Steps: []step{
				{Name: "cut and import", Do: func(ctx context.Context, r *run) error {
					id, members, err := r.cutGroup(ctx, "imported-group", "vol-src-a", "vol-src-b")
					if err != nil {
						return err
					}
					if err := r.importGroupContent(ctx, "gc", id, members, "imported", snapv1.VolumeSnapshotContentDelete); err != nil {
						return err
					}
					return r.staticGroup(ctx, "imported", r.contentName("gc"))
				}, Until: vgsReady("imported")},
				deleteGroupAll("imported"),
			},
		},
		{
			Name: "group-member-deleted", Title: "a member snapshot deleted alone while its group lives, then the group",
			GroupClass: true, VolumeSizes: dbSizes,
			Steps: []step{
				createDB(),
				{Name: "delete member logs", Do: func(ctx context.Context, r *run) error {
					name, err := r.memberOf(ctx, "db", "logs")
					if err != nil {
						return err
					}
					return r.deleteSnapshot(ctx, name)
				}, Quiet: 5 * time.Second},
				deleteGroupAll("db"),
			},
		},
	}
}
