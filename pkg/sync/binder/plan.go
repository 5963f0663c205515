package binder

import (
	"context"
	"sort"
	"strings"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
)

// contentPlan is everything a dynamic snapshot's content is made from.
type contentPlan struct {
	pvc   *corev1.PersistentVolumeClaim
	pv    *corev1.PersistentVolume
	class *snapv1.VolumeSnapshotClass
	// node is the Node the volume is reachable from, with distributed
	// snapshotting; "" when none matches.
	node string
	// secret is the resolved deletion secret, if the class names one.
	secretName, secretNamespace string
}

// planContent checks that a dynamic snapshot can be cut and resolves its
// class; a problem says what the user must fix or what we wait for.
func (c *Controller) planContent(ctx context.Context, vs *snapv1.VolumeSnapshot) (*contentPlan, *problem) {
	claim := *vs.Spec.Source.PersistentVolumeClaimName
	pvc, pv, prob := c.snapshotSource(ctx, vs.Namespace, claim)
	if prob != nil {
		return nil, prob
	}
	class, prob := c.resolveClass(vs, pv.Spec.CSI.Driver)
	if prob != nil {
		return nil, prob
	}
	if class.Driver != pv.Spec.CSI.Driver {
		return nil, problemf(snapshot.ReasonGetSnapshotClassFailed,
			"VolumeSnapshotClass %q is for driver %q but the volume of claim %s/%s belongs to %q; use a class of driver %q",
			class.Name, class.Driver, vs.Namespace, claim, pv.Spec.CSI.Driver, pv.Spec.CSI.Driver)
	}
	plan := &contentPlan{pvc: pvc, pv: pv, class: class}
	if c.cfg.DistributedSnapshotting {
		node, err := c.nodeOf(pv)
		if err != nil {
			return nil, problemf(snapshot.ReasonSnapshotContentCreationFailed, "cannot find the node of PersistentVolume %q: %v", pv.Name, err)
		}
		if errs := validation.IsValidLabelValue(node); len(errs) > 0 {
			// The API server would refuse the content on every retry.
			return nil, problemf(snapshot.ReasonSnapshotContentCreationFailed,
				"Node %q of PersistentVolume %q cannot be the value of label %s on the content (%s), by which that node's CSI side finds it; "+
					"distributed snapshotting needs node names that are valid label values: give the node a name of at most 63 characters, or snapshot this volume without --enable-distributed-snapshotting",
				node, pv.Name, snapshot.LabelManagedBy, strings.Join(errs, "; "))
		}
		plan.node = node
	}
	if prob := plan.resolveSecret(vs); prob != nil {
		return nil, prob
	}
	return plan, nil
}

// resolveSecret fills in the deletion secret from the class templates.
func (p *contentPlan) resolveSecret(vs *snapv1.VolumeSnapshot) *problem {
	vars := snapshot.TemplateVars{ContentName: snapshot.ContentNameFor(vs.UID), SnapshotNamespace: vs.Namespace, SnapshotName: vs.Name}
	var prob *problem
	p.secretName, p.secretNamespace, prob = resolveSecret("VolumeSnapshotClass", p.class.Name, p.class.Parameters,
		snapshot.ParamSecretName, snapshot.ParamSecretNamespace, vars, snapshot.ReasonGetSnapshotClassFailed)
	return prob
}

// resolveSecret resolves the secret a class names through the parameter
// pair nameKey/namespaceKey: both or neither must be set, and the resolved
// values must be a valid name and namespace. ("", "", nil) when the class
// names no secret. Single and group classes share it.
func resolveSecret(kind, className string, params map[string]string, nameKey, namespaceKey string, vars snapshot.TemplateVars, reason string) (string, string, *problem) {
	nameT, hasName := params[nameKey]
	nsT, hasNS := params[namespaceKey]
	if !hasName && !hasNS {
		return "", "", nil
	}
	if !hasName || !hasNS || nameT == "" || nsT == "" {
		return "", "", problemf(reason, "%s %q must set both %s and %s, non-empty", kind, className, nameKey, namespaceKey)
	}
	// Each side may use only its own tokens (snapshot.ResolveSecretTemplate):
	// the webhook may have been bypassed when the class was stored.
	pair, _ := snapshot.PairOf(nameKey)
	name, ns, err := snapshot.ResolveSecretPair(pair, params, vars)
	if err != nil {
		return "", "", problemf(reason, "%s %q: %v", kind, className, err)
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return "", "", problemf(reason, "secret name %q from parameter %s of %s %q is invalid: %s; set it to a Secret name (lower-case letters, digits, '-' and '.')",
			name, nameKey, kind, className, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return "", "", problemf(reason, "secret namespace %q from parameter %s of %s %q is invalid: %s; set it to a namespace name (lower-case letters, digits and '-')",
			ns, namespaceKey, kind, className, strings.Join(errs, "; "))
	}
	return name, ns, nil
}

// newContent builds the dynamic content, born with its finalizer. It is not
// born with the being-created mark: the CSI side sets that right before its
// call, so a snapshot deleted before any call costs no CreateSnapshot.
func (c *Controller) newContent(vs *snapv1.VolumeSnapshot, plan *contentPlan) *snapv1.VolumeSnapshotContent {
	className := plan.class.Name
	handle := plan.pv.Spec.CSI.VolumeHandle
	content := &snapv1.VolumeSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{
			Name:       snapshot.ContentNameFor(vs.UID),
			Finalizers: []string{snapshot.FinalizerContentBound},
		},
		Spec: snapv1.VolumeSnapshotContentSpec{
			VolumeSnapshotRef: corev1.ObjectReference{
				Kind:            snapshot.KindSnapshot,
				APIVersion:      snapshot.GroupName + "/v1",
				Namespace:       vs.Namespace,
				Name:            vs.Name,
				UID:             vs.UID,
				ResourceVersion: vs.ResourceVersion,
			},
			DeletionPolicy:          plan.class.DeletionPolicy,
			Driver:                  plan.class.Driver,
			VolumeSnapshotClassName: &className,
			Source:                  snapv1.VolumeSnapshotContentSource{VolumeHandle: &handle},
		},
	}
	if plan.secretName != "" {
		content.Annotations = map[string]string{}
		content.Annotations[snapshot.AnnDeletionSecretName] = plan.secretName
		content.Annotations[snapshot.AnnDeletionSecretNamespace] = plan.secretNamespace
	}
	if c.cfg.SourceVolumeMode {
		mode := corev1.PersistentVolumeFilesystem
		if plan.pv.Spec.VolumeMode != nil {
			mode = *plan.pv.Spec.VolumeMode
		}
		content.Spec.SourceVolumeMode = &mode
	}
	if plan.node != "" {
		content.Labels = map[string]string{snapshot.LabelManagedBy: plan.node}
	}
	return content
}

// nodeOf is the first Node that satisfies the PV's required node affinity,
// whatever its topology keys (a driver's own zone or node label as well as
// kubernetes.io/hostname), or "" when the PV has none or no Node matches.
// The CSI side of that node (--node-deployment) handles the content.
func (c *Controller) nodeOf(pv *corev1.PersistentVolume) (string, error) {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil || c.nodes == nil {
		return "", nil
	}
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return "", err
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	for _, node := range nodes {
		if ok, _ := corev1helpers.MatchNodeSelectorTerms(node, pv.Spec.NodeAffinity.Required); ok {
			return node.Name, nil
		}
	}
	return "", nil
}
