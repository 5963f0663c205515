package csiside

import (
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/snapkeeper/snapkeeper/pkg/csi"
	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
)

type contentOpt func(*snapv1.VolumeSnapshotContent)

// newContent is a dynamic Delete content as our binder creates it: bound
// finalizer and being-created mark set, secret annotations absent.
func newContent(name string, opts ...contentOpt) *snapv1.VolumeSnapshotContent {
	class := "gold"
	vol := "vol-1"
	c := &snapv1.VolumeSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			UID:             types.UID("content-uid-" + name),
			ResourceVersion: "1",
			Finalizers:      []string{snapshot.FinalizerContentBound},
			Annotations:     map[string]string{snapshot.AnnBeingCreated: snapshot.ValueYes},
		},
		Spec: snapv1.VolumeSnapshotContentSpec{
			Driver:                  testDriver,
			DeletionPolicy:          snapv1.VolumeSnapshotContentDelete,
			VolumeSnapshotClassName: &class,
			Source:                  snapv1.VolumeSnapshotContentSource{VolumeHandle: &vol},
			VolumeSnapshotRef: corev1.ObjectReference{
				Kind: "VolumeSnapshot", APIVersion: "snapshot.storage.k8s.io/v1",
				Namespace: "default", Name: "snap-1", UID: testUID,
			},
		},
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

func preProvisioned(handle string) contentOpt {
	return func(c *snapv1.VolumeSnapshotContent) {
		c.Spec.Source = snapv1.VolumeSnapshotContentSource{SnapshotHandle: &handle}
		delete(c.Annotations, snapshot.AnnBeingCreated)
	}
}

func unmarked() contentOpt {
	return func(c *snapv1.VolumeSnapshotContent) { delete(c.Annotations, snapshot.AnnBeingCreated) }
}

func finalizers(fs ...string) contentOpt {
	return func(c *snapv1.VolumeSnapshotContent) { c.Finalizers = fs }
}

func retain() contentOpt {
	return func(c *snapv1.VolumeSnapshotContent) { c.Spec.DeletionPolicy = snapv1.VolumeSnapshotContentRetain }
}

func annotated(key, value string) contentOpt {
	return func(c *snapv1.VolumeSnapshotContent) { c.Annotations[key] = value }
}

func labelled(key, value string) contentOpt {
	return func(c *snapv1.VolumeSnapshotContent) {
		if c.Labels == nil {
			c.Labels = map[string]string{}
		}
		c.Labels[key] = value
	}
}

func beingDeleted() contentOpt {
	return func(c *snapv1.VolumeSnapshotContent) {
		t := metav1.NewTime(testTime)
		c.DeletionTimestamp = &t
	}
}

func markedDeleted() contentOpt {
	return func(c *snapv1.VolumeSnapshotContent) {
		beingDeleted()(c)
		c.Annotations[snapshot.AnnBeingDeleted] = snapshot.ValueYes
	}
}

func withSecret() contentOpt {
	return func(c *snapv1.VolumeSnapshotContent) {
		c.Annotations[snapshot.AnnDeletionSecretName] = "creds"
		c.Annotations[snapshot.AnnDeletionSecretNamespace] = "secrets"
	}
}

func refTo(namespace, name string, uid types.UID) contentOpt {
	return func(c *snapv1.VolumeSnapshotContent) {
		c.Spec.VolumeSnapshotRef.Namespace, c.Spec.VolumeSnapshotRef.Name, c.Spec.VolumeSnapshotRef.UID = namespace, name, uid
	}
}

func ofDriver(name string) contentOpt {
	return func(c *snapv1.VolumeSnapshotContent) { c.Spec.Driver = name }
}

func classNamed(name string) contentOpt {
	return func(c *snapv1.VolumeSnapshotContent) { c.Spec.VolumeSnapshotClassName = &name }
}

func noClass() contentOpt {
	return func(c *snapv1.VolumeSnapshotContent) { c.Spec.VolumeSnapshotClassName = nil }
}

func withStatus(st snapv1.VolumeSnapshotContentStatus) contentOpt {
	return func(c *snapv1.VolumeSnapshotContent) { c.Status = &st }
}

// cut is the status of a content whose snapshot was cut.
func cut(handle string, ready bool) snapv1.VolumeSnapshotContentStatus {
	return snapv1.VolumeSnapshotContentStatus{
		SnapshotHandle: &handle,
		CreationTime:   ptr(testTime.UnixNano()),
		RestoreSize:    ptr(int64(1 << 30)),
		ReadyToUse:     &ready,
	}
}

func withError(st snapv1.VolumeSnapshotContentStatus, msg string) snapv1.VolumeSnapshotContentStatus {
	st.Error = &snapv1.VolumeSnapshotError{Message: &msg}
	return st
}

// errorStatus is the status of a content whose first call failed: the error
// and readyToUse=false, as the community sidecar writes them.
func errorStatus(msg string) snapv1.VolumeSnapshotContentStatus {
	return withError(snapv1.VolumeSnapshotContentStatus{ReadyToUse: ptr(false)}, msg)
}

func ptr[T any](v T) *T { return &v }

func newClass(name string, params map[string]string) *snapv1.VolumeSnapshotClass {
	return &snapv1.VolumeSnapshotClass{
		ObjectMeta:     metav1.ObjectMeta{Name: name},
		Driver:         testDriver,
		Parameters:     params,
		DeletionPolicy: snapv1.VolumeSnapshotContentDelete,
	}
}

func goldClass() *snapv1.VolumeSnapshotClass {
	return newClass("gold", map[string]string{
		"type":                            "fast",
		snapshot.ParamSecretName:          "creds",
		snapshot.ParamSecretNamespace:     "secrets",
		snapshot.ParamListSecretName:      "list-${volumesnapshotcontent.name}",
		snapshot.ParamListSecretNamespace: "secrets",
	})
}

func newSnapshot(namespace, name string, uid types.UID) *snapv1.VolumeSnapshot {
	return &snapv1.VolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: uid}}
}

func newSecret(namespace, name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
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
