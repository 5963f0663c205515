package binder

import (
	"context"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/snapkeeper/snapkeeper/pkg/writer"
)

// The binder's lifecycle (lifecycle.go) is written once, for a
// VolumeSnapshot (snapshot.go) and a VolumeGroupSnapshot (group.go). Each
// sync starts with the subject's kind building its scope: the object and
// what the steps read of it, computed once (names, class, the content it
// is or will be bound to, its status). What the steps do differently per
// kind are the kind's hooks, a handful of methods on the kind's own type;
// what they need of the content (its status, the status the subject should
// show) is on the content, typed as its subject is.

// object is what the writer, the events and the metadata helpers take.
type object interface {
	metav1.Object
	runtime.Object
}

// scope is one sync of one subject: a VolumeSnapshot or a
// VolumeGroupSnapshot.
type scope struct {
	hooks
	obj   object
	names *kindNames
	// classes are the kind's class rules; their reasons (a class that
	// cannot be read or defaulted) leave readyToUse as it is.
	classes classRules
	// class is the class spec names, or "" (the dynamic step then stores
	// the default it resolved).
	class string
	// namedContent is the pre-provisioned content the spec names, or "";
	// boundName the content status names, or "".
	namedContent, boundName string
	// status is what the binder owns of the status (nil without a status).
	status *statusView
	// content is the content it is (or will be) bound to, from the cache
	// or as created a moment ago, or nil.
	content *boundContent
	// problem is what makes the spec unusable, or nil.
	problem *problem
}

// hooks are what a kind does its own way.
type hooks interface {
	// finalizersFor are the finalizers it holds while bound to a content
	// of policy.
	finalizersFor(policy snapv1.DeletionPolicy) []string
	// findNamedContent is the content namedContent names, or the problem
	// that keeps them from binding.
	findNamedContent() (*boundContent, *problem)
	// plan is what a dynamic subject's content is cut from, or the problem
	// the user must fix (or wait out).
	plan(ctx context.Context) (*dynamicPlan, *problem)
	// deletionBlocker is what keeps a deleted subject and its content as
	// they are (a claim restoring from it, a live group), said as the
	// Warning event the caller sends, or "".
	deletionBlocker() string
	// ownContent is the content bound to this very subject, read from the
	// API server where the cache may lag, or nil.
	ownContent(ctx context.Context) (*boundContent, error)
	// classDriver is the driver of the subject's class, or "".
	classDriver() string

	patchMeta(ctx context.Context, p *writer.Patch) error
	patchStatus(ctx context.Context, fields map[string]any) error
	// statusPatch renders a full merge patch of the status: absent fields
	// are sent as null so a stale error or size is cleared.
	statusPatch(s *statusView) map[string]any
	// readLive reads the subject from the API server; nil when it is gone.
	readLive(ctx context.Context) (object, error)
}

// The hooks only one kind has: the steps ask for them, and a kind without
// one has nothing to do there (no no-op methods).
type (
	// contentChecker: a group checks that the content it is bound to is a
	// dynamic one (dynamicMismatch is that problem, or nil).
	contentChecker interface {
		dynamicMismatch(content *boundContent) *problem
	}
	// groupMember: a snapshot whose content a group makes (waitsForGroup)
	// is never cut on its own.
	groupMember interface{ waitsForGroup() bool }
	// metadataKeeper: a snapshot's content adds to p what the snapshot
	// keeps on itself while bound, besides the finalizers of its policy.
	metadataKeeper interface{ boundMetadata(p *writer.Patch) }
	// sourceHolder: a snapshot releases its claim (releaseSource) once it
	// no longer needs it: when it is ready, and when it is deleted.
	sourceHolder interface{ releaseSource() }
	// owner: a group deletes what it owns besides its content, its members
	// (deleteOwned).
	owner interface {
		deleteOwned(ctx context.Context) error
	}
)

// Each kind has the hooks the steps expect of it: a changed signature would
// otherwise silently skip a step.
var (
	_ contentChecker = group{}
	_ groupMember    = snap{}
	_ metadataKeeper = snapContent{}
	_ sourceHolder   = snap{}
	_ owner          = group{}
)

