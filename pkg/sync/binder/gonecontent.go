package binder

import (
	"sync"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	"k8s.io/apimachinery/pkg/types"
)

// goneContents remembers the contents whose delete event the informer
// delivered while the snapshot they were bound to was being deleted. The
// release of that snapshot (ownContent) then knows the content is gone and
// need not ask the API server, which it otherwise does to tell a content
// gone from one created a moment ago that the cache does not show yet: a
// content the informer saw deleted is not one the cache has yet to show,
// and no content of that name is created for a snapshot being deleted.
// That read was one of the three round trips in a row by which a worker
// releases a deleted snapshot. An entry lives until the snapshot's own
// delete event (onSnapshotGone); a restarted binder remembers nothing and
// reads, as before.
type goneContents struct {
	mu sync.Mutex
	m  map[string]types.UID // content name -> UID of the snapshot it was bound to
}

func (g *goneContents) add(name string, snapshot types.UID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.m == nil {
		g.m = map[string]types.UID{}
	}
	g.m[name] = snapshot
}

// seen reports whether the content name's delete event came while the
// snapshot with UID snapshot was being deleted.
func (g *goneContents) seen(name string, snapshot types.UID) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	uid, ok := g.m[name]
	return ok && snapshot != "" && uid == snapshot
}

func (g *goneContents) forget(name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.m, name)
}

func (g *goneContents) len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.m)
}

// onContentGone hears every content delete event: the content of a
// dynamic snapshot being deleted (in the cache, same UID as the content's
// reference) is remembered as gone for that snapshot's release.
func (c *Controller) onContentGone(obj any) {
	content, ok := obj.(*snapv1.VolumeSnapshotContent)
	if !ok {
		return
	}
	ref := content.Spec.VolumeSnapshotRef
	if ref.UID == "" || ref.Name == "" {
		return
	}
	vs, err := c.snapshots.VolumeSnapshots(ref.Namespace).Get(ref.Name)
	if err != nil || vs.UID != ref.UID || vs.DeletionTimestamp == nil ||
		vs.Spec.Source.PersistentVolumeClaimName == nil || contentNameOf(vs) != content.Name {
		return
	}
	c.goneContents.add(content.Name, vs.UID)
}
