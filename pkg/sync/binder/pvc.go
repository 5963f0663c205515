package binder

import (
	"context"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/sync/workloop"
	"github.com/snapkeeper/snapkeeper/pkg/writer"
)

// syncPVC removes our finalizer from a claim once no snapshot of it may
// still be cut, so a broken snapshot never keeps its claim Terminating.
func (c *Controller) syncPVC(ctx context.Context, key string) (workloop.Result, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return workloop.Result{}, nil
	}
	pvc, err := c.pvcs.PersistentVolumeClaims(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return workloop.Result{}, nil
	}
	if err != nil {
		return workloop.Result{}, err
	}
	if c.cfg.Writer.Stale(pvc) || !snapshot.HasFinalizer(pvc, snapshot.FinalizerPVCAsSource) {
		return workloop.Result{}, nil // a stale copy: our write's event comes back
	}
	objs, err := c.snapIndex.ByIndex(indexByPVC, key)
	if err != nil {
		return workloop.Result{}, err
	}
	for _, o := range objs {
		if vs, ok := o.(*snapv1.VolumeSnapshot); ok && c.needsClaim(vs) {
			return workloop.Result{}, nil
		}
	}
	p := &writer.Patch{}
	p.Meta.RemoveFinalizers(pvc, snapshot.FinalizerPVCAsSource)
	_, err = c.cfg.Writer.UpdatePVC(ctx, pvc, p)
	if apierrors.IsNotFound(err) {
		return workloop.Result{}, nil
	}
	return workloop.Result{}, err
}

// needsClaim reports whether a snapshot still needs its claim, as the
// community controller decides: until the snapshot is ready. A cut may be in
// flight before that, and some drivers still read the volume after the cut
// while they upload the snapshot (readyToUse=false); holding the claim until
// ready is the safe choice. A snapshot being deleted needs it only while a
// CreateSnapshot may still run.
func (c *Controller) needsClaim(vs *snapv1.VolumeSnapshot) bool {
	if content := c.contentOf(vs); content != nil {
		switch {
		case content.Spec.VolumeSnapshotRef.UID != vs.UID:
			return false
		case cutInFlight(content):
			return true
		case vs.DeletionTimestamp != nil:
			return false
		}
		return !contentReady(content)
	}
	return vs.DeletionTimestamp == nil
}
