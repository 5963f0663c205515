package csiside

import (
	"testing"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/snapkeeper/snapkeeper/pkg/csi"
	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/sync/testkit"
	"github.com/snapkeeper/snapkeeper/pkg/sync/workloop"
)

// The lifecycle is written once over two kinds of content (item.go), so a
// table case of a rule both kinds have is written once too, as a kindCase,
// and runs for both: kind builds content "c1" of one kind, the driver calls
// it makes and the statuses it stores, syncs it and reads it back. Events
// and messages are written in the snapshot kind's words; the group kind
// says the same in its own (testkit.Kind.Says).

// kind is a VolumeSnapshotContent or a VolumeGroupSnapshotContent.
type kind struct{ testkit.Kind }

var snapshotKind, groupKind = func() (kind, kind) {
	// The group kind's words for what a case says in the snapshot kind's.
	snap, group := testkit.Kinds(
		"Warning "+snapshot.ReasonCreationFailed+" ", "Warning "+snapshot.ReasonGroupCreationFailed+" ",
		"Warning "+snapshot.ReasonCheckFailed+" ", "Warning "+snapshot.ReasonGroupCheckFailed+" ",
		"Warning "+snapshot.ReasonDeleteError+" ", "Warning "+snapshot.ReasonGroupDeleteError+" ",
		"Failed to create snapshot: ", "Failed to create group snapshot: ",
		"Failed to delete snapshot: ", "Failed to delete group snapshot: ",
		"Failed to check snapshot status: ", "Failed to check and update group snapshot content: ",
		"CreateSnapshot", "CreateVolumeGroupSnapshot",
		`VolumeSnapshotClass "gold" not found`,
		`reading VolumeGroupSnapshotClass "gold": volumegroupsnapshotclass.groupsnapshot.storage.k8s.io "gold" not found`,
	)
	return kind{snap}, kind{group}
}()

var kinds = []kind{snapshotKind, groupKind}

// kindCase is a sync case written once for both kinds.
type kindCase func(k kind) syncCase

// runKindCases runs each case for each kind, as subtests named after them.
func runKindCases(t *testing.T, cases map[string]kindCase) {
	t.Helper()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			for _, k := range kinds {
				t.Run(k.Name, func(t *testing.T) { runSyncCase(t, k, tc(k)) })
			}
		})
	}
}

// contentOption is an option of a rule both kinds have (testkit.Meta,
// RefTo, Retain, PreProvisioned, ..., and the marks below).
type contentOption interface {
	testkit.ContentOption
	testkit.GroupContentOption
}

// perKind is an option that says the same of either kind with the kind's
// own key: a mark, a finalizer, a secret annotation.
func perKind(content, group testkit.Meta) testkit.AnyContentFunc {
	return testkit.AnyContentFunc{
		Content: func(c *snapv1.VolumeSnapshotContent) { content(c) },
		Group:   func(c *groupv1.VolumeGroupSnapshotContent) { group(c) },
	}
}

// resource is the kind's content resource, as faults name it.
func (k kind) resource() string {
	if k.Group {
		return testkit.GroupContentsGVR.Resource
	}
	return testkit.ContentsGVR.Resource
}

// content is content "c1" as our binder creates it (newContent,
// newGroupContent), with opts.
func (k kind) content(opts ...contentOption) runtime.Object {
	if k.Group {
		return newGroupContent("c1", testkit.As[testkit.GroupContentOption](opts)...)
	}
	return newContent("c1", testkit.As[testkit.ContentOption](opts)...)
}

// setup adds what the kind needs to s: its content, and for groups a driver
// with the group controller service.
func (k kind) setup(s setup, content runtime.Object) setup {
	switch c := content.(type) {
	case *snapv1.VolumeSnapshotContent:
		s.contents = append(s.contents, c)
	case *groupv1.VolumeGroupSnapshotContent:
		s.objects = append(s.objects, c)
	}
	if k.Group {
		s.caps.CreateDeleteSnapshot, s.caps.GroupSnapshots = true, true
	}
	return s
}

// classes are the kind's classes: gold (goldClass, goldGroupClass).
func (k kind) classes() []runtime.Object {
	if k.Group {
		return objs(goldGroupClass())
	}
	return classes
}

// subject is the snapshot (or group) default/snap-1 of uid.
func (k kind) subject(uid types.UID) []runtime.Object {
	if k.Group {
		return objs(testkit.GroupSnapshot("snap-1", testkit.InNamespace("default"), testkit.UID(uid)))
	}
	return objs(testkit.Snapshot("snap-1", testkit.InNamespace("default"), testkit.UID(uid)))
}

