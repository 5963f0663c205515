package csiside

import (
	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/snapkeeper/snapkeeper/pkg/csi"
	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/sync/testkit"
)

// newContent is a dynamic Delete content as our binder creates it: bound
// finalizer and being-created mark set, class gold, secret annotations
// absent, of VolumeSnapshot default/snap-1.
func newContent(name string, opts ...testkit.ContentOption) *snapv1.VolumeSnapshotContent {
	base := []testkit.ContentOption{testkit.Marked(snapshot.AnnBeingCreated), testkit.ClassName("gold"),
		testkit.RefTo("default", "snap-1", testUID)}
	return testkit.Content(name, append(base, opts...)...)
}

// newGroupContent is newContent's group content: a dynamic Delete group
// content of vol-1 as our binder creates it, marked being-created, class
// gold, of VolumeGroupSnapshot default/snap-1.
func newGroupContent(name string, opts ...testkit.GroupContentOption) *groupv1.VolumeGroupSnapshotContent {
	base := []testkit.GroupContentOption{testkit.Marked(snapshot.AnnGroupBeingCreated), testkit.ClassName("gold"),
		testkit.RefTo("default", "snap-1", testUID)}
	return testkit.GroupContent(name, append(base, opts...)...)
}

// unmarked removes the being-created mark of newContent (newGroupContent).
func unmarked() testkit.AnyContentFunc {
	return perKind(testkit.Unannotated(snapshot.AnnBeingCreated), testkit.Unannotated(snapshot.AnnGroupBeingCreated))
}

// markedDeleted is a content deleted by the binder's protocol: marked
// being-deleted, then deleted.
func markedDeleted() testkit.AnyContentFunc {
	marked := func(ann string) testkit.Meta {
		return func(o metav1.Object) {
			testkit.Deleted()(o)
			testkit.Marked(ann)(o)
		}
	}
	return perKind(marked(snapshot.AnnBeingDeleted), marked(snapshot.AnnGroupBeingDeleted))
}

// withSecret names the deletion secret secrets/creds (credsSecrets).
func withSecret() testkit.AnyContentFunc {
	secret := func(name, namespace string) testkit.Meta {
		return func(o metav1.Object) {
			testkit.Annotated(name, "creds")(o)
			testkit.Annotated(namespace, "secrets")(o)
		}
	}
	return perKind(secret(snapshot.AnnDeletionSecretName, snapshot.AnnDeletionSecretNamespace),
		secret(snapshot.AnnGroupDeletionSecretName, snapshot.AnnGroupDeletionSecretNamespace))
}

func withError(st snapv1.VolumeSnapshotContentStatus, msg string) snapv1.VolumeSnapshotContentStatus {
	st.Error = &snapv1.VolumeSnapshotError{Message: &msg}
	return st
}

// errorStatus is the status of a content whose first call failed: the error
// and readyToUse=false, as the community sidecar writes them.
func errorStatus(msg string) snapv1.VolumeSnapshotContentStatus {
	return withError(snapv1.VolumeSnapshotContentStatus{ReadyToUse: ptr.To(false)}, msg)
}

func goldClass() *snapv1.VolumeSnapshotClass {
	return testkit.SnapshotClass("gold", testkit.Params(map[string]string{
		"type":                            "fast",
		snapshot.ParamSecretName:          "creds",
		snapshot.ParamSecretNamespace:     "secrets",
		snapshot.ParamListSecretName:      "list-${volumesnapshotcontent.name}",
		snapshot.ParamListSecretNamespace: "secrets",
	}))
}

// goldGroupClass is goldClass's group class.
func goldGroupClass() *groupv1.VolumeGroupSnapshotClass {
	return testkit.GroupClass("gold", testkit.Params{
		"type":                             "fast",
		snapshot.ParamGroupSecretName:      "creds",
		snapshot.ParamGroupSecretNamespace: "secrets",
	})
}

// goldGroupRequest is the CreateVolumeGroupSnapshot request of
// newGroupContent with goldGroupClass.
func goldGroupRequest(secrets map[string]string) csi.CreateGroupRequest {
	return csi.CreateGroupRequest{
		Name:            "groupsnapshot-" + string(testUID),
		SourceVolumeIDs: []string{"vol-1"},
		Parameters:      map[string]string{"type": "fast"},
		Secrets:         secrets,
	}
}

// goldRequest is the CreateSnapshot request of newContent with goldClass.
func goldRequest(secrets map[string]string) csi.CreateRequest {
	return csi.CreateRequest{
		Name:           testCSIName,
		SourceVolumeID: "vol-1",
		Parameters:     map[string]string{"type": "fast"},
		Secrets:        secrets,
	}
}
