package binder

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
)

// namedContentRules is what binding a pre-provisioned content checks, written
// once for VolumeSnapshot and VolumeGroupSnapshot: the kinds' names, fields
// and reasons are the only difference.
type namedContentRules struct {
	content, snapshot string // kinds: "VolumeSnapshotContent", "VolumeSnapshot"
	refField          string // the content's reference to its snapshot
	sourceField       string // the snapshot's field naming the content
	dynamicSource     string // the field of a dynamic content
	staticSource      string // the field of a pre-provisioned content
	otherSource       string // how to take the snapshot without a content
	newContent        string // what to create instead of a deleting content
	missing, misbound string // event reasons
	mismatch          string
}

var (
	snapshotNamedContent = namedContentRules{
		content: "VolumeSnapshotContent", snapshot: "VolumeSnapshot",
		refField: "spec.volumeSnapshotRef", sourceField: "spec.source.volumeSnapshotContentName",
		dynamicSource: "spec.source.volumeHandle",
		staticSource:  "spec.source.snapshotHandle in spec.source.volumeSnapshotContentName",
		otherSource:   "take the snapshot from a claim with spec.source.persistentVolumeClaimName",
		newContent:    "a new content for the snapshot handle",
		missing:       snapshot.ReasonSnapshotContentMissing, misbound: snapshot.ReasonSnapshotContentMisbound,
		mismatch: snapshot.ReasonSnapshotContentMismatch,
	}
	groupNamedContent = namedContentRules{
		content: "VolumeGroupSnapshotContent", snapshot: "VolumeGroupSnapshot",
		refField: "spec.volumeGroupSnapshotRef", sourceField: "spec.source.volumeGroupSnapshotContentName",
		dynamicSource: "spec.source.volumeHandles",
		staticSource:  "spec.source.groupSnapshotHandles",
		otherSource:   "use spec.source.selector",
		newContent:    "a new content",
		missing:       snapshot.ReasonGroupSnapshotContentMissing, misbound: snapshot.ReasonGroupSnapshotBindFailed,
		mismatch: snapshot.ReasonGroupSnapshotContentMismatch,
	}
)

// namedContentFacts is the part of a pre-provisioned content the checks read.
type namedContentFacts struct {
	exists   bool
	ref      corev1.ObjectReference
	dynamic  bool // it has the dynamic source, not the pre-provisioned one
	deleting bool
}

// check returns the problem that keeps content name from binding to the
// snapshot namespace/name (uid), or nil.
func (k namedContentRules) check(name string, c namedContentFacts, namespace, snapName string, uid types.UID) *problem {
	if !c.exists {
		return problemf(k.missing, "%s %q does not exist yet; create it, or fix %s", k.content, name, k.sourceField)
	}
	ref := c.ref
	if ref.Name != snapName || ref.Namespace != namespace || (ref.UID != "" && ref.UID != uid) {
		return problemf(k.misbound,
			"%s %q is bound to %s %s/%s (uid %q), not to this one; point %s of the content at %s/%s or use another content",
			k.content, name, k.snapshot, ref.Namespace, ref.Name, ref.UID, k.refField, namespace, snapName)
	}
	if c.dynamic {
		return problemf(k.mismatch, "%s %q is a dynamic content (%s), not a pre-provisioned one; name a content with %s, or %s",
			k.content, name, k.dynamicSource, k.staticSource, k.otherSource)
	}
	if c.deleting && ref.UID == "" {
		return problemf(k.missing, "%s %q is being deleted and cannot be bound; create %s and point %s at it",
			k.content, name, k.newContent, k.sourceField)
	}
	return nil
}

// checkNamedContent returns the content (name) that a pre-provisioned
// snapshot or group (namespace/snapName, uid) names, or the problem that
// keeps them from binding; facts reads what the checks need of a content.
func checkNamedContent[T any](k namedContentRules, name string, get func(string) (T, error), facts func(T) namedContentFacts,
	namespace, snapName string, uid types.UID) (T, *problem) {
	var none T
	content, err := get(name)
	if err != nil {
		return none, k.check(name, namedContentFacts{}, namespace, snapName, uid)
	}
	f := facts(content)
	f.exists = true
	if p := k.check(name, f, namespace, snapName, uid); p != nil {
		return none, p
	}
	return content, nil
}