// finalizer is our finalizer on the kind's contents; bound the finalizers
// of a content that holds only it.
func (k kind) finalizer() string {
	if k.Group {
		return snapshot.FinalizerGroupContentBound
	}
	return snapshot.FinalizerContentBound
}

func (k kind) bound() []string { return []string{k.finalizer()} }

func (k kind) beingCreated() string {
	if k.Group {
		return snapshot.AnnGroupBeingCreated
	}
	return snapshot.AnnBeingCreated
}

// memberOf is the id of the one member (of vol-1) of group id.
func memberOf(id string) string { return id + "-vol-1" }

// create is the create call of c1 with the gold class and secrets,
// answered with the snapshot (or group, with its member) id.
func (k kind) create(secrets map[string]string, id string, ready bool) call {
	if k.Group {
		return createGroupCall(goldGroupRequest(secrets),
			&csi.GroupSnapshot{ID: id, ReadyToUse: ready, CreationTime: testTime, Snapshots: []*csi.Snapshot{snapOf(memberOf(id), ready)}}, nil)
	}
	return createCall(goldRequest(secrets), snapOf(id, ready), nil)
}

// createFails is the create call of c1 answered with err.
func (k kind) createFails(secrets map[string]string, err error) call {
	if k.Group {
		return createGroupCall(goldGroupRequest(secrets), nil, err)
	}
	return createCall(goldRequest(secrets), nil, err)
}

// delete is the delete call of the snapshot (or group, with its member) id.
func (k kind) delete(id string, secrets map[string]string, err error) call {
	if k.Group {
		return deleteGroupCall(id, []string{memberOf(id)}, secrets, err)
	}
	return deleteCall(id, secrets, err)
}

// cut is the status of c1 once the answer of create(id, ready) is stored.
func (k kind) cut(id string, ready bool) any {
	if k.Group {
		return ptr.To(testkit.GroupCut(id, ready, testkit.Member("vol-1", memberOf(id), ready)))
	}
	return ptr.To(testkit.Cut(id, ready))
}

// failed is the status of c1 whose first call failed (errorStatus).
func (k kind) failed(msg string) any {
	if k.Group {
		return &groupv1.VolumeGroupSnapshotContentStatus{ReadyToUse: ptr.To(false), Error: &snapv1.VolumeSnapshotError{Message: &msg}}
	}
	return ptr.To(errorStatus(msg))
}

// withError is st (of cut) showing msg.
func (k kind) withError(st any, msg string) any {
	switch st := st.(type) {
	case *groupv1.VolumeGroupSnapshotContentStatus:
		out := *st
		out.Error = &snapv1.VolumeSnapshotError{Message: &msg}
		return &out
	case *snapv1.VolumeSnapshotContentStatus:
		return ptr.To(withError(*st, msg))
	}
	panic("not a status")
}

// cleared is the status of c1 cut as id once its deleted handle is
// cleared: the snapshot kind forgets the handle, the group kind the handle
// and its readiness.
func (k kind) cleared(id string) any {
	if k.Group {
		st := testkit.GroupCut(id, true, testkit.Member("vol-1", memberOf(id), true))
		st.VolumeGroupSnapshotHandle, st.ReadyToUse = nil, nil
		return &st
	}
	st := testkit.Cut(id, true)
	st.SnapshotHandle = nil
	return &st
}

// has is the option that sets st (of cut or failed) on a content of the
// kind that made st.
func (k kind) has(st any) contentOption {
	switch st := st.(type) {
	case *groupv1.VolumeGroupSnapshotContentStatus:
		return testkit.AnyContentFunc{Group: testkit.GroupStatus(*st)}
	case *snapv1.VolumeSnapshotContentStatus:
		return testkit.AnyContentFunc{Content: testkit.Status(*st)}
	}
	panic("not a status")
}

// sync syncs content name of the kind.
func (k kind) sync(h *harness, name string) (workloop.Result, error) {
	if k.Group {
		return h.ctrl.syncGroupContent(h.ctx, name)
	}
	return h.sync(name)
}

// read is content name as the API server holds it and its status; nil,
// nil when it holds none.
func (k kind) read(h *harness, name string) (metav1.Object, any) {
	if k.Group {
		c := h.api.GroupContent(name)
		switch {
		case c == nil:
			return nil, nil
		case c.Status == nil:
			return c, nil
		}
		return c, c.Status
	}
	c := h.api.Content(name)
	switch {
	case c == nil:
		return nil, nil
	case c.Status == nil:
		return c, nil
	}
	return c, c.Status
}
