package faults

import (
	"context"
	"fmt"
	"testing"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// resyncObject is one object of the GitOps repository: what is applied,
// and the field its denial must name ("" for a valid object).
type resyncObject struct {
	gvr       schema.GroupVersionResource
	kind      string
	namespace string
	name      string
	obj       any
	wantField string
}

var (
	classGVR   = snapv1.SchemeGroupVersion.WithResource("volumesnapshotclasses")
	snapGVR    = snapv1.SchemeGroupVersion.WithResource("volumesnapshots")
	contentGVR = snapv1.SchemeGroupVersion.WithResource("volumesnapshotcontents")
	pvcGVR     = corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")
)

const resyncDriver = "resync.csi.snapkeeper.io"

// resyncWorld creates what the repository's objects refer to in ns: a
// bound claim "data", a 2Gi snapshot "ready" (ready, with its content),
// and a content bound to another snapshot; it returns the names of the
// two contents.
func resyncWorld(t *testing.T, env *framework.Env, ns string) (ready, taken string) {
	t.Helper()
	ctx := context.Background()
	env.CreateBoundPVC(t, ns, "data", framework.PVCOptions{Driver: resyncDriver})
	ready, taken = "rs-"+ns+"-ready", "rs-"+ns+"-taken"
	size := resource.MustParse("2Gi")
	contents := env.Snap.SnapshotV1().VolumeSnapshotContents()
	for _, c := range []*snapv1.VolumeSnapshotContent{
		preProvisioned(ready, "handle-ready", ns, "ready"),
		preProvisioned(taken, "handle-taken", ns, "owner"),
	} {
		created, err := contents.Create(ctx, c, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create content %s: %v", c.Name, err)
		}
		created.Status = &snapv1.VolumeSnapshotContentStatus{ReadyToUse: ptr.To(true), RestoreSize: ptr.To(size.Value()),
			SnapshotHandle: c.Spec.Source.SnapshotHandle}
		if _, err := contents.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("status of content %s: %v", c.Name, err)
		}
	}
	vs := &snapv1.VolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "ready", Namespace: ns},
		Spec: snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{VolumeSnapshotContentName: &ready}}}
	created := env.CreateSnapshot(t, vs)
	created.Status = &snapv1.VolumeSnapshotStatus{BoundVolumeSnapshotContentName: &ready, ReadyToUse: ptr.To(true), RestoreSize: &size}
	if _, err := env.Snap.SnapshotV1().VolumeSnapshots(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("status of snapshot ready: %v", err)
	}
	t.Cleanup(func() {
		for _, c := range []string{ready, taken} {
			_ = contents.Delete(context.Background(), c, metav1.DeleteOptions{})
		}
	})
	return ready, taken
}

func preProvisioned(name, handle, ns, snapshot string) *snapv1.VolumeSnapshotContent {
	return &snapv1.VolumeSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: snapv1.VolumeSnapshotContentSpec{
			Driver: resyncDriver, DeletionPolicy: snapv1.VolumeSnapshotContentRetain,
			Source:            snapv1.VolumeSnapshotContentSource{SnapshotHandle: &handle},
			VolumeSnapshotRef: corev1.ObjectReference{Name: snapshot, Namespace: ns},
		},
	}
}

