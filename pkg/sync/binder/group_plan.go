package binder

import (
	"context"
	"sort"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
)

// groupPlan is everything a dynamic group's content is made from.
type groupPlan struct {
	// handles are the volume handles of the chosen claims' volumes, in
	// claim-name order.
	handles []string
	class   *groupv1.VolumeGroupSnapshotClass
	// secret is the resolved group secret, if the class names one.
	secretName, secretNamespace string
}

// planGroup resolves a dynamic group's claims, volumes, class and secret; a
// problem says what the user must fix or what we wait for.
func (c *Controller) planGroup(ctx context.Context, g *groupv1.VolumeGroupSnapshot) (*groupPlan, *problem) {
	sel, err := metav1.LabelSelectorAsSelector(g.Spec.Source.Selector)
	if err != nil {
		return nil, problemf(snapshot.ReasonGroupSnapshotValidationError,
			"spec.source.selector is not a valid label selector: %v; delete the VolumeGroupSnapshot and create it with a valid selector", err)
	}
	claims, getPV, err := c.groupClaims(ctx, g.Namespace, sel.String())
	if err != nil {
		return nil, problemf(snapshot.ReasonGroupSnapshotContentCreationFailed, "cannot list PersistentVolumeClaims: %v", err)
	}
	if len(claims) == 0 {
		return nil, problemf(snapshot.ReasonGroupSnapshotContentCreationFailed,
			"spec.source.selector %q matches no PersistentVolumeClaim in namespace %s yet; label the claims to snapshot, or fix the selector", sel.String(), g.Namespace)
	}
	sort.Slice(claims, func(i, j int) bool { return claims[i].Name < claims[j].Name })
	plan := &groupPlan{}
	driver := ""
	for _, pvc := range claims {
		pv, prob := c.claimVolume(pvc, getPV)
		if prob != nil {
			prob.Reason = snapshot.ReasonGroupSnapshotContentCreationFailed
			return nil, prob
		}
		if driver != "" && pv.Spec.CSI.Driver != driver {
			return nil, problemf(snapshot.ReasonGroupSnapshotContentCreationFailed,
				"the claims chosen by spec.source.selector belong to different CSI drivers (%q and %q, claim %s/%s); a group snapshot is cut by one driver: narrow the selector to claims of one driver",
				driver, pv.Spec.CSI.Driver, pvc.Namespace, pvc.Name)
		}
		driver = pv.Spec.CSI.Driver
		plan.handles = append(plan.handles, pv.Spec.CSI.VolumeHandle)
	}
	class, prob := c.resolveGroupClass(g, driver)
	if prob != nil {
		return nil, prob
	}
	if class.Driver != driver {
		return nil, problemf(snapshot.ReasonGetGroupSnapshotClassFailed,
			"VolumeGroupSnapshotClass %q is for driver %q but the chosen claims' volumes belong to %q; use a group class of driver %q",
			class.Name, class.Driver, driver, driver)
	}
	plan.class = class
	vars := snapshot.TemplateVars{ContentName: snapshot.GroupContentNameFor(g.UID), SnapshotNamespace: g.Namespace, SnapshotName: g.Name}
	plan.secretName, plan.secretNamespace, prob = resolveSecret("VolumeGroupSnapshotClass", class.Name, class.Parameters,
		snapshot.ParamGroupSecretName, snapshot.ParamGroupSecretNamespace, vars, snapshot.ReasonGetGroupSnapshotClassFailed)
	if prob != nil {
		return nil, prob
	}
	return plan, nil
}

// groupClaims are the claims a group's selector chooses, with the way to
// read their volumes. The members of a group are fixed once its content is
// made, so they are read from the API server, not the cache: a user (or a
// GitOps tool) who labels claims and then creates the group must get every
// claim labelled, and a label event still on its way to the informer would
// leave a member out. One list per group plan; without a client (tests),
// or when the list fails, the cache answers.
func (c *Controller) groupClaims(ctx context.Context, ns, selector string) ([]*corev1.PersistentVolumeClaim, func(string) (*corev1.PersistentVolume, error), error) {
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil, nil, err
	}
	if c.cfg.Kube != nil {
		core := c.cfg.Kube.CoreV1()
		if list, err := core.PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{LabelSelector: selector}); err == nil {
			claims := make([]*corev1.PersistentVolumeClaim, 0, len(list.Items))
			for i := range list.Items {
				claims = append(claims, &list.Items[i])
			}
			// A volume the cache does not show yet (a claim bound a
			// moment ago) is read live too.
			getPV := func(name string) (*corev1.PersistentVolume, error) {
				if pv, err := c.pvs.Get(name); err == nil {
					return pv, nil
				}
				return core.PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
			}
			return claims, getPV, nil
		}
	}
	claims, err := c.pvcs.PersistentVolumeClaims(ns).List(sel)
	return claims, c.pvs.Get, err
}

// newGroupContent builds the dynamic group content, born with its
// finalizer; the CSI side marks it being-created right before its call.
func newGroupContent(g *groupv1.VolumeGroupSnapshot, plan *groupPlan) *groupv1.VolumeGroupSnapshotContent {
	className := plan.class.Name
	content := &groupv1.VolumeGroupSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{
			Name:       snapshot.GroupContentNameFor(g.UID),
			Finalizers: []string{snapshot.FinalizerGroupContentBound},
		},
		Spec: groupv1.VolumeGroupSnapshotContentSpec{
			VolumeGroupSnapshotRef: corev1.ObjectReference{
				Kind:            snapshot.KindGroupSnapshot,
				APIVersion:      groupv1.SchemeGroupVersion.String(),
				Namespace:       g.Namespace,
				Name:            g.Name,
				UID:             g.UID,
				ResourceVersion: g.ResourceVersion,
			},
			DeletionPolicy:               plan.class.DeletionPolicy,
			Driver:                       plan.class.Driver,
			VolumeGroupSnapshotClassName: &className,
			Source:                       groupv1.VolumeGroupSnapshotContentSource{VolumeHandles: plan.handles},
		},
	}
	if plan.secretName != "" {
		content.Annotations = map[string]string{
			snapshot.AnnGroupDeletionSecretName:      plan.secretName,
			snapshot.AnnGroupDeletionSecretNamespace: plan.secretNamespace,
		}
	}
	return content
}
