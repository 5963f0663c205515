package validation

import (
	"fmt"
	"strings"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
)

var (
	pvcDataSourcePath = field.NewPath("spec", "dataSource")
	pvcDataRefPath    = field.NewPath("spec", "dataSourceRef")
	pvcStoragePath    = field.NewPath("spec", "resources", "requests").Key(string(corev1.ResourceStorage))
	pvcModePath       = field.NewPath("spec", "volumeMode")
)

// dataSource is dataSource or dataSourceRef, whichever the claim names.
type dataSource struct {
	path                         *field.Path
	group, kind, name, namespace string
}

// PVC validates a PersistentVolumeClaim on CREATE: its data source. The
// data source of a claim cannot change after creation, so UPDATE is always
// admitted.
func (v Validator) PVC(op Operation, pvc, _ *corev1.PersistentVolumeClaim) (field.ErrorList, []string) {
	if op != Create {
		return nil, nil
	}
	var sources []dataSource
	if ds := pvc.Spec.DataSource; ds != nil {
		sources = append(sources, dataSource{pvcDataSourcePath, deref(ds.APIGroup), ds.Kind, ds.Name, ""})
	}
	// The API server copies dataSource into dataSourceRef (and back, when
	// no namespace is set), so users cannot tell which one they wrote: judge
	// the pair once unless they differ, and word messages for either.
	if ref := pvc.Spec.DataSourceRef; ref != nil {
		s := dataSource{pvcDataRefPath, deref(ref.APIGroup), ref.Kind, ref.Name, deref(ref.Namespace)}
		if len(sources) == 0 || !sameSource(sources[0], s) {
			sources = append(sources, s)
		}
	}
	var errs field.ErrorList
	var warnings []string
	for _, s := range sources {
		e, w := v.pvcSource(pvc, s)
		errs = append(errs, e...)
		warnings = append(warnings, w...)
	}
	return errs, warnings
}

func sameSource(a, b dataSource) bool {
	return a.group == b.group && a.kind == b.kind && a.name == b.name && a.namespace == b.namespace
}

func pvcObj(pvc *corev1.PersistentVolumeClaim) string {
	return nsObj("PersistentVolumeClaim", pvc.Namespace, pvc.Name)
}

func (v Validator) pvcSource(pvc *corev1.PersistentVolumeClaim, s dataSource) (field.ErrorList, []string) {
	self := pvcObj(pvc)
	isSnapshot := s.kind == snapshot.KindSnapshot
	isClaim := s.kind == snapshot.KindPVC
	switch {
	case isSnapshot && s.group != snapshot.GroupName:
		// Without the right group no snapshot is restored: depending on
		// the provisioner the claim hangs, or is provisioned EMPTY.
		return field.ErrorList{invalid(s.path.Child("apiGroup"), s.group,
			"%s restores from VolumeSnapshot %q but the data source's apiGroup is %s: a VolumeSnapshot source needs apiGroup %q, otherwise no snapshot is restored and the volume may be provisioned empty; set apiGroup: %s",
			self, s.name, describeGroup(s.group), snapshot.GroupName, snapshot.GroupName)}, nil
	case isClaim && s.group != "":
		return field.ErrorList{invalid(s.path.Child("apiGroup"), s.group,
			"%s clones PersistentVolumeClaim %q but the data source's apiGroup is %s: claims are in the core API group; remove apiGroup",
			self, s.name, describeGroup(s.group))}, nil
	case !isSnapshot && !isClaim:
		return v.populatorCheck(self, s)
	}
	namespace := pvc.Namespace
	if s.namespace != "" && s.namespace != pvc.Namespace {
		if !v.Options.AllowCrossNamespaceDataSource {
			return field.ErrorList{forbidden(s.path.Child("namespace"),
				"%s takes its data from namespace %q: cross-namespace data sources are not allowed here; copy the source into namespace %q, or have an administrator start the webhook with --allow-cross-namespace-data-source (the CrossNamespaceVolumeDataSource feature and a ReferenceGrant are needed too)",
				self, s.namespace, pvc.Namespace)}, nil
		}
		namespace = s.namespace
	}
	if isClaim {
		return nil, nil
	}
	return v.restoreChecks(pvc, s, namespace)
}

func describeGroup(g string) string {
	if g == "" {
		return "empty"
	}
	return fmt.Sprintf("%q", g)
}

// populatorCheck handles a data source of any other kind: a volume
// populator's. Registration through a VolumePopulator object is optional
// (KubeVirt CDI and VolSync work without it), so a missing one is a warning
// unless the administrator asked for strictness.
func (v Validator) populatorCheck(self string, s dataSource) (field.ErrorList, []string) {
	ok, err := v.Lookup.PopulatorRegistered(s.group, s.kind)
	if err != nil {
		return nil, []string{fmt.Sprintf("%s: could not check VolumePopulators for kind %q of apiGroup %q: %v", self, s.kind, s.group, err)}
	}
	if ok {
		return nil, nil
	}
	hint := ""
	if strings.EqualFold(s.kind, snapshot.KindSnapshot) || strings.EqualFold(s.kind, snapshot.KindPVC) {
		hint = fmt.Sprintf(" (kinds are case-sensitive: did you mean %q?)", properKind(s.kind))
	}
	msg := fmt.Sprintf(
		"%s uses a data source of kind %q and apiGroup %s, which no VolumePopulator registers%s: the claim stays Pending unless a populator handles that kind; install the populator and its VolumePopulator object, or fix apiGroup and kind",
		self, s.kind, describeGroup(s.group), hint)
	if v.Options.StrictPopulators {
		return field.ErrorList{field.Invalid(s.path.Child("kind"), s.kind, msg)}, nil
	}
	return nil, []string{msg}
}

