package binder

import (
	"context"
	"testing"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/sync/testkit"
	"github.com/snapkeeper/snapkeeper/pkg/sync/workloop"
)

// The lifecycle is written once over two kinds (kinds.go), so a table case
// of a rule both kinds have runs for both: kind builds the case's objects
// of one kind, syncs them and reads back the result. A case is written in
// the snapshot kind's words (writes, messages, reasons); the group kind
// says the same in its own (testkit.Kind.Says).

// kind is a VolumeSnapshot with its content and class, or a
// VolumeGroupSnapshot with its own.
type kind struct{ testkit.Kind }

var kinds = func() []kind {
	// The group kind's words for what a case says in the snapshot kind's.
	snap, group := testkit.Kinds(
		"volumesnapshot", "volumegroupsnapshot", // resources in writes
		"VolumeSnapshot", "VolumeGroupSnapshot", // kinds in messages
		snapshot.ReasonSetDefaultSnapshotClassFailed, snapshot.ReasonSetDefaultGroupSnapshotClassFailed,
		snapshot.ReasonGetSnapshotClassFailed, snapshot.ReasonGetGroupSnapshotClassFailed,
		snapshot.ReasonSnapshotContentCreationFailed, snapshot.ReasonGroupSnapshotContentCreationFailed,
	)
	return []kind{{snap}, {group}}
}()

// forKinds runs test once for each kind, as a subtest named after it.
func forKinds(t *testing.T, test func(t *testing.T, k kind)) {
	t.Helper()
	for _, k := range kinds {
		t.Run(k.Name, func(t *testing.T) { test(t, k) })
	}
}

// The options of the rules both kinds have (testkit.Meta, FromContent,
// BoundTo, RefUID, Retain, Ready, DefaultClass, ...).
type (
	subjectOption interface {
		testkit.SnapshotOption
		testkit.GroupSnapshotOption
	}
	contentOption interface {
		testkit.ContentOption
		testkit.GroupContentOption
	}
	classOption interface {
		testkit.ClassOption
		testkit.GroupClassOption
	}
)

// built is an object a kind builds or reads back.
type built interface {
	metav1.Object
	runtime.Object
}

// configure turns the group loop on for groups.
func (k kind) configure(cfg *Config) { cfg.Groups = k.Group }

// harness is a binder of the kind over a fake API server that holds objs.
func (k kind) harness(t *testing.T, objs ...runtime.Object) *harness {
	t.Helper()
	return newHarnessWith(t, k.configure, objs...)
}

// subject is snapshot (or group) name in testNS, of the claim pvc1 (of the
// claims labelled testkit.GroupLabel).
func (k kind) subject(name string, opts ...subjectOption) built {
	if k.Group {
		return testkit.GroupSnapshot(name, testkit.As[testkit.GroupSnapshotOption](opts)...)
	}
	return testkit.Snapshot(name, testkit.As[testkit.SnapshotOption](opts)...)
}

// contentName is the name the binder gives the dynamic content of the
// subject of uid.
func (k kind) contentName(uid types.UID) string {
	if k.Group {
		return snapshot.GroupContentNameFor(uid)
	}
	return snapshot.ContentNameFor(uid)
}

// content is the dynamic content of s, as the binder makes it (newContent).
func (k kind) content(s metav1.Object, opts ...contentOption) built {
	name, ref := k.contentName(s.GetUID()), testkit.RefTo(s.GetNamespace(), s.GetName(), s.GetUID())
	if k.Group {
		return testkit.GroupContent(name, append([]testkit.GroupContentOption{ref}, testkit.As[testkit.GroupContentOption](opts)...)...)
	}
	return testkit.Content(name, append([]testkit.ContentOption{ref}, testkit.As[testkit.ContentOption](opts)...)...)
}

// class is a class of the kind.
func (k kind) class(name string, opts ...classOption) runtime.Object {
	if k.Group {
		return testkit.GroupClass(name, testkit.As[testkit.GroupClassOption](opts)...)
	}
	return testkit.SnapshotClass(name, testkit.As[testkit.ClassOption](opts)...)
}

