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
	// shown is what the binder owns of the status (nil without a status).
	shown() *shown

	// content is the content it is (or will be) bound to, from the cache
	// or as created a moment ago, or nil.
	content() boundContent
	// preProvisioned is the content namedContent names, or the problem that
	// keeps them from binding.
	preProvisioned() (boundContent, *problem)
	// dynamicMismatch is the problem of a dynamic subject whose content is
	// not a dynamic one, or nil.
	dynamicMismatch(content boundContent) *problem
	// waitsForGroup: a dynamic subject whose content another step makes (a
	// group's member).
	waitsForGroup() bool
	// plan is what a dynamic subject's content is cut from, or the problem
	// the user must fix (or wait out).
	plan(ctx context.Context) (*cut, *problem)
	// keep adds to p what a bound subject keeps on itself besides the
	// finalizers of content's policy.
	keep(p *writer.Patch, content boundContent)
	// desired brings what a bound subject depends on in line (a group's
	// members) and returns the status it should show.
	desired(ctx context.Context, content boundContent) (*want, error)
	// releaseSource is called when the subject no longer holds its source:
	// once it is ready, and when it is deleted (a snapshot's claim may go).
	releaseSource()
	// holds reports (with an event) what keeps a deleted subject and its
	// content as they are: a claim restoring from it, a live group.
	holds(ctx context.Context) bool
	// ownContent is the content bound to this very subject, read from the
	// API server where the cache may lag, or nil.
	ownContent(ctx context.Context) (boundContent, error)
	// tornDown deletes what a deleted subject owns besides its content (a
	// group's members).
	tornDown(ctx context.Context) error
	// classDriver is the driver of the subject's class, or "".
	classDriver() string

	patchMeta(ctx context.Context, p *writer.Patch) error
	patchStatus(ctx context.Context, fields map[string]any) error
	// statusPatch renders a full merge patch of the status: absent fields
	// are sent as null so a stale error or size is cleared.
	statusPatch(s *shown) map[string]any
	// readLive reads the subject from the API server; nil when it is gone.
	readLive(ctx context.Context) (object, error)
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

// shown is what the binder owns of a subject's status, for both kinds (a
// group has no restore size and names no group). Its fields are exported
// for equality.Semantic, which compares restore sizes by value.
type shown struct {
	Content      *string
	CreationTime *metav1.Time
	ReadyToUse   *bool
	RestoreSize  *resource.Quantity
	Error        *snapv1.VolumeSnapshotError
	Group        *string
}

// want is the status a bound subject should show. noCSI, when set, is the
// error of a driver without a CSI side (csipresence.go); lookAgain when to
// check that again.
type want struct {
	shown     *shown
	noCSI     *snapv1.VolumeSnapshotError
	lookAgain time.Duration
}

// cut is a dynamic subject's plan: the finalizers the subject needs before
// its content exists, the class it resolved, a claim protected with it, and
// the content to create.
type cut struct {
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
	// Event reasons; creating (with creatingMessage) and cut (cutMessage)
	// are "" for a kind without that event. Messages take namespace, name.
	misbound, contentMissing, createFailed string
	creating, creatingMessage              string
	cut, cutMessage                        string
	ready, readyMessage                    string
}

// mirrored is the status a subject should show of its content's: bound to
// it, readyToUse=false until the CSI side reports (and, for a group, until
// every member exists: complete), its creation time to the second (the API
// stores times so: compare what will be stored), its size, and its error (an
// error no longer on the content is cleared).
func mirrored(content boundContent, complete bool) *shown {
	name := content.object().GetName()
	ready := false
	st := &shown{Content: &name, ReadyToUse: &ready}
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
