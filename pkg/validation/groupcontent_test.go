package validation

import (
	"testing"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	. "github.com/snapkeeper/snapkeeper/pkg/validation/validationtest"
)

func TestGroupContent(t *testing.T) {
	pre := Preset(NewGroupContent, "gc1", WithGroupHandles("grp-1", "snap-1", "snap-2"), GroupBoundTo("ns", "g1", ""))
	dyn := Preset(NewGroupContent, "gc1", WithVolumeHandles("vol-1", "vol-2"), GroupBoundTo("ns", "g1", "uid-1"))
	tests := map[string]verdictCase[*groupv1.VolumeGroupSnapshotContent]{
		"a pre-provisioned group content is admitted": {
			obj: pre(),
		},
		"a dynamic group content is admitted": {
			obj: dyn(),
		},
		"both handle kinds are denied naming the field, rule and fix": {
			obj:     pre(WithVolumeHandles("vol-1")),
			wantErr: `VolumeGroupSnapshotContent "gc1" sets both spec.source.volumeHandles and spec.source.groupSnapshotHandles: volumeHandles asks the driver to cut a new group snapshot, groupSnapshotHandles imports an existing one; keep exactly one (field spec.source)`,
		},
		"no source is denied": {
			obj:     NewGroupContent("gc1", GroupBoundTo("ns", "g1", "")),
			wantErr: `VolumeGroupSnapshotContent "gc1" has no source: set spec.source.groupSnapshotHandles`,
		},
		"an empty list of volume handles is denied": {
			obj:     NewGroupContent("gc1", WithVolumeHandles(), GroupBoundTo("ns", "g1", "")),
			wantErr: "has an empty spec.source.volumeHandles: list a CSI volume id for every member of the group",
		},
		"an empty volume handle is denied": {
			obj:     NewGroupContent("gc1", WithVolumeHandles("vol-1", ""), GroupBoundTo("ns", "g1", "")),
			wantErr: "has an empty entry spec.source.volumeHandles[1]: every entry must be a CSI volume id",
		},
		"an empty group snapshot handle is denied": {
			obj:     NewGroupContent("gc1", WithGroupHandles("", "snap-1"), GroupBoundTo("ns", "g1", "")),
			wantErr: "has an empty spec.source.groupSnapshotHandles.volumeGroupSnapshotHandle: set the CSI group snapshot id",
		},
		"a group handle without snapshot handles is denied": {
			obj:     NewGroupContent("gc1", WithGroupHandles("grp-1"), GroupBoundTo("ns", "g1", "")),
			wantErr: "has an empty spec.source.groupSnapshotHandles.volumeSnapshotHandles",
		},
		"a missing group reference is denied": {
			obj:     NewGroupContent("gc1", WithGroupHandles("grp-1", "snap-1")),
			wantErr: "must name its VolumeGroupSnapshot: set spec.volumeGroupSnapshotRef.name",
		},
		"a reference without namespace is denied": {
			obj:     NewGroupContent("gc1", WithGroupHandles("grp-1", "snap-1"), GroupBoundTo("", "g1", "")),
			wantErr: "set spec.volumeGroupSnapshotRef.namespace (field spec.volumeGroupSnapshotRef.namespace)",
		},
		"an invalid driver is denied": {
			obj:     pre(WithDriver("-bad")),
			wantErr: `VolumeGroupSnapshotContent "gc1" has an invalid spec.driver "-bad"`,
		},
		"a deletion policy outside the enum is denied": {
			obj:     pre(WithPolicy("Keep")),
			wantErr: `has spec.deletionPolicy "Keep": it must be "Delete" or "Retain"`,
		},
		"changing the volume handles is denied": {
			obj:     dyn(),
			old:     NewGroupContent("gc1", WithVolumeHandles("vol-1"), GroupBoundTo("ns", "g1", "uid-1")),
			wantErr: `cannot change spec.source.volumeHandles from ["vol-1"] to ["vol-1", "vol-2"]: the source of a content is fixed; create a new VolumeGroupSnapshotContent instead`,
		},
		"swapping volume handles for group handles is denied": {
			obj:     NewGroupContent("gc1", WithGroupHandles("grp-1", "snap-1"), GroupBoundTo("ns", "g1", "uid-1")),
			old:     dyn(),
			wantErr: `cannot remove spec.source.volumeHandles (it was ["vol-1", "vol-2"])`,
		},
		"changing the group snapshot handles is denied": {
			obj:     pre(WithGroupHandles("grp-2", "snap-1")),
			old:     pre(),
			wantErr: `cannot change spec.source.groupSnapshotHandles from group snapshot "grp-1" with snapshots ["snap-1", "snap-2"] to group snapshot "grp-2" with snapshots ["snap-1"]`,
		},
		"changing the driver is denied": {
			obj:     pre(WithDriver(ebs)),
			old:     pre(),
			wantErr: `cannot change spec.driver from "hostpath.csi.k8s.io" to "ebs.csi.aws.com": the backend group snapshot belongs to the driver that cut it`,
		},
		"moving the group reference is denied": {
			obj:     NewGroupContent("gc1", WithGroupHandles("grp-1", "snap-1", "snap-2"), GroupBoundTo("ns", "g2", "")),
			old:     pre(),
			wantErr: `cannot move spec.volumeGroupSnapshotRef from "ns/g1" to "ns/g2": a content stays bound to the VolumeGroupSnapshot it names; create a new VolumeGroupSnapshotContent for "ns/g2"`,
		},
		"setting the uid once is admitted": {
			obj: pre(GroupBoundTo("ns", "g1", "uid-1")),
			old: pre(),
		},
		"replacing the uid is denied": {
			obj:     dyn(GroupBoundTo("ns", "g1", "uid-2")),
			old:     dyn(),
			wantErr: `cannot change spec.volumeGroupSnapshotRef.uid from "uid-1" to "uid-2"`,
		},
	}
	addEditableContentCases(t, tests, contentKind[*groupv1.VolumeGroupSnapshotContent]{
		dyn:          dyn,
		elsewhere:    Preset(NewGroupContent, "gc1", WithVolumeHandles("vol-9"), GroupBoundTo("x", "y", "uid-9")),
		unnamespaced: Preset(NewGroupContent, "gc1", WithGroupHandles("grp-1", "s"), GroupBoundTo("", "g1", "")),
		beingDeleted: snapshot.AnnGroupBeingDeleted,
	})
	runVerdicts(t, nil, Validator.GroupContent, tests)
}