// ours are the finalizers the binder puts on a subject bound to a Delete
// content; contentFinalizer the one on its content, beingDeleted the mark.
func (k kind) ours() []string {
	if k.Group {
		return []string{snapshot.FinalizerGroupSnapshotBound}
	}
	return []string{snapshot.FinalizerSnapshotAsSource, snapshot.FinalizerSnapshotBound}
}

func (k kind) contentFinalizer() string {
	if k.Group {
		return snapshot.FinalizerGroupContentBound
	}
	return snapshot.FinalizerContentBound
}

func (k kind) beingDeleted() string {
	if k.Group {
		return snapshot.AnnGroupBeingDeleted
	}
	return snapshot.AnnBeingDeleted
}

// restoring are the objects that keep a deleted subject as it is: a
// Pending claim restoring from the snapshot, or from a member of the group.
func (k kind) restoring(s metav1.Object) []runtime.Object {
	from := s.GetName()
	var objs []runtime.Object
	if k.Group {
		member := testkit.Snapshot(snapshot.MemberSnapshotName(s.GetUID(), testkit.VolumeHandle))
		member.OwnerReferences = []metav1.OwnerReference{snapshot.GroupOwnerReference(s.(*groupv1.VolumeGroupSnapshot))}
		from, objs = member.Name, append(objs, member)
	}
	return append(objs, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "restore", Namespace: s.GetNamespace()},
		Spec: corev1.PersistentVolumeClaimSpec{DataSource: &corev1.TypedLocalObjectReference{
			APIGroup: ptr.To(snapshot.GroupName), Kind: snapshot.KindSnapshot, Name: from}},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending},
	})
}

// sync syncs subject name of testNS.
func (k kind) sync(h *harness, name string) (workloop.Result, error) {
	if k.Group {
		return h.c.syncGroup(context.Background(), testNS+"/"+name)
	}
	return h.syncSnapshot(name)
}

// get is subject name as the API server holds it.
func (k kind) get(h *harness, name string) built {
	h.t.Helper()
	if k.Group {
		if g := h.api.GroupSnapshot(testNS, name); g != nil {
			return g
		}
		h.t.Fatalf("group %s not found", name)
	}
	return h.getSnapshot(name)
}

// live is subject name, as the API server holds it, as the lifecycle sees
// it.
func (k kind) live(h *harness, name string) *scope {
	if k.Group {
		return h.c.group(k.get(h, name).(*groupv1.VolumeGroupSnapshot))
	}
	return h.c.snap(h.getSnapshot(name))
}

// delete deletes subject name through the API server (its finalizers keep
// it, being deleted).
func (k kind) delete(h *harness, name string) error {
	ctx := context.Background()
	if k.Group {
		return h.api.Snap.GroupsnapshotV1().VolumeGroupSnapshots(testNS).Delete(ctx, name, metav1.DeleteOptions{})
	}
	return h.api.Snap.SnapshotV1().VolumeSnapshots(testNS).Delete(ctx, name, metav1.DeleteOptions{})
}

// statusError is the error the subject's status shows, or nil.
func (k kind) statusError(s built) *snapv1.VolumeSnapshotError {
	switch s := s.(type) {
	case *groupv1.VolumeGroupSnapshot:
		if s.Status != nil {
			return s.Status.Error
		}
	case *snapv1.VolumeSnapshot:
		if s.Status != nil {
			return s.Status.Error
		}
	}
	return nil
}

// getContent is content name as the API server holds it, with its
// reference to its subject; nil when it holds none.
func (k kind) getContent(h *harness, name string) (built, corev1.ObjectReference) {
	if k.Group {
		if c := h.api.GroupContent(name); c != nil {
			return c, c.Spec.VolumeGroupSnapshotRef
		}
		return nil, corev1.ObjectReference{}
	}
	if c := h.api.Content(name); c != nil {
		return c, c.Spec.VolumeSnapshotRef
	}
	return nil, corev1.ObjectReference{}
}
