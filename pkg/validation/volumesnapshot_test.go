package validation

import (
	"errors"
	"testing"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"

	. "github.com/snapkeeper/snapkeeper/pkg/validation/validationtest"
)

func TestSnapshot(t *testing.T) {
	world := []any{
		NewClass("standard", AsDefault()),
		NewClass("gold"),
		NewClass("ebs", WithDriver(ebs)),
		NewPV("pv-data", DefaultDriver),
		NewPVC("ns", "data", BoundToPV("pv-data")),
		NewPVC("ns", "pending"),
		NewContent("pre", WithSnapshotHandle("snap-1"), BoundTo("ns", "imported", "")),
	}
	tests := map[string]verdictCase[*snapv1.VolumeSnapshot]{
		"a snapshot of a bound claim with the default class is admitted": {
			obj: NewSnapshot("ns", "s1", FromPVC("data")),
		},
		"a snapshot with a class of the claim's driver is admitted": {
			obj: NewSnapshot("ns", "s1", FromPVC("data"), WithClass("gold")),
		},
		"a snapshot of an unbound claim is admitted without a driver check": {
			obj: NewSnapshot("ns", "s1", FromPVC("pending"), WithClass("ebs")),
		},
		"two sources are denied": {
			obj:     NewSnapshot("ns", "s1", FromPVC("data"), FromContent("pre")),
			wantErr: `VolumeSnapshot "ns/s1" sets both spec.source.persistentVolumeClaimName and spec.source.volumeSnapshotContentName`,
		},
		"no source is denied": {
			obj:     NewSnapshot("ns", "s1"),
			wantErr: `VolumeSnapshot "ns/s1" has no source`,
		},
		"an empty claim name is denied": {
			obj:     NewSnapshot("ns", "s1", FromPVC("")),
			wantErr: "has an empty spec.source.persistentVolumeClaimName",
		},
		"an empty class name is denied": {
			obj:     NewSnapshot("ns", "s1", FromPVC("data"), WithClass("")),
			wantErr: "sets spec.volumeSnapshotClassName to the empty string",
		},
		"a missing claim is a warning": {
			obj:         NewSnapshot("ns", "s1", FromPVC("later")),
			wantWarning: `PersistentVolumeClaim "later" does not exist yet in namespace "ns"`,
		},
		"a missing class is a warning": {
			obj:         NewSnapshot("ns", "s1", FromPVC("data"), WithClass("platinum")),
			wantWarning: `VolumeSnapshotClass "platinum" does not exist yet`,
		},
		"a class of another driver than the claim's is a warning": {
			obj:         NewSnapshot("ns", "s1", FromPVC("data"), WithClass("ebs")),
			wantWarning: `VolumeSnapshotClass "ebs" is for driver "ebs.csi.aws.com" but claim "data" is provisioned by "hostpath.csi.k8s.io"`,
		},
		"no default class for the claim's driver is a warning": {
			existing:    []any{NewClass("standard")},
			obj:         NewSnapshot("ns", "s1", FromPVC("data")),
			wantWarning: `has no default VolumeSnapshotClass`,
		},
		"several default classes for the claim's driver is a warning": {
			existing:    []any{NewClass("other", AsDefault())},
			obj:         NewSnapshot("ns", "s1", FromPVC("data")),
			wantWarning: `has several default VolumeSnapshotClasses ("other", "standard")`,
		},
		"a pre-provisioned snapshot whose content names it is admitted": {
			obj: NewSnapshot("ns", "imported", FromContent("pre")),
		},
		"a pre-provisioned snapshot whose content names another snapshot is denied": {
			obj:     NewSnapshot("ns", "thief", FromContent("pre")),
			wantErr: `VolumeSnapshot "ns/thief" cannot bind VolumeSnapshotContent "pre": its spec.volumeSnapshotRef names "ns/imported"`,
		},
		"a pre-provisioned snapshot in another namespace than the content names is denied": {
			obj:     NewSnapshot("other", "imported", FromContent("pre")),
			wantErr: `point the content's volumeSnapshotRef at "other/imported"`,
		},
		"a missing content is a warning": {
			obj:         NewSnapshot("ns", "s1", FromContent("later")),
			wantWarning: `VolumeSnapshotContent "later" does not exist yet`,
		},
		"a failing content lookup denies with a retry hint": {
			lookupErr: errors.New("boom"),
			obj:       NewSnapshot("ns", "s1", FromContent("pre")),
			wantErr:   "retry shortly",
		},
		"a failing claim lookup is only a warning": {
			lookupErr:   errors.New("boom"),
			obj:         NewSnapshot("ns", "s1", FromPVC("data")),
			wantWarning: "could not check PersistentVolumeClaim",
		},
		"changing the source is denied": {
			obj:     NewSnapshot("ns", "s1", FromPVC("other")),
			old:     NewSnapshot("ns", "s1", FromPVC("data")),
			wantErr: `cannot change spec.source from persistentVolumeClaimName "data" to persistentVolumeClaimName "other"`,
		},
		"switching to a pre-provisioned source is denied": {
			obj:     NewSnapshot("ns", "s1", FromContent("pre")),
			old:     NewSnapshot("ns", "s1", FromPVC("data")),
			wantErr: "create a new VolumeSnapshot instead",
		},
		"the controller filling in the default class is admitted": {
			obj: NewSnapshot("ns", "s1", FromPVC("data"), WithClass("standard")),
			old: NewSnapshot("ns", "s1", FromPVC("data")),
		},
		"a label change is admitted": {
			obj: NewSnapshot("ns", "s1", FromPVC("data"), WithLabel("a", "b")),
			old: NewSnapshot("ns", "s1", FromPVC("data")),
		},
		"a legacy snapshot with two sources can still lose a finalizer": {
			obj: NewSnapshot("ns", "s1", FromPVC("data"), FromContent("pre")),
			old: NewSnapshot("ns", "s1", FromPVC("data"), FromContent("pre"), WithLabel("a", "b")),
		},
		"a snapshot being deleted is admitted whatever it changes": {
			obj: NewSnapshot("ns", "s1", FromPVC("other"), Deleting()),
			old: NewSnapshot("ns", "s1", FromPVC("data"), Deleting()),
		},
		"a bound content is not re-checked on update": {
			obj: NewSnapshot("ns", "thief", FromContent("pre"), WithLabel("a", "b")),
			old: NewSnapshot("ns", "thief", FromContent("pre")),
		},
	}
	runVerdicts(t, func() []any { return world }, Validator.Snapshot, tests)
}
