package validation

import (
	"testing"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	. "github.com/snapkeeper/snapkeeper/pkg/validation/validationtest"
)

func TestContent(t *testing.T) {
	pre := Preset(NewContent, "c1", WithSnapshotHandle("h1"), BoundTo("ns", "s1", ""))
	dyn := Preset(NewContent, "c1", WithVolumeHandle("vol-1"), BoundTo("ns", "s1", "uid-1"))
	tests := map[string]verdictCase[*snapv1.VolumeSnapshotContent]{
		"a pre-provisioned content is admitted": {
			obj: pre(),
		},
		"a dynamic content is admitted": {
			obj: dyn(WithSourceMode(corev1.PersistentVolumeBlock)),
		},
		"both handles are denied": {
			obj:     pre(WithVolumeHandle("vol-1")),
			wantErr: `VolumeSnapshotContent "c1" sets both spec.source.volumeHandle and spec.source.snapshotHandle`,
		},
		"no handle is denied": {
			obj:     NewContent("c1", BoundTo("ns", "s1", "")),
			wantErr: `VolumeSnapshotContent "c1" has no source`,
		},
		"an empty snapshot handle is denied": {
			obj:     NewContent("c1", WithSnapshotHandle(""), BoundTo("ns", "s1", "")),
			wantErr: "has an empty spec.source.snapshotHandle",
		},
		"a missing snapshot reference is denied": {
			obj:     NewContent("c1", WithSnapshotHandle("h1")),
			wantErr: "must name its VolumeSnapshot: set spec.volumeSnapshotRef.name",
		},
		"a reference without namespace is denied": {
			obj:     NewContent("c1", WithSnapshotHandle("h1"), BoundTo("", "s1", "")),
			wantErr: "set spec.volumeSnapshotRef.namespace",
		},
		"an invalid driver is denied": {
			obj:     pre(WithDriver("-bad")),
			wantErr: `has an invalid spec.driver "-bad"`,
		},
		"an unknown source volume mode is denied": {
			obj:     pre(WithSourceMode("Raw")),
			wantErr: `has spec.sourceVolumeMode "Raw"`,
		},
		"changing the volume handle is denied": {
			obj:     dyn(),
			old:     NewContent("c1", WithVolumeHandle("vol-0"), BoundTo("ns", "s1", "uid-1")),
			wantErr: `cannot change spec.source.volumeHandle from "vol-0" to "vol-1"`,
		},
		"swapping the volume handle for a snapshot handle is denied": {
			obj:     NewContent("c1", WithSnapshotHandle("h1"), BoundTo("ns", "s1", "uid-1")),
			old:     dyn(),
			wantErr: `cannot remove spec.source.volumeHandle (it was "vol-1")`,
		},
		"changing the source volume mode is denied": {
			obj:     dyn(WithSourceMode(corev1.PersistentVolumeBlock)),
			old:     dyn(WithSourceMode(corev1.PersistentVolumeFilesystem)),
			wantErr: `cannot change spec.sourceVolumeMode from "Filesystem" to "Block"`,
		},
		"setting the source volume mode once is admitted": {
			obj: dyn(WithSourceMode(corev1.PersistentVolumeBlock)),
			old: dyn(),
		},
		"changing the driver is denied": {
			obj:     pre(WithDriver(ebs)),
			old:     pre(),
			wantErr: `cannot change spec.driver from "hostpath.csi.k8s.io" to "ebs.csi.aws.com"`,
		},
		"renaming the referenced snapshot is denied": {
			obj:     NewContent("c1", WithSnapshotHandle("h1"), BoundTo("ns", "s2", "")),
			old:     pre(),
			wantErr: `cannot move spec.volumeSnapshotRef from "ns/s1" to "ns/s2"`,
		},
		"moving the reference to another namespace is denied": {
			obj:     NewContent("c1", WithSnapshotHandle("h1"), BoundTo("other", "s1", "")),
			old:     pre(),
			wantErr: `to "other/s1"`,
		},
		"setting the uid once is admitted": {
			obj: NewContent("c1", WithSnapshotHandle("h1"), BoundTo("ns", "s1", "uid-1")),
			old: pre(),
		},
		"clearing the uid to repair a misbound content is admitted": {
			obj: NewContent("c1", WithVolumeHandle("vol-1"), BoundTo("ns", "s1", "")),
			old: dyn(),
		},
		"replacing the uid is denied": {
			obj:     NewContent("c1", WithVolumeHandle("vol-1"), BoundTo("ns", "s1", "uid-2")),
			old:     dyn(),
			wantErr: `cannot change spec.volumeSnapshotRef.uid from "uid-1" to "uid-2"`,
		},
	}
	addEditableContentCases(t, tests, contentKind[*snapv1.VolumeSnapshotContent]{
		dyn:          dyn,
		elsewhere:    Preset(NewContent, "c1", WithVolumeHandle("vol-9"), BoundTo("x", "y", "uid-9")),
		unnamespaced: Preset(NewContent, "c1", WithSnapshotHandle("h1"), BoundTo("", "s1", "")),
		beingDeleted: snapshot.AnnBeingDeleted,
	})
	runVerdicts(t, nil, Validator.Content, tests)
}

// contentKind is what the updates both content kinds admit need of one
// kind: the two kinds' rules differ, what stays editable does not.
type contentKind[T comparable] struct {
	// dyn is a dynamic content bound to its snapshot, elsewhere the same
	// content with another source and reference.
	dyn, elsewhere func(...Opt) T
	// unnamespaced is a pre-provisioned content whose reference has no
	// namespace, as contents written before that rule may have.
	unnamespaced func(...Opt) T
	beingDeleted string // the kind's being-deleted annotation
}

// addEditableContentCases adds to tests the updates a content of kind k
// always admits: its policy and metadata stay editable, a content being
// deleted is not held to the rules, nor is a legacy one changing its policy.
func addEditableContentCases[T comparable](t *testing.T, tests map[string]verdictCase[T], k contentKind[T]) {
	t.Helper()
	retain := WithPolicy(snapv1.VolumeSnapshotContentRetain)
	for name, tc := range map[string]verdictCase[T]{
		"changing the deletion policy is admitted": {
			obj: k.dyn(retain),
			old: k.dyn(),
		},
		"annotations and labels change freely": {
			obj: k.dyn(WithAnnotation(k.beingDeleted, "yes"), WithLabel("a", "b")),
			old: k.dyn(),
		},
		"a content being deleted is admitted whatever it changes": {
			obj: k.elsewhere(Deleting()),
			old: k.dyn(Deleting()),
		},
		"a legacy content without namespace can change its policy": {
			obj: k.unnamespaced(retain),
			old: k.unnamespaced(),
		},
	} {
		if _, dup := tests[name]; dup {
			t.Fatalf("two content cases are named %q", name)
		}
		tests[name] = tc
	}
}
