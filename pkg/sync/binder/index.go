package binder

import (
	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
)

// Index names. Each answers "which snapshots wait for this object?".
const (
	indexByPVC     = "pvc"     // namespace/claim of a dynamic snapshot
	indexByClass   = "class"   // class name, or noClass
	indexByContent = "content" // content named by a pre-provisioned snapshot
	indexRestoring = "restore" // on claims: namespace/snapshot they restore from
	indexByGroup   = "group"   // namespace/group a member snapshot belongs to
	// indexByVolumeHandle: on volumes, driver/handle of a CSI volume.
	indexByVolumeHandle = "volumeHandle"
	// indexByGroupHandle: on group contents, the backend group id.
	indexByGroupHandle = "groupHandle"
	// indexUnbound: on groups, the namespace of a group not yet bound to a
	// content, and allNamespaces for every such group.
	indexUnbound = "unbound"

	allNamespaces = "\x00all"

	noClass = "\x00default"
)

func objKey(ns, name string) string { return ns + "/" + name }

var snapshotIndexers = cache.Indexers{
	indexByPVC: func(obj any) ([]string, error) {
		vs, ok := obj.(*snapv1.VolumeSnapshot)
		if !ok || vs.Spec.Source.PersistentVolumeClaimName == nil {
			return nil, nil
		}
		return []string{objKey(vs.Namespace, *vs.Spec.Source.PersistentVolumeClaimName)}, nil
	},
	indexByClass: func(obj any) ([]string, error) {
		vs, ok := obj.(*snapv1.VolumeSnapshot)
		if !ok {
			return nil, nil
		}
		if vs.Spec.VolumeSnapshotClassName == nil {
			return []string{noClass}, nil
		}
		return []string{*vs.Spec.VolumeSnapshotClassName}, nil
	},
	// A member is indexed under the group it names (statedGroup), by
	// status too: a member whose deletion waits for its group must hear the
	// group go even after the garbage collector stripped its owner
	// reference.
	indexByGroup: func(obj any) ([]string, error) {
		vs, ok := obj.(*snapv1.VolumeSnapshot)
		if !ok {
			return nil, nil
		}
		if g, _ := statedGroup(vs); g != "" {
			return []string{objKey(vs.Namespace, g)}, nil
		}
		return nil, nil
	},
	indexByContent: func(obj any) ([]string, error) {
		vs, ok := obj.(*snapv1.VolumeSnapshot)
		if !ok || vs.Spec.Source.VolumeSnapshotContentName == nil {
			return nil, nil
		}
		return []string{*vs.Spec.Source.VolumeSnapshotContentName}, nil
	},
}

var pvcIndexers = cache.Indexers{
	indexRestoring: func(obj any) ([]string, error) {
		pvc, ok := obj.(*corev1.PersistentVolumeClaim)
		if !ok {
			return nil, nil
		}
		return restoreSources(pvc), nil
	},
}

// restoreSources are the namespace/name keys of the VolumeSnapshots a claim
// restores from, through dataSource or dataSourceRef (which may name
// another namespace).
func restoreSources(pvc *corev1.PersistentVolumeClaim) []string {
	var out []string
	if ds := pvc.Spec.DataSource; ds != nil && ds.Kind == snapshot.KindSnapshot &&
		ds.APIGroup != nil && *ds.APIGroup == snapshot.GroupName {
		out = append(out, objKey(pvc.Namespace, ds.Name))
	}
	if ref := pvc.Spec.DataSourceRef; ref != nil && ref.Kind == snapshot.KindSnapshot &&
		ref.APIGroup != nil && *ref.APIGroup == snapshot.GroupName {
		ns := pvc.Namespace
		if ref.Namespace != nil && *ref.Namespace != "" {
			ns = *ref.Namespace
		}
		k := objKey(ns, ref.Name)
		if len(out) == 0 || out[0] != k {
			out = append(out, k)
		}
	}
	return out
}

var pvIndexers = cache.Indexers{
	indexByVolumeHandle: func(obj any) ([]string, error) {
		pv, ok := obj.(*corev1.PersistentVolume)
		if !ok || pv.Spec.CSI == nil {
			return nil, nil
		}
		return []string{pv.Spec.CSI.Driver + "/" + pv.Spec.CSI.VolumeHandle}, nil
	},
}

// groupIndexers let a claim or class event wake the groups that wait for
// one (those not bound yet) without reading every group a schedule keeps.
var groupIndexers = cache.Indexers{
	indexUnbound: func(obj any) ([]string, error) {
		g, ok := obj.(*groupv1.VolumeGroupSnapshot)
		if !ok || (g.Status != nil && g.Status.BoundVolumeGroupSnapshotContentName != nil) {
			return nil, nil
		}
		return []string{g.Namespace, allNamespaces}, nil
	},
}

var groupContentIndexers = cache.Indexers{
	indexByGroupHandle: func(obj any) ([]string, error) {
		content, ok := obj.(*groupv1.VolumeGroupSnapshotContent)
		if !ok {
			return nil, nil
		}
		if st := content.Status; st != nil && st.VolumeGroupSnapshotHandle != nil {
			return []string{*st.VolumeGroupSnapshotHandle}, nil
		}
		if h := content.Spec.Source.GroupSnapshotHandles; h != nil {
			return []string{h.VolumeGroupSnapshotHandle}, nil
		}
		return nil, nil
	},
}
