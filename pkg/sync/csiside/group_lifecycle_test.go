package csiside

import (
	"context"
	"slices"
	"strings"
	"testing"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapinformers "github.com/kubernetes-csi/external-snapshotter/client/v8/informers/externalversions"
	"google.golang.org/grpc/codes"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/snapkeeper/snapkeeper/pkg/csi"
	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
)

// groupDriver is a driver with the group controller service whose group
// calls answer from a script of results, in order.
type groupDriver struct {
	*fakeDriver
	creates []groupResult
	deletes []groupDelete
}

type groupResult struct {
	group *csi.GroupSnapshot
	err   error
}

type groupDelete struct{ id, members string }

func (d *groupDriver) CreateGroupSnapshot(ctx context.Context, req csi.CreateGroupRequest) (*csi.GroupSnapshot, error) {
	if len(d.creates) == 0 {
		d.t.Errorf("unexpected CreateVolumeGroupSnapshot %q", req.Name)
		return nil, grpcErr(codes.Internal, "unexpected call")
	}
	r := d.creates[0]
	d.creates = d.creates[1:]
	return r.group, r.err
}

func (d *groupDriver) GetGroupSnapshot(ctx context.Context, id string, ids []string, secrets map[string]string) (*csi.GroupSnapshot, error) {
	d.t.Errorf("unexpected GetVolumeGroupSnapshot %q", id)
	return nil, grpcErr(codes.Internal, "unexpected call")
}

func (d *groupDriver) DeleteGroupSnapshot(ctx context.Context, id string, ids []string, secrets map[string]string) error {
	d.deletes = append(d.deletes, groupDelete{id: id, members: strings.Join(ids, ",")})
	return nil
}

// groupHarness wires the CSI side with the group loop over a fake API
// server; sync delivers the API server's group content to the cache first,
// as the watch would.
type groupHarness struct {
	*harness
	driver *groupDriver
	cfg    *GroupConfig
}

func newGroupHarness(t *testing.T, objs ...runtime.Object) *groupHarness {
	gd := &groupDriver{}
	var gcfg *GroupConfig
	h := newHarness(t, setup{
		objects: objs,
		caps:    csi.Capabilities{CreateDeleteSnapshot: true, GroupSnapshots: true},
		config: func(cfg *Config) {
			gd.fakeDriver = cfg.Driver.(*fakeDriver)
			cfg.Driver = gd
			f := snapinformers.NewSharedInformerFactory(cfg.Snap, 0)
			gcfg = &GroupConfig{
				ContentInformer: f.Groupsnapshot().V1().VolumeGroupSnapshotContents(),
				ClassInformer:   f.Groupsnapshot().V1().VolumeGroupSnapshotClasses(),
			}
			cfg.Groups = gcfg
		},
	})
	for _, o := range objs {
		if class, ok := o.(*groupv1.VolumeGroupSnapshotClass); ok {
			if err := gcfg.ClassInformer.Informer().GetIndexer().Add(class); err != nil {
				t.Fatal(err)
			}
		}
	}
	return &groupHarness{harness: h, driver: gd, cfg: gcfg}
}

