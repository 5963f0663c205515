package csiside

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-logr/logr"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"

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
	return c.classSecret(ctx, "VolumeSnapshotClass "+class.Name, class.Parameters, snapshot.ParamListSecretName, vars)
}

// classSecret reads the Secret a class names through the parameter pair of
// nameKey, its templates resolved with vars. Each side may use only its
// own tokens, and the results must be a valid name and namespace: the
// class may have been stored while the webhook was absent, and a template
// the user's names can steer must not reach another namespace's Secrets
// (snapshot.ResolveSecretTemplate).
func (c *Controller) classSecret(ctx context.Context, class string, params map[string]string, nameKey string, vars snapshot.TemplateVars) (map[string]string, error) {
	pair, _ := snapshot.PairOf(nameKey)
	name, namespace, err := snapshot.ResolveSecretPair(pair, params, vars)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", class, err)
	}
	if name == "" && namespace == "" {
		return nil, nil
	}
	if errs := validation.IsDNS1123Subdomain(name); name != "" && len(errs) > 0 {
		return nil, fmt.Errorf("%s: secret name %q from parameter %s is invalid: %s; set it to a Secret name", class, name, pair.NameKey, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Label(namespace); namespace != "" && len(errs) > 0 {
		return nil, fmt.Errorf("%s: secret namespace %q from parameter %s is invalid: %s; set it to a namespace name", class, namespace, pair.NamespaceKey, strings.Join(errs, "; "))
	}
	return c.secret(ctx, namespace, name)
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
	s, err := c.cfg.Kube.CoreV1().Secrets(namespace).Get(withoutBodyLogs(ctx), name, metav1.GetOptions{})
	if err != nil {
		return nil, secretReadError(namespace, name, err)
	}
	out := make(map[string]string, len(s.Data))
	for k, v := range s.Data {
		out[k] = string(v)
	}
	return out, nil
}

// withoutBodyLogs is ctx for a request whose answer holds Secret data.
// client-go logs request and response bodies through the context's logger
// from -v=8 on (a Secret's data, base64 in JSON, raw bytes in a protobuf
// hex dump), and the request's URL and headers from -v=6 on; with a logger
// that discards everything, a controller run at -v=10 to debug something
// else does not write the credentials into its log.
func withoutBodyLogs(ctx context.Context) context.Context {
	return klog.NewContext(ctx, logr.Discard())
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
