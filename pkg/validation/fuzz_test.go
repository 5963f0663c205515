package validation

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/snapkeeper/snapkeeper/pkg/apis/snapkeeper/v1alpha1"
	. "github.com/snapkeeper/snapkeeper/pkg/validation/validationtest"
)

// fuzzKinds maps the kind argument of FuzzValidate to a fresh object.
var fuzzKinds = map[string]func() any{
	"VolumeSnapshotClass":   func() any { return &snapv1.VolumeSnapshotClass{} },
	"VolumeSnapshot":        func() any { return &snapv1.VolumeSnapshot{} },
	"VolumeSnapshotContent": func() any { return &snapv1.VolumeSnapshotContent{} },
	"PersistentVolumeClaim": func() any { return &corev1.PersistentVolumeClaim{} },

	"VolumeGroupSnapshotClass":   func() any { return &groupv1.VolumeGroupSnapshotClass{} },
	"VolumeGroupSnapshot":        func() any { return &groupv1.VolumeGroupSnapshot{} },
	"VolumeGroupSnapshotContent": func() any { return &groupv1.VolumeGroupSnapshotContent{} },

	"SnapshotSchedule": func() any { return &v1alpha1.SnapshotSchedule{} },
}

// FuzzValidate feeds arbitrary objects (and old objects) of each kind to
// the rules. They must not panic, and every denial must be a sentence that
// names the object, since that is what a user sees. The seed corpus under
// testdata/fuzz holds the manifest cases of test/testdata.
func FuzzValidate(f *testing.F) {
	f.Add("VolumeSnapshotClass", []byte(`{"metadata":{"name":"fast","annotations":{"snapshot.storage.kubernetes.io/is-default-class":"true"}},"driver":"hostpath.csi.k8s.io","deletionPolicy":"Delete","parameters":{"csi.storage.k8s.io/snapshotter-secret-name":"${volumesnapshot.name}"}}`), []byte(nil))
	f.Add("VolumeGroupSnapshot", []byte(`{"metadata":{"name":"g","namespace":"ns"},"spec":{"source":{"selector":{"matchLabels":{"app":"db"}}}}}`), []byte(nil))
	f.Add("VolumeGroupSnapshotContent", []byte(`{"metadata":{"name":"gc"},"spec":{"driver":"hostpath.csi.k8s.io","deletionPolicy":"Delete","source":{"volumeHandles":["v1"]},"volumeGroupSnapshotRef":{"name":"g","namespace":"ns"}}}`), []byte(`{"metadata":{"name":"gc"},"spec":{"source":{"groupSnapshotHandles":{"volumeGroupSnapshotHandle":"x","volumeSnapshotHandles":[""]}}}}`))
	f.Add("PersistentVolumeClaim", []byte(`{"metadata":{"name":"p","namespace":"ns"},"spec":{"volumeMode":"Block","resources":{"requests":{"storage":"1Gi"}},"dataSource":{"apiGroup":"snapshot.storage.k8s.io","kind":"VolumeSnapshot","name":"ready"}}}`), []byte(nil))
	// Seeds that reach every validator's deeper branches: the group class
	// (default conflict with group-standard), a group snapshot update that
	// changes its source, a group content naming pre-provisioned handles,
	// a claim's dataSourceRef across namespaces, to a populator and to a
	// group snapshot.
	f.Add("VolumeGroupSnapshotClass", []byte(`{"metadata":{"name":"g2","annotations":{"groupsnapshot.storage.kubernetes.io/is-default-class":"true"}},"driver":"hostpath.csi.k8s.io","deletionPolicy":"Retain","parameters":{"csi.storage.k8s.io/group-snapshotter-secret-name":"${volumegroupsnapshot.name}","csi.storage.k8s.io/group-snapshotter-secret-namespace":"ns"}}`), []byte(`{"metadata":{"name":"g2"},"driver":"hostpath.csi.k8s.io","deletionPolicy":"Delete"}`))
	f.Add("VolumeGroupSnapshot", []byte(`{"metadata":{"name":"g","namespace":"ns"},"spec":{"volumeGroupSnapshotClassName":"group-standard","source":{"selector":{"matchExpressions":[{"key":"app","operator":"In","values":["db"]}]}}}}`), []byte(`{"metadata":{"name":"g","namespace":"ns"},"spec":{"source":{"volumeGroupSnapshotContentName":"gc"}}}`))
	f.Add("VolumeGroupSnapshotContent", []byte(`{"metadata":{"name":"gc"},"spec":{"driver":"hostpath.csi.k8s.io","deletionPolicy":"Retain","source":{"groupSnapshotHandles":{"volumeGroupSnapshotHandle":"gh","volumeSnapshotHandles":["a","b"]}},"volumeGroupSnapshotRef":{"name":"g","namespace":"ns","uid":"u"}}}`), []byte(nil))
	f.Add("PersistentVolumeClaim", []byte(`{"metadata":{"name":"p","namespace":"ns"},"spec":{"resources":{"requests":{"storage":"1Gi"}},"dataSourceRef":{"apiGroup":"snapshot.storage.k8s.io","kind":"VolumeSnapshot","name":"ready","namespace":"other"}}}`), []byte(nil))
	f.Add("PersistentVolumeClaim", []byte(`{"metadata":{"name":"p","namespace":"ns"},"spec":{"dataSource":{"apiGroup":"cdi.kubevirt.io","kind":"VolumeImportSource","name":"i"},"dataSourceRef":{"apiGroup":"cdi.kubevirt.io","kind":"VolumeImportSource","name":"i"}}}`), []byte(nil))
	f.Add("PersistentVolumeClaim", []byte(`{"metadata":{"name":"p","namespace":"ns"},"spec":{"dataSourceRef":{"apiGroup":"groupsnapshot.storage.k8s.io","kind":"VolumeGroupSnapshot","name":"g"}}}`), []byte(nil))
	f.Add("SnapshotSchedule", []byte(`{"metadata":{"name":"s","namespace":"ns"},"spec":{"schedule":"0 3 * * *","timeZone":"Europe/Berlin","claimSelector":{"matchLabels":{"app":"db"},"matchExpressions":[{"key":"app","operator":"NotIn","values":["db"]}]},"groupSnapshot":{},"retention":{"keepLast":0,"maxAge":"7d"}}}`), []byte(`{"metadata":{"name":"s","namespace":"ns"},"spec":{"schedule":"@daily","claimSelector":{},"retention":{}}}`))
	world := &StaticLookup{}
	if err := world.Add(
		NewClass("standard", AsDefault()),
		NewSnapshot("ns", "ready", FromContent("c1"), Ready("2Gi", "c1")),
		NewContent("c1", WithSnapshotHandle("h"), BoundTo("ns", "ready", ""), WithSourceMode(corev1.PersistentVolumeFilesystem)),
		NewPVC("ns", "data", BoundToPV("pv1")),
		NewPV("pv1", DefaultDriver),
		NewPVC("ns", "db", WithLabel("app", "db"), BoundClaim("pv2")),
		NewPVC("ns", "late", WithLabel("app", "db")),
		NewPV("pv2", "other.csi.example.com"),
		NewGroupClass("group-standard", AsGroupDefault()),
		schema.GroupKind{Group: "cdi.kubevirt.io", Kind: "VolumeImportSource"},
	); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, kind string, objJSON, oldJSON []byte) {
		newObj, ok := fuzzKinds[kind]
		if !ok {
			return
		}
		obj, old := newObj(), newObj()
		if json.Unmarshal(objJSON, obj) != nil {
			return
		}
		op := Update
		if len(oldJSON) == 0 || json.Unmarshal(oldJSON, old) != nil {
			op, old = Create, nil
		}
		for _, opts := range []Options{{}, {StrictPopulators: true, AllowCrossNamespaceDataSource: true}} {
			v := Validator{Lookup: world, Options: opts}
			errs, warnings, err := v.Validate(op, obj, old)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range errs {
				if e.Field == "" || !strings.HasPrefix(e.Detail, kind+" ") {
					t.Errorf("denial without field or object name: field %q, detail %q", e.Field, e.Detail)
				}
			}
			// A GitOps re-sync sends the same object again: the verdict
			// must be the same, field for field and word for word.
			again, warnedAgain, err := v.Validate(op, obj, old)
			if err != nil || Message(again) != Message(errs) || !slices.Equal(warnings, warnedAgain) {
				t.Errorf("the same object judged twice: %q %q, then %q %q (%v)", Message(errs), warnings, Message(again), warnedAgain, err)
			}
		}
	})
}
