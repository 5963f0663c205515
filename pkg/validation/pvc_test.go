package validation

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	. "github.com/snapkeeper/snapkeeper/pkg/validation/validationtest"
)

func TestPVC(t *testing.T) {
	world := []any{
		NewSnapshot("ns", "ready", FromContent("c-fs"), Ready("2Gi", "c-fs")),
		NewContent("c-fs", WithSnapshotHandle("h1"), BoundTo("ns", "ready", "ready-uid"),
			WithSourceMode(corev1.PersistentVolumeFilesystem)),
		NewSnapshot("ns", "unready", FromPVC("data")),
		NewSnapshot("ns", "going", FromPVC("data"), Ready("1Gi", "c-going"), Deleting()),
		NewSnapshot("ns", "allowed", FromContent("c-allow"), Ready("1Gi", "c-allow")),
		NewContent("c-allow", WithSnapshotHandle("h2"), BoundTo("ns", "allowed", ""),
			WithSourceMode(corev1.PersistentVolumeBlock),
			WithAnnotation(snapshot.AnnAllowVolumeModeChange, "true")),
		NewSnapshot("other", "shared", FromPVC("x"), Ready("1Gi", "c-shared")),
		schema.GroupKind{Group: "cdi.kubevirt.io", Kind: "VolumeImportSource"},
	}
	tests := map[string]struct {
		obj         *corev1.PersistentVolumeClaim
		update      bool
		opts        Options
		lookupErr   error
		wantErr     string
		wantWarning string
	}{
		"a claim without data source is admitted": {
			obj: NewPVC("ns", "p"),
		},
		"a restore from a ready snapshot is admitted": {
			obj: NewPVC("ns", "p", RestoresFrom("ready"), WithSize("2Gi")),
		},
		"a restore through dataSourceRef only is admitted": {
			obj: NewPVC("ns", "p", WithDataSourceRef(snapshot.GroupName, "VolumeSnapshot", "ready", ""), WithSize("3Gi")),
		},
		"a snapshot source in the wrong group is denied": {
			obj:     NewPVC("ns", "p", WithDataSource("storage.k8s.io", "VolumeSnapshot", "ready"), WithSize("2Gi")),
			wantErr: `PersistentVolumeClaim "ns/p" restores from VolumeSnapshot "ready" but the data source's apiGroup is "storage.k8s.io": a VolumeSnapshot source needs apiGroup "snapshot.storage.k8s.io"`,
		},
		"a snapshot source without group is denied once, not twice": {
			obj:     NewPVC("ns", "p", WithDataSource("", "VolumeSnapshot", "ready")),
			wantErr: "the data source's apiGroup is empty",
		},
		"a snapshot source in dataSourceRef with the wrong group is denied": {
			obj:     NewPVC("ns", "p", WithDataSourceRef("snapshots.storage.k8s.io", "VolumeSnapshot", "ready", "")),
			wantErr: `the data source's apiGroup is "snapshots.storage.k8s.io"`,
		},
		"a clone with a group is denied": {
			obj:     NewPVC("ns", "p", WithDataSource("v1", "PersistentVolumeClaim", "data")),
			wantErr: `clones PersistentVolumeClaim "data" but the data source's apiGroup is "v1": claims are in the core API group; remove apiGroup`,
		},
		"a clone in the core group is admitted": {
			obj: NewPVC("ns", "p", WithDataSource("", "PersistentVolumeClaim", "data")),
		},
		"an unregistered populator kind is a warning": {
			obj:         NewPVC("ns", "p", WithDataSourceRef("hello.example.com", "Hello", "h", "")),
			wantWarning: `uses a data source of kind "Hello" and apiGroup "hello.example.com", which no VolumePopulator registers`,
		},
		"an unregistered populator kind is denied under the strict flag": {
			obj:     NewPVC("ns", "p", WithDataSourceRef("hello.example.com", "Hello", "h", "")),
			opts:    Options{StrictPopulators: true},
			wantErr: "install the populator and its VolumePopulator object",
		},
		"a registered populator kind is admitted under the strict flag": {
			obj:  NewPVC("ns", "p", WithDataSourceRef("cdi.kubevirt.io", "VolumeImportSource", "img", "")),
			opts: Options{StrictPopulators: true},
		},
		"a kind in the wrong case gets a hint": {
			obj:         NewPVC("ns", "p", WithDataSourceRef(snapshot.GroupName, "volumesnapshot", "ready", "")),
			wantWarning: `did you mean "VolumeSnapshot"?`,
		},
		"a failing populator lookup is only a warning": {
			obj:         NewPVC("ns", "p", WithDataSourceRef("hello.example.com", "Hello", "h", "")),
			opts:        Options{StrictPopulators: true},
			lookupErr:   errors.New("boom"),
			wantWarning: "could not check VolumePopulators",
		},
		"a missing snapshot is a warning": {
			obj:         NewPVC("ns", "p", RestoresFrom("later")),
			wantWarning: `VolumeSnapshot "ns/later" does not exist yet`,
		},
		"an unready snapshot is a warning": {
			obj:         NewPVC("ns", "p", RestoresFrom("unready")),
			wantWarning: `VolumeSnapshot "ns/unready" is not ready to use yet`,
		},
		"a snapshot being deleted is denied": {
			obj:     NewPVC("ns", "p", RestoresFrom("going")),
			wantErr: `restores from VolumeSnapshot "ns/going", which is being deleted`,
		},
		"a claim smaller than the restore size is denied": {
			obj:     NewPVC("ns", "p", RestoresFrom("ready"), WithSize("1Gi")),
			wantErr: `requests 1Gi but VolumeSnapshot "ns/ready" needs at least its restoreSize 2Gi`,
		},
		"a claim in other units but large enough is admitted": {
			obj: NewPVC("ns", "p", RestoresFrom("ready"), WithSize("2148M")),
		},
		"a block restore of a filesystem snapshot is denied": {
			obj:     NewPVC("ns", "p", RestoresFrom("ready"), WithSize("2Gi"), WithMode(corev1.PersistentVolumeBlock)),
			wantErr: `asks for volumeMode Block but VolumeSnapshot "ns/ready" was cut from a Filesystem volume`,
		},
		"a mode change the content allows is admitted": {
			obj: NewPVC("ns", "p", RestoresFrom("allowed")),
		},
		"a cross-namespace source is denied by default": {
			obj:     NewPVC("ns", "p", WithDataSourceRef(snapshot.GroupName, "VolumeSnapshot", "shared", "other")),
			wantErr: `takes its data from namespace "other": cross-namespace data sources are not allowed here`,
		},
		"a cross-namespace clone is denied by default": {
			obj:     NewPVC("ns", "p", WithDataSourceRef("", "PersistentVolumeClaim", "x", "other")),
			wantErr: "--allow-cross-namespace-data-source",
		},
		"a cross-namespace source is looked up there when allowed": {
			obj:  NewPVC("ns", "p", WithDataSourceRef(snapshot.GroupName, "VolumeSnapshot", "shared", "other")),
			opts: Options{AllowCrossNamespaceDataSource: true},
		},
		"a cross-namespace source that is too big is denied when allowed": {
			obj:     NewPVC("ns", "p", WithDataSourceRef(snapshot.GroupName, "VolumeSnapshot", "shared", "other"), WithSize("100Mi")),
			opts:    Options{AllowCrossNamespaceDataSource: true},
			wantErr: `VolumeSnapshot "other/shared" needs at least its restoreSize 1Gi`,
		},
		"a failing snapshot lookup denies with a retry hint": {
			obj:       NewPVC("ns", "p", RestoresFrom("ready")),
			lookupErr: errors.New("boom"),
			wantErr:   "retry shortly",
		},
		"an update is never judged": {
			obj:    NewPVC("ns", "p", RestoresFrom("going")),
			update: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			l := lookupOf(t, world...)
			l.Err = tc.lookupErr
			op := Create
			if tc.update {
				op = Update
			}
			errs, warnings := Validator{Lookup: l, Options: tc.opts}.PVC(op, tc.obj, tc.obj)
			expect(t, errs, warnings, tc.wantErr, tc.wantWarning)
			if len(errs) > 1 {
				t.Errorf("want at most one error, got %d:\n%s", len(errs), Message(errs))
			}
		})
	}
}
