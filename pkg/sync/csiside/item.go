package csiside

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/snapkeeper/snapkeeper/pkg/csi"
	"github.com/snapkeeper/snapkeeper/pkg/writer"
)

// item is one sync of one content of either kind, a VolumeSnapshotContent
// (content_item.go) or a VolumeGroupSnapshotContent (group_content_item.go):
// what the one lifecycle's steps (lifecycle.go, delete.go) read of it,
// computed once by its kind, and the kind's hooks for what they do their
// own way: the CSI calls, the status fields an answer sets, the writes.
// What differs in words is kindNames.
type item struct {
	hooks
	obj   object
	names *kindNames
	// key names the content in the backoffs; the kinds' keys never meet.
	key string
	// ours: this CSI side handles the content (its driver, and with
	// --node-deployment its node).
	ours        bool
	snapshotUID types.UID
	// deletes: its deletion policy is Delete.
	deletes bool
	// dynamic: cut from volumes, as opposed to pre-provisioned handles.
	dynamic bool
	// statusHandle is the backend id stored in status; knownHandle falls
	// back to the pre-provisioned one.
	statusHandle, knownHandle string
	ready, readyUnset         bool
	errorMessage              string
	// member: a content of a group's member, cut and deleted by the
	// group's calls, whose status the binder writes.
	member bool
	// specError is what makes the spec unusable (stored before the CRD's
	// rules), or "".
	specError string
}

// hooks are what a kind does its own way.
type hooks interface {
	// prepareCut builds the create call (also the readiness poll of a
	// dynamic content and the finishing of an in-flight create).
	prepareCut(ctx context.Context) (cutCall, error)
	// read asks the driver about a content that is not known to be ready.
	read(ctx context.Context) (answer, error)
	// deleteBackend deletes the backend snapshot (or group) handle.
	deleteBackend(ctx context.Context, handle string) error
	// statusFor is the status fields that differ from what the driver
	// answered; handleCleared the fields that forget a deleted handle.
	statusFor(a answer, now time.Time) map[string]any
	handleCleared() map[string]any

	// patchMeta and patchStatus write the content and return the item of
	// what the API server stored.
	patchMeta(ctx context.Context, p *writer.Patch) (*item, error)
	patchStatus(ctx context.Context, fields map[string]any) (*item, error)
	// liveVersion is the API server's resourceVersion of the content, ""
	// when it is gone.
	liveVersion(ctx context.Context) (string, error)
}

// object is what the writer, the events and the metadata helpers take.
type object interface {
	metav1.Object
	runtime.Object
}

// kindNames are the names a kind uses for the same rules: its marks, its
// finalizer, its event reasons and the words of its messages.
type kindNames struct {
	beingCreated, beingDeleted, finalizer   string
	reasonCreate, reasonCheck, reasonDelete string
	// createCall and deleteCall name the CSI calls; what the backend object;
	// checkFailed starts the message of a failed readiness check.
	createCall, deleteCall, what, checkFailed string
	// logKey names the content in log lines.
	logKey string
}

// cutCall is a prepared create call.
type cutCall struct {
	name   string
	logKVs []any
	run    func(ctx context.Context) (answer, error)
}

// answer is what the driver said about a backend snapshot or group.
type answer struct {
	id     string
	ready  bool
	single *csi.Snapshot
	group  *csi.GroupSnapshot
}

func snapAnswer(s *csi.Snapshot) answer {
	return answer{id: s.ID, ready: s.ReadyToUse, single: s}
}

func groupAnswer(g *csi.GroupSnapshot) answer {
	return answer{id: g.ID, ready: g.ReadyToUse, group: g}
}

// markedCreating reports whether the content carries its kind's
// being-created mark (whatever its value): a create may be in flight.
func markedCreating(it *item) bool {
	_, ok := it.obj.GetAnnotations()[it.names.beingCreated]
	return ok
}
