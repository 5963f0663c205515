package csiside

import (
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

// unmarked removes the being-created mark of newContent.
func unmarked() testkit.Meta { return testkit.Unannotated(snapshot.AnnBeingCreated) }

// markedDeleted is a content deleted by the binder's protocol: marked
// being-deleted, then deleted.
func markedDeleted() testkit.Meta {
	return func(o metav1.Object) {
		testkit.Deleted()(o)
		testkit.Marked(snapshot.AnnBeingDeleted)(o)
	}
}

// withSecret names the deletion secret secrets/creds (credsSecrets).
func withSecret() testkit.Meta {
	return func(o metav1.Object) {
		testkit.Annotated(snapshot.AnnDeletionSecretName, "creds")(o)
		testkit.Annotated(snapshot.AnnDeletionSecretNamespace, "secrets")(o)
	}
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

// goldRequest is the CreateSnapshot request of newContent with goldClass.
func goldRequest(secrets map[string]string) csi.CreateRequest {
	return csi.CreateRequest{
		Name:           testCSIName,
		SourceVolumeID: "vol-1",
		Parameters:     map[string]string{"type": "fast"},
		Secrets:        secrets,
	}
}
