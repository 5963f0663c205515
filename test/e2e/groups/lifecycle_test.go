package groups

import (
	"context"
	"slices"
	"testing"
	"time"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

const gib = int64(1) << 30

// dbSelector picks the claims labelled app=db whose tier is data or logs:
// matchLabels and matchExpressions together.
var dbSelector = &metav1.LabelSelector{
	MatchLabels: map[string]string{"app": "db"},
	MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"data", "logs"}},
	},
}

// dbClaims creates the three claims dbSelector matches (sizes 1, 2, 3 GiB
// at the driver) and one it must not (tier=cache).
func dbClaims(t *testing.T, w *world) []string {
	t.Helper()
	w.pvc(t, "data-0", map[string]string{"app": "db", "tier": "data"})
	w.pvc(t, "data-1", map[string]string{"app": "db", "tier": "data"})
	w.pvc(t, "logs", map[string]string{"app": "db", "tier": "logs"})
	w.pvc(t, "cache", map[string]string{"app": "db", "tier": "cache"})
	return []string{"data-0", "data-1", "logs"}
}

var dbSizes = map[string]int64{"data-0": 1 * gib, "data-1": 2 * gib, "logs": 3 * gib, "cache": 4 * gib}

// TestGroupLifecycle: a group of three volumes chosen by matchLabels and
// matchExpressions is cut once, its members are bound, ready, sized by the
// driver and owned by the group; a member restores through the webhook,
// cannot be deleted alone, and holds the group while a claim restores from
// it; deleting the group removes members, contents and the backend group.
func TestGroupLifecycle(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, framework.ScenarioOptions{ClaimSizes: dbSizes})
	w.Env.StartWebhook(t)
	claims := dbClaims(t, w)
	w.Group(t, "db", dbSelector)
	g := w.WaitGroupReady(t, "db", 60*time.Second)

	contentName := *g.Status.BoundVolumeGroupSnapshotContentName
	if want := "groupsnapcontent-" + string(g.UID); contentName != want {
		t.Fatalf("group content %q, want %q", contentName, want)
	}
	content, err := w.Env.Snap.GroupsnapshotV1().VolumeGroupSnapshotContents().Get(ctx, contentName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var handles []string
	for _, c := range claims {
		handles = append(handles, w.Handle(c))
	}
	got := slices.Sorted(slices.Values(content.Spec.Source.VolumeHandles))
	if !slices.Equal(got, handles) {
		t.Fatalf("group content volume handles %v, want %v", got, handles)
	}
	if g.Status.CreationTime == nil {
		t.Fatal("ready group without creationTime")
	}

	backend := w.Drv.Groups(t)
	if len(backend) != 1 || len(backend[0].SnapshotIDs) != 3 {
		t.Fatalf("backend groups %s, want one of three volumes", framework.JSON(backend))
	}
	if *content.Status.VolumeGroupSnapshotHandle != backend[0].ID {
		t.Fatalf("group content handle %q, backend group %q", *content.Status.VolumeGroupSnapshotHandle, backend[0].ID)
	}

	members := w.Members(t, "db")
	if len(members) != 3 {
		t.Fatalf("%d members, want 3: %s", len(members), framework.JSON(members))
	}
	for _, claim := range claims {
		vs := findMember(t, members, g, w.Handle(claim))
		checkMember(t, w, &vs, g, claim, backend[0].SnapshotIDs)
	}
	w.NoLeak(t)

	// A member restores: the webhook accepts it as a usable snapshot.
	member := findMember(t, members, g, w.Handle("data-0"))
	if _, err := w.RestoreClaim(t, "restore", member.Name); err != nil {
		t.Fatalf("restore from member %s refused: %v", member.Name, err)
	}

	// A member cannot go alone while its group lives.
	other := findMember(t, members, g, w.Handle("logs"))
	if err := w.Env.Snap.SnapshotV1().VolumeSnapshots(w.NS).Delete(ctx, other.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	if vs, err := w.Env.Snap.SnapshotV1().VolumeSnapshots(w.NS).Get(ctx, other.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("member deleted alone while its group lives: %v", err)
	} else if !snapshot.HasFinalizer(vs, snapshot.FinalizerSnapshotInGroup) {
		t.Fatalf("member lost %s while its group lives: %v", snapshot.FinalizerSnapshotInGroup, vs.Finalizers)
	}
	if b := w.Drv.Created(t); len(b) != 3 {
		t.Fatalf("backend snapshots %s, want the three members kept", framework.JSON(b))
	}

	// Deleting the group waits while a claim restores from a member.
	w.DeleteGroup(t, "db")
	time.Sleep(3 * time.Second)
	if g := w.GetGroup(t, "db"); g.DeletionTimestamp == nil {
		t.Fatal("group not marked deleted")
	}
	if n := len(w.Members(t, "db")); n != 3 {
		t.Fatalf("%d members left while a claim restores from one, want 3", n)
	}
	if len(w.Drv.Groups(t)) != 1 {
		t.Fatal("backend group deleted while a claim restores from a member")
	}

	// The restore finishes (the claim is bound to its volume): everything
	// goes, at the driver too.
	w.Env.BindClaim(t, w.NS, "restore", framework.PVCOptions{Driver: w.Drv.Name})
	w.WaitGroupGone(t, "db")
	for _, m := range members {
		w.WaitSnapshotGone(t, m.Name)
		w.WaitContentGone(t, *m.Status.BoundVolumeSnapshotContentName)
	}
	w.Env.WaitGroupContentGone(t, contentName, 30*time.Second)
	w.NothingLeft(t)
	w.groupDeletesNamedTheirMembers(t, 3)
	if n := w.Drv.Calls(t).Count("DeleteSnapshot", ""); n != 0 {
		t.Fatalf("%d members deleted one by one through DeleteSnapshot, want 0 (DeleteVolumeGroupSnapshot)", n)
	}
}

func findMember(t *testing.T, members []snapv1.VolumeSnapshot, g *groupv1.VolumeGroupSnapshot, handle string) snapv1.VolumeSnapshot {
	t.Helper()
	name := snapshot.MemberSnapshotName(g.UID, handle)
	for _, m := range members {
		if m.Name == name {
			return m
		}
	}
	t.Fatalf("no member %s for volume %s", name, handle)
	return snapv1.VolumeSnapshot{}
}

// checkMember checks member i of the group (of claim) and its content: bound,
// ready, sized by the driver, marked as a member of the backend group.
func checkMember(t *testing.T, w *world, vs *snapv1.VolumeSnapshot, g *groupv1.VolumeGroupSnapshot, claim string, backendIDs []string) {
	t.Helper()
	ctx := context.Background()
	handle := w.Handle(claim)
	if src := vs.Spec.Source.PersistentVolumeClaimName; src == nil || *src != claim {
		t.Errorf("member %s source %v, want claim %s", vs.Name, src, claim)
	}
	if !snapshot.HasFinalizer(vs, snapshot.FinalizerSnapshotInGroup) {
		t.Errorf("member %s finalizers %v, want %s", vs.Name, vs.Finalizers, snapshot.FinalizerSnapshotInGroup)
	}
	st := vs.Status
	switch {
	case st == nil || st.ReadyToUse == nil || !*st.ReadyToUse:
		t.Fatalf("member %s of a ready group is not ready: %s", vs.Name, framework.JSON(st))
	case st.RestoreSize == nil || st.RestoreSize.Value() != dbSizes[claim]:
		t.Errorf("member %s restoreSize %v, want %d (the driver's size)", vs.Name, st.RestoreSize, dbSizes[claim])
	case st.VolumeGroupSnapshotName == nil || *st.VolumeGroupSnapshotName != g.Name:
		t.Errorf("member %s volumeGroupSnapshotName %v, want %s", vs.Name, st.VolumeGroupSnapshotName, g.Name)
	case st.BoundVolumeSnapshotContentName == nil || *st.BoundVolumeSnapshotContentName != snapshot.MemberContentName(g.UID, handle):
		t.Fatalf("member %s bound to %v, want %s", vs.Name, st.BoundVolumeSnapshotContentName, snapshot.MemberContentName(g.UID, handle))
	}
	content, err := w.Env.Snap.SnapshotV1().VolumeSnapshotContents().Get(ctx, *st.BoundVolumeSnapshotContentName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ref := content.Spec.VolumeSnapshotRef; ref.Name != vs.Name || ref.Namespace != vs.Namespace || ref.UID != vs.UID {
		t.Errorf("member content %s refers to %s/%s (%s), want %s/%s (%s)", content.Name, ref.Namespace, ref.Name, ref.UID, vs.Namespace, vs.Name, vs.UID)
	}
	if h := content.Spec.Source.VolumeHandle; h == nil || *h != handle {
		t.Errorf("member content %s volume handle %v, want %s", content.Name, h, handle)
	}
	if content.Status == nil || content.Status.SnapshotHandle == nil || !slices.Contains(backendIDs, *content.Status.SnapshotHandle) {
		t.Errorf("member content %s status %s: handle not one of the backend group's %v", content.Name, framework.JSON(content.Status), backendIDs)
	}
	if content.Annotations[snapshot.AnnVolumeGroupSnapshotHandle] == "" {
		t.Errorf("member content %s lacks %s", content.Name, snapshot.AnnVolumeGroupSnapshotHandle)
	}
}
