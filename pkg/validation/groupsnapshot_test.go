package validation

import (
	"errors"
	"testing"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	. "github.com/snapkeeper/snapkeeper/pkg/validation/validationtest"
)

const gce = "pd.csi.storage.gke.io"

// groupWorld is a namespace "ns" with claims labelled app=db: "data" and
// "log" bound to ebs volumes, "cache" bound to a gce volume (app=mixed),
// "pending" unbound (app=late), "nfs" bound to an NFS volume (app=nfs).
func groupWorld() []any {
	nfs := NewPV("pv-nfs", "")
	nfs.Spec.CSI = nil
	return []any{
		NewPVC("ns", "data", WithLabel("app", "db"), WithLabel("mix", "yes"), BoundClaim("pv-data")),
		NewPVC("ns", "log", WithLabel("app", "db"), BoundClaim("pv-log")),
		NewPVC("ns", "cache", WithLabel("app", "mixed"), WithLabel("mix", "yes"), BoundClaim("pv-cache")),
		NewPVC("ns", "pending", WithLabel("app", "late"), WithLabel("mix", "yes")),
		NewPVC("ns", "nfs", WithLabel("app", "nfs"), BoundClaim("pv-nfs")),
		NewPVC("other", "data", WithLabel("app", "db"), BoundClaim("pv-other")),
		NewPV("pv-data", ebs), NewPV("pv-log", ebs), NewPV("pv-cache", gce), NewPV("pv-other", gce), nfs,
		NewGroupClass("group-ebs", WithDriver(ebs), AsGroupDefault()),
		NewGroupClass("group-gce", WithDriver(gce)),
	}
}