func properKind(k string) string {
	if strings.EqualFold(k, snapshot.KindSnapshot) {
		return snapshot.KindSnapshot
	}
	return snapshot.KindPVC
}

// restoreChecks judges a restore from a VolumeSnapshot that exists: the
// restore must be able to succeed. A snapshot that does not exist yet or is
// not ready is only a warning: the claim waits for it.
func (v Validator) restoreChecks(pvc *corev1.PersistentVolumeClaim, s dataSource, namespace string) (field.ErrorList, []string) {
	self := pvcObj(pvc)
	snapRef := namespace + "/" + s.name
	snap, err := v.Lookup.GetSnapshot(namespace, s.name)
	if err != nil {
		return field.ErrorList{lookupFailed(s.path, fmt.Sprintf("VolumeSnapshot %q", snapRef), err)}, nil
	}
	if snap == nil {
		return nil, []string{fmt.Sprintf(
			"%s: VolumeSnapshot %q does not exist yet; the claim stays Pending until it exists and is ready", self, snapRef)}
	}
	if snapshot.IsBeingDeleted(snap) {
		return field.ErrorList{forbidden(s.path.Child("name"),
			"%s restores from VolumeSnapshot %q, which is being deleted: the restore cannot finish once it is gone; choose another snapshot",
			self, snapRef)}, nil
	}
	var errs field.ErrorList
	var warnings []string
	if st := snap.Status; st == nil || st.ReadyToUse == nil || !*st.ReadyToUse {
		warnings = append(warnings, fmt.Sprintf(
			"%s: VolumeSnapshot %q is not ready to use yet; the claim stays Pending until it is", self, snapRef))
	}
	if e := restoreSizeError(pvc, snap, snapRef); e != nil {
		errs = append(errs, e)
	}
	e, w := v.volumeModeCheck(pvc, snap, snapRef)
	return append(errs, e...), append(warnings, w...)
}

func restoreSizeError(pvc *corev1.PersistentVolumeClaim, snap *snapv1.VolumeSnapshot, snapRef string) *field.Error {
	if snap.Status == nil || snap.Status.RestoreSize == nil {
		return nil
	}
	req, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	restore := *snap.Status.RestoreSize
	if !ok || req.Cmp(restore) >= 0 {
		return nil
	}
	return invalid(pvcStoragePath, req.String(),
		"%s requests %s but VolumeSnapshot %q needs at least its restoreSize %s: a volume cannot be restored smaller than its snapshot; request %s or more",
		pvcObj(pvc), req.String(), snapRef, restore.String(), restore.String())
}

// volumeModeCheck refuses a restore that changes the volume mode: a block
// snapshot restored as a filesystem (or back) is mounted by the kubelet
// without a filesystem check, a known way to crash nodes. An administrator
// allows it per content with an annotation.
func (v Validator) volumeModeCheck(pvc *corev1.PersistentVolumeClaim, snap *snapv1.VolumeSnapshot, snapRef string) (field.ErrorList, []string) {
	name := deref(snap.Spec.Source.VolumeSnapshotContentName)
	if snap.Status != nil && deref(snap.Status.BoundVolumeSnapshotContentName) != "" {
		name = *snap.Status.BoundVolumeSnapshotContentName
	}
	if name == "" {
		return nil, nil
	}
	content, err := v.Lookup.GetContent(name)
	if err != nil {
		return field.ErrorList{lookupFailed(pvcModePath, fmt.Sprintf("VolumeSnapshotContent %q", name), err)}, nil
	}
	if content == nil || content.Spec.SourceVolumeMode == nil {
		return nil, nil
	}
	want := corev1.PersistentVolumeFilesystem
	if pvc.Spec.VolumeMode != nil {
		want = *pvc.Spec.VolumeMode
	}
	have := *content.Spec.SourceVolumeMode
	if have == want || snapshot.HasAnnotation(content, snapshot.AnnAllowVolumeModeChange, "true") {
		return nil, nil
	}
	return field.ErrorList{invalid(pvcModePath, want,
		"%s asks for volumeMode %s but VolumeSnapshot %q was cut from a %s volume (spec.sourceVolumeMode of VolumeSnapshotContent %q): a restore may not change the mode unless allowed; use volumeMode %s, or have an administrator annotate the content with %s: \"true\"",
		pvcObj(pvc), want, snapRef, have, name, have, snapshot.AnnAllowVolumeModeChange)}, nil
}
