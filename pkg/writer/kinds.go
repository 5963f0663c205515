package writer

import (
	"context"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The typed entry points of the Writer: one line each over the generic
// patchObject, patchStatus, createObject and deleteObject.

func (w *Writer) snapshots() kind[*snapv1.VolumeSnapshot] {
	return kind[*snapv1.VolumeSnapshot]{
		resource: "volumesnapshots", what: "VolumeSnapshot",
		patch: func(ctx context.Context, ns, name string, data []byte, sub ...string) (*snapv1.VolumeSnapshot, error) {
			return w.snap.SnapshotV1().VolumeSnapshots(ns).Patch(ctx, name, types.MergePatchType, data, metav1.PatchOptions{}, sub...)
		},
		create: func(ctx context.Context, obj *snapv1.VolumeSnapshot) (*snapv1.VolumeSnapshot, error) {
			return w.snap.SnapshotV1().VolumeSnapshots(obj.Namespace).Create(ctx, obj, metav1.CreateOptions{})
		},
		delete: func(ctx context.Context, ns, name string, opts metav1.DeleteOptions) error {
			return w.snap.SnapshotV1().VolumeSnapshots(ns).Delete(ctx, name, opts)
		},
	}
}

func (w *Writer) contents() kind[*snapv1.VolumeSnapshotContent] {
	return kind[*snapv1.VolumeSnapshotContent]{
		resource: "volumesnapshotcontents", what: "VolumeSnapshotContent",
		patch: func(ctx context.Context, _, name string, data []byte, sub ...string) (*snapv1.VolumeSnapshotContent, error) {
			return w.snap.SnapshotV1().VolumeSnapshotContents().Patch(ctx, name, types.MergePatchType, data, metav1.PatchOptions{}, sub...)
		},
		create: func(ctx context.Context, obj *snapv1.VolumeSnapshotContent) (*snapv1.VolumeSnapshotContent, error) {
			return w.snap.SnapshotV1().VolumeSnapshotContents().Create(ctx, obj, metav1.CreateOptions{})
		},
		delete: func(ctx context.Context, _, name string, opts metav1.DeleteOptions) error {
			return w.snap.SnapshotV1().VolumeSnapshotContents().Delete(ctx, name, opts)
		},
	}
}

func (w *Writer) groups() kind[*groupv1.VolumeGroupSnapshot] {
	return kind[*groupv1.VolumeGroupSnapshot]{
		resource: "volumegroupsnapshots", what: "VolumeGroupSnapshot",
		patch: func(ctx context.Context, ns, name string, data []byte, sub ...string) (*groupv1.VolumeGroupSnapshot, error) {
			return w.snap.GroupsnapshotV1().VolumeGroupSnapshots(ns).Patch(ctx, name, types.MergePatchType, data, metav1.PatchOptions{}, sub...)
		},
		create: func(ctx context.Context, obj *groupv1.VolumeGroupSnapshot) (*groupv1.VolumeGroupSnapshot, error) {
			return w.snap.GroupsnapshotV1().VolumeGroupSnapshots(obj.Namespace).Create(ctx, obj, metav1.CreateOptions{})
		},
		delete: func(ctx context.Context, ns, name string, opts metav1.DeleteOptions) error {
			return w.snap.GroupsnapshotV1().VolumeGroupSnapshots(ns).Delete(ctx, name, opts)
		},
	}
}

func (w *Writer) groupContents() kind[*groupv1.VolumeGroupSnapshotContent] {
	return kind[*groupv1.VolumeGroupSnapshotContent]{
		resource: "volumegroupsnapshotcontents", what: "VolumeGroupSnapshotContent",
		patch: func(ctx context.Context, _, name string, data []byte, sub ...string) (*groupv1.VolumeGroupSnapshotContent, error) {
			return w.snap.GroupsnapshotV1().VolumeGroupSnapshotContents().Patch(ctx, name, types.MergePatchType, data, metav1.PatchOptions{}, sub...)
		},
		create: func(ctx context.Context, obj *groupv1.VolumeGroupSnapshotContent) (*groupv1.VolumeGroupSnapshotContent, error) {
			return w.snap.GroupsnapshotV1().VolumeGroupSnapshotContents().Create(ctx, obj, metav1.CreateOptions{})
		},
		delete: func(ctx context.Context, _, name string, opts metav1.DeleteOptions) error {
			return w.snap.GroupsnapshotV1().VolumeGroupSnapshotContents().Delete(ctx, name, opts)
		},
	}
}

// PatchSnapshot merge-patches a VolumeSnapshot; an empty patch is no write.
func (w *Writer) PatchSnapshot(ctx context.Context, vs *snapv1.VolumeSnapshot, p *Patch) (*snapv1.VolumeSnapshot, error) {
	return patchObject(ctx, w, w.snapshots(), vs, p)
}

// PatchSnapshotStatus merge-patches the status subresource with status.
func (w *Writer) PatchSnapshotStatus(ctx context.Context, vs *snapv1.VolumeSnapshot, status map[string]any) (*snapv1.VolumeSnapshot, error) {
	return patchStatus(ctx, w, w.snapshots(), vs, status)
}

// CreateSnapshot creates a VolumeSnapshot (a group member).
func (w *Writer) CreateSnapshot(ctx context.Context, vs *snapv1.VolumeSnapshot) (*snapv1.VolumeSnapshot, error) {
	return createObject(ctx, w, w.snapshots(), vs)
}

// DeleteSnapshot deletes a VolumeSnapshot if its UID still matches.
func (w *Writer) DeleteSnapshot(ctx context.Context, vs *snapv1.VolumeSnapshot) error {
	return deleteObject(ctx, w, w.snapshots(), vs)
}

// CreateContent creates a VolumeSnapshotContent; until the cache has it,
// cachelag.Created finds it by name.
func (w *Writer) CreateContent(ctx context.Context, c *snapv1.VolumeSnapshotContent) (*snapv1.VolumeSnapshotContent, error) {
	return createObject(ctx, w, w.contents(), c)
}

// DeleteContent deletes a VolumeSnapshotContent if its UID still matches.
func (w *Writer) DeleteContent(ctx context.Context, c *snapv1.VolumeSnapshotContent) error {
	return deleteObject(ctx, w, w.contents(), c)
}

// PatchContent merge-patches a VolumeSnapshotContent.
func (w *Writer) PatchContent(ctx context.Context, c *snapv1.VolumeSnapshotContent, p *Patch) (*snapv1.VolumeSnapshotContent, error) {
	return patchObject(ctx, w, w.contents(), c, p)
}

// PatchContentStatus merge-patches the status subresource of a content.
func (w *Writer) PatchContentStatus(ctx context.Context, c *snapv1.VolumeSnapshotContent, status map[string]any) (*snapv1.VolumeSnapshotContent, error) {
	return patchStatus(ctx, w, w.contents(), c, status)
}

// PatchGroup merge-patches a VolumeGroupSnapshot.
func (w *Writer) PatchGroup(ctx context.Context, g *groupv1.VolumeGroupSnapshot, p *Patch) (*groupv1.VolumeGroupSnapshot, error) {
	return patchObject(ctx, w, w.groups(), g, p)
}

// PatchGroupStatus merge-patches the status subresource of a group.
func (w *Writer) PatchGroupStatus(ctx context.Context, g *groupv1.VolumeGroupSnapshot, status map[string]any) (*groupv1.VolumeGroupSnapshot, error) {
	return patchStatus(ctx, w, w.groups(), g, status)
}

// CreateGroup creates a VolumeGroupSnapshot (a schedule's run).
func (w *Writer) CreateGroup(ctx context.Context, g *groupv1.VolumeGroupSnapshot) (*groupv1.VolumeGroupSnapshot, error) {
	return createObject(ctx, w, w.groups(), g)
}

// DeleteGroup deletes a VolumeGroupSnapshot if its UID still matches (a
// schedule's retention).
func (w *Writer) DeleteGroup(ctx context.Context, g *groupv1.VolumeGroupSnapshot) error {
	return deleteObject(ctx, w, w.groups(), g)
}

// CreateGroupContent creates a VolumeGroupSnapshotContent.
func (w *Writer) CreateGroupContent(ctx context.Context, c *groupv1.VolumeGroupSnapshotContent) (*groupv1.VolumeGroupSnapshotContent, error) {
	return createObject(ctx, w, w.groupContents(), c)
}

// DeleteGroupContent deletes a VolumeGroupSnapshotContent if its UID still
// matches.
func (w *Writer) DeleteGroupContent(ctx context.Context, c *groupv1.VolumeGroupSnapshotContent) error {
	return deleteObject(ctx, w, w.groupContents(), c)
}

// PatchGroupContent merge-patches a VolumeGroupSnapshotContent.
func (w *Writer) PatchGroupContent(ctx context.Context, c *groupv1.VolumeGroupSnapshotContent, p *Patch) (*groupv1.VolumeGroupSnapshotContent, error) {
	return patchObject(ctx, w, w.groupContents(), c, p)
}

// PatchGroupContentStatus merge-patches the status subresource of a group
// content.
func (w *Writer) PatchGroupContentStatus(ctx context.Context, c *groupv1.VolumeGroupSnapshotContent, status map[string]any) (*groupv1.VolumeGroupSnapshotContent, error) {
	return patchStatus(ctx, w, w.groupContents(), c, status)
}
