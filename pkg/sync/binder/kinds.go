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

// The binder's lifecycle (lifecycle.go) is written once, over two views:
// subject is the object a user creates and reads (a VolumeSnapshot,
// snapshot.go, or a VolumeGroupSnapshot, group.go), boundContent the
// content it is bound to. What differs between the kinds is data
// (kindNames) or one of the small kind-specific methods below: how a
// dynamic one is planned, what holds its deletion, what a bound one keeps
// in line besides its status (a group's members), and the writes.

// object is what the writer, the events and the metadata helpers take.
type object interface {
	metav1.Object
	runtime.Object
}

// subject is a VolumeSnapshot or a VolumeGroupSnapshot.
type subject interface {
	object() object
	names() *kindNames
	// statusError is status.error, or nil.
	statusError() *snapv1.VolumeSnapshotError
	// classes are the kind's class rules; their reasons (a class that
	// cannot be read or defaulted) leave readyToUse as it is.
	classes() classRules
	// class is the class spec names, or "" (the dynamic step then stores
	// the default it resolved).
	class() string
	// finalizersFor are the finalizers it holds while bound to a content
	// of policy.
	finalizersFor(policy snapv1.DeletionPolicy) []string
	// specProblem is what makes the spec unusable, or nil.
	specProblem() *problem
	// namedContent is the pre-provisioned content the spec names, or "".
	namedContent() string
	// boundName is the content status names, or "".
	boundName() string
	// statusView is what the binder owns of the status (nil without a status).
	currentStatus() *statusView

	// content is the content it is (or will be) bound to, from the cache
	// or as created a moment ago, or nil.
	content() boundContent
	// findNamedContent is the content namedContent names, or the problem that
	// keeps them from binding.
	findNamedContent() (boundContent, *problem)
	// plan is what a dynamic subject's content is cut from, or the problem
	// the user must fix (or wait out).
	plan(ctx context.Context) (*dynamicPlan, *problem)
	// targetStatus brings what a bound subject depends on in line (a group's
	// members) and returns the status it should show.
	targetStatus(ctx context.Context, content boundContent) (*target, error)
	// deletionBlocker is what keeps a deleted subject and its content as
	// they are (a claim restoring from it, a live group), said as the
	// Warning event the caller sends, or "".
	deletionBlocker() string
	// ownContent is the content bound to this very subject, read from the
	// API server where the cache may lag, or nil.
	ownContent(ctx context.Context) (boundContent, error)
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
		dynamicMismatch(content boundContent) *problem
	}
	// groupMember: a snapshot whose content a group makes (waitsForGroup)
	// is never cut on its own.
	groupMember interface{ waitsForGroup() bool }
	// metadataKeeper: a snapshot adds to p what it keeps on itself while
	// bound, besides the finalizers of content's policy.
	metadataKeeper interface {
		boundMetadata(p *writer.Patch, content boundContent)
	}
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
	_ metadataKeeper = snap{}
	_ sourceHolder   = snap{}
	_ owner          = group{}
)

// releaseSource releases s's source if its kind holds one.
func releaseSource(s subject) {
	if h, ok := s.(sourceHolder); ok {
		h.releaseSource()
	}
}

// boundContent is a VolumeSnapshotContent or a VolumeGroupSnapshotContent.
type boundContent interface {
	object() object
	// beingDeleted is the kind's being-deleted mark.
	beingDeleted() string
	policy() snapv1.DeletionPolicy
	driver() string
	ref() corev1.ObjectReference
	// className is the class the content names, or nil.
	className() *string
	// dynamic: cut from volumes, not pre-provisioned handles.
	dynamic() bool
	status() contentStatus
	create(ctx context.Context, w *writer.Writer) error
	patchMeta(ctx context.Context, w *writer.Writer, p *writer.Patch) error
	delete(ctx context.Context, w *writer.Writer) error
}

// deletes reports whether content goes with its subject (Delete policy).
func deletes(content boundContent) bool {
	return content.policy() == snapv1.VolumeSnapshotContentDelete
}

// contentStatus is what a subject's status mirrors of its content's.
type contentStatus struct {
	creationTime *time.Time
	ready        *bool
	restoreSize  *int64
	err          *snapv1.VolumeSnapshotError
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
	content    boundContent
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

// statusFromContent is the status a subject should show of its content's: bound to
// it, readyToUse=false until the CSI side reports (and, for a group, until
// every member exists: complete), its creation time to the second (the API
// stores times so: compare what will be stored), its size, and its error (an
// error no longer on the content is cleared).
func statusFromContent(content boundContent, complete bool) *statusView {
	name := content.object().GetName()
	ready := false
	st := &statusView{Content: &name, ReadyToUse: &ready}
	cs := content.status()
	if cs.creationTime != nil {
		t := metav1.NewTime(cs.creationTime.Truncate(time.Second))
		st.CreationTime = &t
	}
	if cs.ready != nil && *cs.ready && complete {
		ready = true
	}
	if cs.restoreSize != nil {
		st.RestoreSize = resource.NewQuantity(*cs.restoreSize, resource.BinarySI)
	}
	if cs.err != nil {
		st.Error = cs.err.DeepCopy()
	}
	return st
}