// releaseSource releases s's source if its kind holds one.
func releaseSource(s *scope) {
	if h, ok := s.hooks.(sourceHolder); ok {
		h.releaseSource()
	}
}

// boundContent is a VolumeSnapshotContent or a VolumeGroupSnapshotContent
// as the content of its subject: what the steps read of it, and the hooks
// of its kind.
type boundContent struct {
	contentHooks
	obj object
	// beingDeleted is the kind's being-deleted mark.
	beingDeleted string
	policy       snapv1.DeletionPolicy
	driver       string
	ref          corev1.ObjectReference
	// className is the class the content names, or nil.
	className *string
	// dynamic: cut from volumes, not pre-provisioned handles.
	dynamic bool
}

// contentHooks are what a content's kind does its own way. They hold the
// content and its subject, both typed.
type contentHooks interface {
	// targetStatus brings what its bound subject depends on in line (a
	// group's members) and returns the status the subject should show.
	targetStatus(ctx context.Context) (*target, error)
	create(ctx context.Context, w *writer.Writer) error
	patchMeta(ctx context.Context, w *writer.Writer, p *writer.Patch) error
	delete(ctx context.Context, w *writer.Writer) error
}

// deletes reports whether content goes with its subject (Delete policy).
func deletes(content *boundContent) bool {
	return content.policy == snapv1.VolumeSnapshotContentDelete
}

// statusView is what the binder owns of a subject's status, for both kinds (a
// group has no restore size and names no group). Its fields are exported
// for equality.Semantic, which compares restore sizes by value.
type statusView struct {
	Content      *string
	CreationTime *metav1.Time
	ReadyToUse   *bool
	RestoreSize  *resource.Quantity
	Error        *snapv1.VolumeSnapshotError
	Group        *string
}

// target is the status a bound subject should show. noCSI, when set, is the
// error of a driver without a CSI side (csipresence.go); lookAgain when to
// check that again.
type target struct {
	status    *statusView
	noCSI     *snapv1.VolumeSnapshotError
	lookAgain time.Duration
}

// dynamicPlan is a dynamic subject's plan: the finalizers the subject needs before
// its content exists, the class it resolved, a claim protected with it, and
// the content to create.
type dynamicPlan struct {
	finalizers []string
	class      string
	claim      *corev1.PersistentVolumeClaim
	content    *boundContent
}

// kindNames are the names a kind uses for the same rules.
type kindNames struct {
	// subject and content name the kinds; what is the subject in a
	// sentence ("snapshot", "group snapshot"), logKey in log lines.
	subject, content, what, logKey string
	// classField is the spec field of the class, refField the content's
	// reference to its subject.
	classField, refField string
	// finalizers are every finalizer the binder may put on a subject;
	// contentFinalizer the one on its content.
	finalizers       []string
	contentFinalizer string
	// keepContentClass: binding keeps a class the content names rather
	// than writing the subject's over it.
	keepContentClass bool
	ops              ops
	// Event reasons; creating (with creatingMessage) and created (createdMessage)
	// are "" for a kind without that event. Messages take namespace, name.
	misbound, contentMissing, createFailed string
	creating, creatingMessage              string
	created, createdMessage                string
	ready, readyMessage                    string
}

// statusFromContent is the status a subject should show of its content's
// (named name, its status cs in the subject's shape): bound to
// it, readyToUse=false until the CSI side reports (and, for a group, until
// every member exists: complete), its creation time to the second (the API
// stores times so: compare what will be stored), its size, and its error (an
// error no longer on the content is cleared).
func statusFromContent(name string, cs statusView, complete bool) *statusView {
	ready := cs.ReadyToUse != nil && *cs.ReadyToUse && complete
	st := &statusView{Content: &name, ReadyToUse: &ready, RestoreSize: cs.RestoreSize}
	if cs.CreationTime != nil {
		t := metav1.NewTime(cs.CreationTime.Truncate(time.Second))
		st.CreationTime = &t
	}
	if cs.Error != nil {
		st.Error = cs.Error.DeepCopy()
	}
	return st
}