// resyncRepository is the 200 objects: per kind (classes, snapshots,
// contents, claims restoring from a snapshot) 30 valid ones, and 10 of
// each of 8 invalid shapes the webhook denies whatever the order of the
// batch (the API server's own validation would deny others first).
func resyncRepository(ns, taken string) []resyncObject {
	var out []resyncObject
	add := func(gvr schema.GroupVersionResource, kind, namespace, name string, obj any, field string) {
		out = append(out, resyncObject{gvr: gvr, kind: kind, namespace: namespace, name: name, obj: obj, wantField: field})
	}
	class := func(name, driver string, params map[string]string) *snapv1.VolumeSnapshotClass {
		c := framework.SnapshotClass(name, driver, snapv1.VolumeSnapshotContentDelete, false)
		c.TypeMeta = metav1.TypeMeta{APIVersion: "snapshot.storage.k8s.io/v1", Kind: "VolumeSnapshotClass"}
		c.Parameters = params
		return c
	}
	templated := map[string]string{
		"csi.storage.k8s.io/snapshotter-secret-name":      "${volumesnapshot.name}",
		"csi.storage.k8s.io/snapshotter-secret-namespace": "${volumesnapshot.namespace}",
	}
	for i := range 30 {
		name := fmt.Sprintf("rs-%s-class-%02d", ns, i)
		add(classGVR, "VolumeSnapshotClass", "", name, class(name, resyncDriver, map[string]string{"tier": "gold"}), "")
		if i%2 == 0 {
			out[len(out)-1].obj.(*snapv1.VolumeSnapshotClass).Parameters = templated
		}
		vs := framework.DynamicSnapshot(ns, fmt.Sprintf("snap-%02d", i), "data", ptr.To(name))
		vs.TypeMeta = metav1.TypeMeta{APIVersion: "snapshot.storage.k8s.io/v1", Kind: "VolumeSnapshot"}
		add(snapGVR, "VolumeSnapshot", ns, vs.Name, vs, "")
		c := preProvisioned(fmt.Sprintf("rs-%s-content-%02d", ns, i), fmt.Sprintf("handle-%02d", i), ns, fmt.Sprintf("pre-%02d", i))
		c.TypeMeta = metav1.TypeMeta{APIVersion: "snapshot.storage.k8s.io/v1", Kind: "VolumeSnapshotContent"}
		add(contentGVR, "VolumeSnapshotContent", "", c.Name, c, "")
		size := []string{"2Gi", "5Gi"}[i%2]
		add(pvcGVR, "PersistentVolumeClaim", ns, fmt.Sprintf("restore-%02d", i), restoreClaim(ns, fmt.Sprintf("restore-%02d", i), size, "snapshot.storage.k8s.io", "", i%3 == 0), "")
	}
	for i := range 10 {
		n := func(what string) string { return fmt.Sprintf("rs-%s-%s-%02d", ns, what, i) }
		add(classGVR, "VolumeSnapshotClass", "", n("bad-driver"), class(n("bad-driver"), fmt.Sprintf("bad driver %d!", i), nil), "driver")
		add(classGVR, "VolumeSnapshotClass", "", n("bad-param"), class(n("bad-param"), resyncDriver, map[string]string{"csi.storage.k8s.io/fstype": "ext4"}), "parameters")
		add(classGVR, "VolumeSnapshotClass", "", n("bad-template"), class(n("bad-template"), resyncDriver, map[string]string{
			"csi.storage.k8s.io/snapshotter-secret-name": "${pvc.name}", "csi.storage.k8s.io/snapshotter-secret-namespace": "default"}), "parameters")
		c := preProvisioned(n("bad-driver-content"), "h", ns, "x")
		c.TypeMeta = metav1.TypeMeta{APIVersion: "snapshot.storage.k8s.io/v1", Kind: "VolumeSnapshotContent"}
		c.Spec.Driver = fmt.Sprintf("-bad%d.example.com", i)
		add(contentGVR, "VolumeSnapshotContent", "", c.Name, c, "spec.driver")
		vs := &snapv1.VolumeSnapshot{TypeMeta: metav1.TypeMeta{APIVersion: "snapshot.storage.k8s.io/v1", Kind: "VolumeSnapshot"},
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("binds-taken-%02d", i), Namespace: ns},
			Spec:       snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{VolumeSnapshotContentName: ptr.To(taken)}}}
		add(snapGVR, "VolumeSnapshot", ns, vs.Name, vs, "spec.source.volumeSnapshotContentName")
		for _, bad := range []struct{ name, size, group, fromNS, field string }{
			{"cross-namespace", "2Gi", "snapshot.storage.k8s.io", "elsewhere", "spec.dataSourceRef.namespace"},
			{"wrong-group", "2Gi", "storage.k8s.io", "", "spec.dataSource"},
			{"too-small", "1Gi", "snapshot.storage.k8s.io", "", "spec.resources.requests"},
		} {
			name := fmt.Sprintf("%s-%02d", bad.name, i)
			add(pvcGVR, "PersistentVolumeClaim", ns, name, restoreClaim(ns, name, bad.size, bad.group, bad.fromNS, bad.fromNS != ""), bad.field)
		}
	}
	return out
}

// restoreClaim restores snapshot "ready" (of namespace fromNS, if set)
// into a claim of size, through dataSourceRef if ref, else dataSource.
func restoreClaim(ns, name, size, group, fromNS string, ref bool) *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		},
	}
	if ref {
		r := &corev1.TypedObjectReference{APIGroup: &group, Kind: "VolumeSnapshot", Name: "ready"}
		if fromNS != "" {
			r.Namespace = &fromNS
		}
		pvc.Spec.DataSourceRef = r
	} else {
		pvc.Spec.DataSource = &corev1.TypedLocalObjectReference{APIGroup: &group, Kind: "VolumeSnapshot", Name: "ready"}
	}
	return pvc
}
