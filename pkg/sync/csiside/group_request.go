package csiside

import (
	"context"
	"fmt"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"

	"github.com/snapkeeper/snapkeeper/pkg/csi"
	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
)

// groupClass returns the content's group class, or nil when it names none.
func (c *Controller) groupClass(content *groupv1.VolumeGroupSnapshotContent) (*groupv1.VolumeGroupSnapshotClass, error) {
	name := content.Spec.VolumeGroupSnapshotClassName
	if name == nil || *name == "" {
		return nil, nil
	}
	class, err := c.groups.classes.Get(*name)
	if err != nil {
		return nil, fmt.Errorf("reading VolumeGroupSnapshotClass %q: %w", *name, err)
	}
	return class, nil
}

// groupCreateRequest builds the CreateVolumeGroupSnapshot call of a dynamic
// group content; the same request serves the readiness poll.
func (c *Controller) groupCreateRequest(ctx context.Context, content *groupv1.VolumeGroupSnapshotContent) (csi.CreateGroupRequest, error) {
	ref := content.Spec.VolumeGroupSnapshotRef
	class, err := c.groupClass(content)
	if err != nil {
		return csi.CreateGroupRequest{}, err
	}
	if class == nil {
		return csi.CreateGroupRequest{}, fmt.Errorf("group content %s names no VolumeGroupSnapshotClass; a dynamic group needs one", content.Name)
	}
	params, err := snapshot.DriverParameters(class.Parameters)
	if err != nil {
		return csi.CreateGroupRequest{}, err
	}
	if c.cfg.ExtraCreateMetadata {
		params[snapshot.MetaGroupSnapshotName] = ref.Name
		params[snapshot.MetaGroupSnapshotNamespace] = ref.Namespace
		params[snapshot.MetaGroupSnapshotContentName] = content.Name
	}
	secrets, err := c.secret(ctx, content.Annotations[snapshot.AnnGroupDeletionSecretNamespace], content.Annotations[snapshot.AnnGroupDeletionSecretName])
	if err != nil {
		return csi.CreateGroupRequest{}, err
	}
	return csi.CreateGroupRequest{
		Name:            snapshot.CSIName(c.groups.cfg.NamePrefix, ref.UID, c.groups.cfg.NameUUIDLength),
		SourceVolumeIDs: content.Spec.Source.VolumeHandles,
		Parameters:      params,
		Secrets:         secrets,
	}, nil
}

// groupGetSecrets resolves the class's group-snapshotter-get secret, for
// GetVolumeGroupSnapshot.
func (c *Controller) groupGetSecrets(ctx context.Context, content *groupv1.VolumeGroupSnapshotContent) (map[string]string, error) {
	class, err := c.groupClass(content)
	if err != nil || class == nil {
		return nil, err
	}
	ref := content.Spec.VolumeGroupSnapshotRef
	vars := snapshot.TemplateVars{ContentName: content.Name, SnapshotNamespace: ref.Namespace, SnapshotName: ref.Name}
	return c.classSecret(ctx, "VolumeGroupSnapshotClass "+class.Name, class.Parameters, snapshot.ParamGroupGetSecretName, vars)
}
