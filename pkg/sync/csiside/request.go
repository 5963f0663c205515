package csiside

import (
	"context"
	"errors"
	"fmt"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/pkg/csi"
	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
)

// errNoUID: the CSI name derives from the VolumeSnapshot's UID, so nothing
// can be cut (and nothing was) while the content's reference lacks it.
var errNoUID = errors.New("the content's volumeSnapshotRef has no UID yet")

// createRequest builds the CreateSnapshot call of a dynamic content. The
// same request serves the first call, the readiness poll and the finishing
// of an in-flight create before a deletion, so it must not depend on
// anything but the content, its class and its secret.
func (c *Controller) createRequest(ctx context.Context, content *snapv1.VolumeSnapshotContent) (csi.CreateRequest, error) {
	ref := content.Spec.VolumeSnapshotRef
	if ref.UID == "" {
		return csi.CreateRequest{}, errNoUID
	}
	params, err := c.classParameters(content)
	if err != nil {
		return csi.CreateRequest{}, err
	}
	if c.cfg.ExtraCreateMetadata {
		params[snapshot.MetaSnapshotName] = ref.Name
		params[snapshot.MetaSnapshotNamespace] = ref.Namespace
		params[snapshot.MetaContentName] = content.Name
	}
	secrets, err := c.deletionSecrets(ctx, content)
	if err != nil {
		return csi.CreateRequest{}, err
	}
	return csi.CreateRequest{
		Name:           snapshot.CSIName(c.cfg.SnapshotNamePrefix, ref.UID, c.cfg.SnapshotNameUUIDLength),
		SourceVolumeID: *content.Spec.Source.VolumeHandle,
		Parameters:     params,
		Secrets:        secrets,
	}, nil
}

// class returns the content's VolumeSnapshotClass, or nil when it names
// none.
func (c *Controller) class(content *snapv1.VolumeSnapshotContent) (*snapv1.VolumeSnapshotClass, error) {
	name := content.Spec.VolumeSnapshotClassName
	if name == nil || *name == "" {
		return nil, nil
	}
	class, err := c.classes.Get(*name)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("VolumeSnapshotClass %q not found", *name)
	}
	if err != nil {
		return nil, fmt.Errorf("reading VolumeSnapshotClass %q: %w", *name, err)
	}
	return class, nil
}

// classParameters are the class parameters the driver receives: all but
// the reserved csi.storage.k8s.io/ keys. A content without a class gets
// none.
func (c *Controller) classParameters(content *snapv1.VolumeSnapshotContent) (map[string]string, error) {
	class, err := c.class(content)
	if err != nil || class == nil {
		return map[string]string{}, err
	}
	return snapshot.DriverParameters(class.Parameters)
}

// deletionSecrets reads the secret the binder named in the content's
// deletion-secret annotations, for CreateSnapshot and DeleteSnapshot.
func (c *Controller) deletionSecrets(ctx context.Context, content *snapv1.VolumeSnapshotContent) (map[string]string, error) {
	return c.secret(ctx, content.Annotations[snapshot.AnnDeletionSecretNamespace], content.Annotations[snapshot.AnnDeletionSecretName])
}

// listSecrets resolves the class's snapshotter-list secret, for
// ListSnapshots. A content without a class, or a class without the
// parameters, uses none.
func (c *Controller) listSecrets(ctx context.Context, content *snapv1.VolumeSnapshotContent) (map[string]string, error) {
	class, err := c.class(content)
	if err != nil || class == nil {
		return nil, err
	}
	ref := content.Spec.VolumeSnapshotRef
	vars := snapshot.TemplateVars{ContentName: content.Name, SnapshotNamespace: ref.Namespace, SnapshotName: ref.Name}
	return c.secret(ctx,
		snapshot.ResolveTemplate(class.Parameters[snapshot.ParamListSecretNamespace], vars),
		snapshot.ResolveTemplate(class.Parameters[snapshot.ParamListSecretName], vars))
}

// secret reads a Secret's data for a CSI call. The values go to the driver
// and nowhere else: never into a log line, an event, a status or an error.
func (c *Controller) secret(ctx context.Context, namespace, name string) (map[string]string, error) {
	switch {
	case namespace == "" && name == "":
		return nil, nil
	case namespace == "" || name == "":
		return nil, fmt.Errorf("secret reference needs both a name and a namespace (name %q, namespace %q)", name, namespace)
	}
	s, err := c.cfg.Kube.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, secretReadError(namespace, name, err)
	}
	out := make(map[string]string, len(s.Data))
	for k, v := range s.Data {
		out[k] = string(v)
	}
	return out, nil
}

// The CSI client (pkg/csi) bounds every call by --timeout; the calls here
// only pass the worker's context on.

func (c *Controller) callCreate(ctx context.Context, req csi.CreateRequest) (*csi.Snapshot, error) {
	return c.cfg.Driver.CreateSnapshot(ctx, req)
}

func (c *Controller) callGet(ctx context.Context, id string, secrets map[string]string) (*csi.Snapshot, error) {
	return c.cfg.Driver.GetSnapshot(ctx, id, secrets)
}

func (c *Controller) callDelete(ctx context.Context, id string, secrets map[string]string) error {
	return c.cfg.Driver.DeleteSnapshot(ctx, id, secrets)
}
