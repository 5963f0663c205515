package binder

import (
	"sort"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
func (c *Controller) planGroup(g *groupv1.VolumeGroupSnapshot) (*groupPlan, *problem) {
	sel, err := metav1.LabelSelectorAsSelector(g.Spec.Source.Selector)
	if err != nil {
		return nil, problemf(snapshot.ReasonGroupSnapshotValidationError,
			"spec.source.selector is not a valid label selector: %v; delete the VolumeGroupSnapshot and create it with a valid selector", err)
	}
	claims, err := c.pvcs.PersistentVolumeClaims(g.Namespace).List(sel)
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
		pv, prob := c.claimVolume(pvc, c.pvs.Get)
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