func TestGroupSnapshot(t *testing.T) {
	db := func(opts ...Opt) *groupv1.VolumeGroupSnapshot {
		return NewGroupSnapshot("ns", "g1", append([]Opt{Selecting("app", "db")}, opts...)...)
	}
	tests := map[string]verdictCase[*groupv1.VolumeGroupSnapshot]{
		"bound claims of one driver with the driver's default group class are admitted": {
			obj: db(),
		},
		"a named class of the claims' driver is admitted": {
			obj: db(WithClass("group-ebs")),
		},
		"a pre-provisioned group content source is admitted": {
			obj: NewGroupSnapshot("ns", "g1", FromGroupContent("gc1")),
		},
		"both sources are denied": {
			obj:     db(FromGroupContent("gc1")),
			wantErr: `VolumeGroupSnapshot "ns/g1" sets both spec.source.selector and spec.source.volumeGroupSnapshotContentName: a group snapshot either selects claims by label or binds an existing content; keep exactly one (field spec.source)`,
		},
		"no source is denied": {
			obj:     NewGroupSnapshot("ns", "g1"),
			wantErr: `VolumeGroupSnapshot "ns/g1" has no source: set spec.source.selector`,
		},
		"an empty content name is denied": {
			obj:     NewGroupSnapshot("ns", "g1", FromGroupContent("")),
			wantErr: "has an empty spec.source.volumeGroupSnapshotContentName: name the VolumeGroupSnapshotContent to bind",
		},
		"an empty class name is denied": {
			obj:     db(WithClass("")),
			wantErr: "sets spec.volumeGroupSnapshotClassName to the empty string: omit the field",
		},
		"a selector with an unknown operator is denied": {
			obj: NewGroupSnapshot("ns", "g1", WithSelector(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "app", Operator: "Equals", Values: []string{"db"}}}})),
			wantErr: `has an invalid spec.source.selector: "Equals" is not a valid label selector operator; write matchLabels`,
		},
		"a selector with an invalid label value is denied": {
			obj:     NewGroupSnapshot("ns", "g1", Selecting("app", "not a value!")),
			wantErr: "has an invalid spec.source.selector",
		},
		"an Exists expression is admitted": {
			obj: NewGroupSnapshot("ns", "g1", WithSelector(&metav1.LabelSelector{
				MatchLabels:      map[string]string{"app": "db"},
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpExists}}})),
		},
		"a selector that matches nothing yet is a warning": {
			obj:         NewGroupSnapshot("ns", "g1", Selecting("app", "later")),
			wantWarning: `spec.source.selector "app=later" matches no PersistentVolumeClaim in namespace "ns" yet; the group snapshot waits`,
		},
		"an unbound claim is denied with the fix": {
			obj:     NewGroupSnapshot("ns", "g1", Selecting("app", "late")),
			wantErr: `VolumeGroupSnapshot "ns/g1" selects PersistentVolumeClaim "pending", which is not bound yet: a group snapshot is cut from bound volumes only; wait until claim "pending" is bound, or change spec.source.selector or the claims' labels (field spec.source.selector)`,
		},
		"a claim whose volume is named but whose phase is not Bound counts as unbound": {
			existing: []any{NewPVC("ns", "half", WithLabel("app", "half"), BoundToPV("pv-data"))},
			obj:      NewGroupSnapshot("ns", "g1", Selecting("app", "half")),
			wantErr:  `selects PersistentVolumeClaim "half", which is not bound yet`,
		},
		"claims of two drivers are denied naming claims and drivers": {
			obj:     NewGroupSnapshot("ns", "g1", Selecting("mix", "yes")),
			wantErr: `VolumeGroupSnapshot "ns/g1" selects volumes of 2 CSI drivers (claim "data" of driver "ebs.csi.aws.com"; claim "cache" of driver "pd.csi.storage.gke.io"): one driver cuts a group snapshot, so it would fail; change spec.source.selector or the claims' labels so that it selects the claims of one driver (field spec.source.selector)`,
		},
		"mixed drivers and an unbound claim are both reported": {
			obj:     NewGroupSnapshot("ns", "g1", Selecting("mix", "yes")),
			wantErr: `selects PersistentVolumeClaim "pending", which is not bound yet`,
		},
		"a claim that is not a CSI volume is denied": {
			obj:     NewGroupSnapshot("ns", "g1", Selecting("app", "nfs")),
			wantErr: `selects PersistentVolumeClaim "nfs" (volume "pv-nfs"), which is not a CSI volume: only CSI volumes can be snapshotted as a group`,
		},
		"a class of another driver is denied": {
			obj:     db(WithClass("group-gce")),
			wantErr: `VolumeGroupSnapshot "ns/g1" names VolumeGroupSnapshotClass "group-gce" of driver "pd.csi.storage.gke.io", but the claims it selects ("data", "log") are volumes of driver "ebs.csi.aws.com", so the group snapshot would fail; name a VolumeGroupSnapshotClass of driver "ebs.csi.aws.com" (field spec.volumeGroupSnapshotClassName)`,
		},
		"a class that does not exist yet is a warning": {
			obj:         db(WithClass("group-later")),
			wantWarning: `VolumeGroupSnapshotClass "group-later" does not exist yet`,
		},
		"no default group class for the driver is a warning": {
			obj:         NewGroupSnapshot("ns", "g1", Selecting("app", "mixed")),
			wantWarning: `names no class and driver "pd.csi.storage.gke.io" has no default VolumeGroupSnapshotClass; set spec.volumeGroupSnapshotClassName`,
		},
		"only claims of the group's namespace are members": {
			obj: NewGroupSnapshot("ns", "g1", Selecting("app", "db")),
		},
		"an empty selector is a warning: it selects every claim": {
			existing:    []any{},
			obj:         NewGroupSnapshot("empty", "g1", WithSelector(&metav1.LabelSelector{})),
			wantWarning: `has an empty spec.source.selector, which selects every PersistentVolumeClaim in namespace "empty"`,
		},
		"a failing claim lookup admits with a warning": {
			lookupErr:   errors.New("cache broken"),
			obj:         db(),
			wantWarning: `could not list the PersistentVolumeClaims that spec.source.selector "app=db" matches (cache broken)`,
		},
		"changing the selector is denied": {
			obj:     NewGroupSnapshot("ns", "g1", Selecting("app", "web")),
			old:     db(),
			wantErr: `VolumeGroupSnapshot "ns/g1" cannot change spec.source from selector "app=db" to selector "app=web": the source is fixed when the group snapshot is created; create a new VolumeGroupSnapshot instead (field spec.source)`,
		},
		"an update is not judged by the members": {
			obj: NewGroupSnapshot("ns", "g1", Selecting("mix", "yes"), WithLabel("a", "b")),
			old: NewGroupSnapshot("ns", "g1", Selecting("mix", "yes")),
		},
		"the controller may fill in the class name": {
			obj: db(WithClass("group-ebs")),
			old: db(),
		},
		"a new class name on update that does not exist is a warning": {
			obj:         db(WithClass("group-later")),
			old:         db(),
			wantWarning: `VolumeGroupSnapshotClass "group-later" does not exist yet`,
		},
		"a group being deleted is admitted whatever it changes": {
			obj: NewGroupSnapshot("ns", "g1", Selecting("app", "web"), Deleting()),
			old: db(Deleting()),
		},
	}
	runVerdicts(t, groupWorld, Validator.GroupSnapshot, tests)
}

// A volume that cannot be read leaves its claim unchecked, with a warning.
func TestGroupSnapshotMissingVolume(t *testing.T) {
	l := lookupOf(t, NewPVC("ns", "data", WithLabel("app", "db"), BoundClaim("pv-gone")))
	errs, warnings := Validator{Lookup: l}.GroupSnapshot(Create, NewGroupSnapshot("ns", "g1", Selecting("app", "db")), nil)
	expect(t, errs, warnings, "", `PersistentVolume "pv-gone" of claim "data" does not exist; its driver was not checked`)
}
