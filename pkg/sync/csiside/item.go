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

// item is a content of either kind, a VolumeSnapshotContent (content_item.go) or
// a VolumeGroupSnapshotContent (group_content_item.go), as the one lifecycle
// (lifecycle.go, delete.go) sees it. The state steps are written once over
// item; what differs between the kinds is data (kindNames) or one of the
// small kind-specific methods below: the CSI calls, the status fields an
// answer sets, and the writes.
type item interface {
	object() object
	names() *kindNames
	// key names the content in the backoffs; the kinds' keys never meet.
	key() string
	// ours reports whether this CSI side handles the content (its driver,
	// and with --node-deployment its node).
	ours() bool

	snapshotUID() types.UID
	deletePolicy() bool
	// dynamic: cut from volumes, as opposed to pre-provisioned handles.
	dynamic() bool
	// statusHandle is the backend id stored in status; knownHandle falls
	// back to the pre-provisioned one.
	statusHandle() string
	knownHandle() string
	ready() bool
	errorMessage() string
	readyUnset() bool

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

	patchMeta(ctx context.Context, p *writer.Patch) (item, error)
	patchStatus(ctx context.Context, fields map[string]any) (item, error)
	// liveVersion is the API server's resourceVersion of the content, ""
	// when it is gone.
	liveVersion(ctx context.Context) (string, error)
}

// The hooks only a VolumeSnapshotContent has (no no-op methods for the
// group kind).
type (
	// groupMemberContent: a member of a group (member) is cut and deleted
	// by the group's calls, and the binder writes its status.
	groupMemberContent interface{ member() bool }
	// checkedSpec: specError is what makes the spec unusable (stored before
	// the CRD's rules), or "".
	checkedSpec interface{ specError() string }
)

var (
	_ groupMemberContent = contentItem{}
	_ checkedSpec        = contentItem{}
)

// memberOfGroup reports whether it is a member of a group.
func memberOfGroup(it item) bool {
	m, ok := it.(groupMemberContent)
	return ok && m.member()
}

// specErrorOf is what makes the spec of it unusable, or "".
func specErrorOf(it item) string {
	if c, ok := it.(checkedSpec); ok {
		return c.specError()
	}
	return ""
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
func markedCreating(it item) bool {
	_, ok := it.object().GetAnnotations()[it.names().beingCreated]
	return ok
}