func (h *groupHarness) stored(name string) *groupv1.VolumeGroupSnapshotContent {
	h.t.Helper()
	g, err := h.api.Snap.GroupsnapshotV1().VolumeGroupSnapshotContents().Get(h.ctx, name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return g
}

func (h *groupHarness) syncGroup(name string) {
	h.t.Helper()
	idx := h.cfg.ContentInformer.Informer().GetIndexer()
	g, err := h.api.Snap.GroupsnapshotV1().VolumeGroupSnapshotContents().Get(h.ctx, name, metav1.GetOptions{})
	if err == nil {
		err = idx.Update(g)
	} else if obj, ok, _ := idx.GetByKey(name); ok {
		err = idx.Delete(obj)
	}
	if err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.ctrl.syncGroupContent(h.ctx, name); err != nil {
		h.t.Fatal(err)
	}
}

// A group content goes through the same steps as a content: a final
// create error is shown once and clears the being-created mark, the next
// attempt after the backoff stores the group and its members and unmarks,
// and the binder's being-deleted mark lets the deletion call
// DeleteVolumeGroupSnapshot with every member's id and release.
func TestGroupContentGoesThroughTheSameLifecycle(t *testing.T) {
	class := &groupv1.VolumeGroupSnapshotClass{
		ObjectMeta:     metav1.ObjectMeta{Name: "groups"},
		Driver:         testDriver,
		DeletionPolicy: snapv1.VolumeSnapshotContentDelete,
	}
	content := &groupv1.VolumeGroupSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{Name: "gc1"},
		Spec: groupv1.VolumeGroupSnapshotContentSpec{
			Driver:                       testDriver,
			DeletionPolicy:               snapv1.VolumeSnapshotContentDelete,
			VolumeGroupSnapshotClassName: ptr.To("groups"),
			VolumeGroupSnapshotRef:       corev1.ObjectReference{Namespace: "ns", Name: "g1", UID: testUID},
			Source:                       groupv1.VolumeGroupSnapshotContentSource{VolumeHandles: []string{"vol-1", "vol-2"}},
		},
	}
	h := newGroupHarness(t, class, content)

	h.driver.creates = []groupResult{{err: grpcErr(codes.InvalidArgument, "no such volumes")}}
	h.syncGroup("gc1")
	got := h.stored("gc1")
	if msg := (group{VolumeGroupSnapshotContent: got}).errorMessage(); msg != "Failed to create group snapshot: InvalidArgument: no such volumes" {
		t.Errorf("status.error = %q", msg)
	}
	if _, marked := got.Annotations[snapshot.AnnGroupBeingCreated]; marked {
		t.Error("a final error of the first attempt must clear the being-created mark")
	}
	if !snapshot.HasFinalizer(got, snapshot.FinalizerGroupContentBound) {
		t.Error("a Delete group content must get its finalizer before the call")
	}
	if ev := h.events(); len(ev) != 1 || !slices.ContainsFunc(ev, func(e string) bool { return strings.Contains(e, snapshot.ReasonGroupCreationFailed) }) {
		t.Errorf("events = %v, want one %s", ev, snapshot.ReasonGroupCreationFailed)
	}

	h.syncGroup("gc1") // within the backoff: no call
	h.now = h.now.Add(retryBackoff.Max)
	h.driver.creates = []groupResult{{group: &csi.GroupSnapshot{ID: "group-1", ReadyToUse: true, Snapshots: []*csi.Snapshot{
		{ID: "s1", SourceVolumeID: "vol-1", ReadyToUse: true}, {ID: "s2", SourceVolumeID: "vol-2", ReadyToUse: true},
	}}}}
	h.syncGroup("gc1")
	got = h.stored("gc1")
	if st := got.Status; st == nil || ptr.Deref(st.VolumeGroupSnapshotHandle, "") != "group-1" || !ptr.Deref(st.ReadyToUse, false) ||
		len(st.VolumeSnapshotInfoList) != 2 || st.Error != nil {
		t.Fatalf("status after the create = %+v", st)
	}
	if _, marked := got.Annotations[snapshot.AnnGroupBeingCreated]; marked {
		t.Error("the being-created mark must go once the group id is stored")
	}

	// Deleted without the binder's mark: the backend group and the
	// finalizer stay.
	if err := h.api.Snap.GroupsnapshotV1().VolumeGroupSnapshotContents().Delete(h.ctx, "gc1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.syncGroup("gc1")
	if len(h.driver.deletes) != 0 || !snapshot.HasFinalizer(h.stored("gc1"), snapshot.FinalizerGroupContentBound) {
		t.Fatalf("deleted without the being-deleted mark: deletes %v, finalizer kept %v", h.driver.deletes, snapshot.HasFinalizer(h.stored("gc1"), snapshot.FinalizerGroupContentBound))
	}
	marked := h.stored("gc1")
	marked.Annotations[snapshot.AnnGroupBeingDeleted] = snapshot.ValueYes
	if _, err := h.api.Snap.GroupsnapshotV1().VolumeGroupSnapshotContents().Update(h.ctx, marked, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.syncGroup("gc1")
	if want := []groupDelete{{id: "group-1", members: "s1,s2"}}; !slices.Equal(h.driver.deletes, want) {
		t.Errorf("DeleteVolumeGroupSnapshot calls = %v, want %v", h.driver.deletes, want)
	}
	if _, err := h.api.Snap.GroupsnapshotV1().VolumeGroupSnapshotContents().Get(h.ctx, "gc1", metav1.GetOptions{}); err == nil {
		t.Error("the group content must be gone once its finalizer is released")
	}
}
