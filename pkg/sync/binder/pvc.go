package binder

import (
	"context"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/sync"
	"github.com/snapkeeper/snapkeeper/pkg/writer"
)

// syncPVC removes our finalizer from a claim once no snapshot of it may
// still be cut, so a broken snapshot never keeps its claim Terminating.
func (c *Controller) syncPVC(ctx context.Context, key string) (sync.Result, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return sync.Result{}, nil
	}
	pvc, err := c.pvcs.PersistentVolumeClaims(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return sync.Result{}, nil
	}
	if err != nil {
		return sync.Result{}, err
	}
	if c.cfg.Writer.Stale(pvc) || !snapshot.HasFinalizer(pvc, snapshot.FinalizerPVCAsSource) {
		return sync.Result{}, nil // a stale copy: our write's event comes back
	}
	objs, err := c.snapIndex.ByIndex(indexByPVC, key)
	if err != nil {
		return sync.Result{}, err
	}
	for _, o := range objs {
		if vs, ok := o.(*snapv1.VolumeSnapshot); ok && c.needsClaim(vs) {
			return sync.Result{}, nil
		}
	}
	p := &writer.Patch{}
	p.Meta.RemoveFinalizers(pvc, snapshot.FinalizerPVCAsSource)
	_, err = c.cfg.Writer.PatchPVC(ctx, pvc, p)
	if apierrors.IsNotFound(err) {
		return sync.Result{}, nil
	}
	return sync.Result{}, err
}

// needsClaim reports whether a snapshot may still be cut from its claim:
// its content may have a CreateSnapshot in flight, or it is about to be
// created (no content yet, no problem recorded, not being deleted).
func (c *Controller) needsClaim(vs *snapv1.VolumeSnapshot) bool {
	if content := c.contentOf(vs); content != nil {
		return content.Spec.VolumeSnapshotRef.UID == vs.UID && cutInFlight(content)
	}
	if vs.DeletionTimestamp != nil {
		return false
	}
	if vs.Status != nil && (vs.Status.Error != nil || vs.Status.BoundVolumeSnapshotContentName != nil) {
		return false
	}
	return true
}
