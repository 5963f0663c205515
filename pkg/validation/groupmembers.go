package validation

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// members sorts the claims a group's selector matches by what they are.
type members struct {
	unbound []string            // claims without a bound volume
	notCSI  []string            // "claim" (volume "pv") of other volume kinds
	drivers map[string][]string // CSI driver -> claims
}

// groupMembers judges the claims the selector of a new group matches in its
// namespace: one CSI driver cuts a group snapshot, from bound volumes, so
// an unbound claim, a non-CSI volume or a second driver can never succeed.
// A selector that matches nothing yet is a warning: the controller waits.
// A failed lookup is a warning too, never a denial: these checks only
// bring forward what the controller would report later.
func (v Validator) groupMembers(g *groupv1.VolumeGroupSnapshot, class *groupv1.VolumeGroupSnapshotClass) (field.ErrorList, []string) {
	self := groupObj(g)
	sel, err := metav1.LabelSelectorAsSelector(g.Spec.Source.Selector)
	if err != nil {
		return nil, nil // denied by groupSnapshotSpecErrors already
	}
	shown := metav1.FormatLabelSelector(g.Spec.Source.Selector)
	var warnings []string
	if sel.Empty() {
		warnings = append(warnings, fmt.Sprintf(
			"%s has an empty spec.source.selector, which selects every PersistentVolumeClaim in namespace %q; add matchLabels to select the claims of one application",
			self, g.Namespace))
	}
	claims, err := v.Lookup.ListPVCs(g.Namespace, sel)
	if err != nil {
		return nil, append(warnings, fmt.Sprintf(
			"%s: could not list the PersistentVolumeClaims that spec.source.selector %q matches (%v); their binding and drivers were not checked",
			self, shown, err))
	}
	if len(claims) == 0 {
		return nil, append(warnings, fmt.Sprintf(
			"%s: spec.source.selector %q matches no PersistentVolumeClaim in namespace %q yet; the group snapshot waits until claims with matching labels exist",
			self, shown, g.Namespace))
	}
	m, w := v.sortMembers(self, claims)
	warnings = append(warnings, w...)
	errs := m.errors(self)
	if len(m.drivers) != 1 {
		return errs, warnings
	}
	driver := slices.Collect(maps.Keys(m.drivers))[0]
	switch {
	case class != nil && class.Driver != driver:
		errs = append(errs, invalid(groupClassPath, class.Name,
			"%s names VolumeGroupSnapshotClass %q of driver %q, but the claims it selects (%s) are volumes of driver %q, so the group snapshot would fail; name a VolumeGroupSnapshotClass of driver %q",
			self, class.Name, class.Driver, quoteAll(m.drivers[driver]), driver, driver))
	case g.Spec.VolumeGroupSnapshotClassName == nil && len(errs) == 0:
		warnings = append(warnings, v.defaultClassWarnings(groupClasses, self, driver, "spec.volumeGroupSnapshotClassName")...)
	}
	return errs, warnings
}

// sortMembers looks up the volume of every bound claim. A volume that
// cannot be read is a warning and leaves its claim out of the checks.
func (v Validator) sortMembers(self string, claims []*corev1.PersistentVolumeClaim) (members, []string) {
	slices.SortFunc(claims, func(a, b *corev1.PersistentVolumeClaim) int { return strings.Compare(a.Name, b.Name) })
	m := members{drivers: map[string][]string{}}
	var warnings []string
	for _, c := range claims {
		if c.Status.Phase != corev1.ClaimBound || c.Spec.VolumeName == "" {
			m.unbound = append(m.unbound, c.Name)
			continue
		}
		pv, err := v.Lookup.GetPV(c.Spec.VolumeName)
		switch {
		case err != nil:
			warnings = append(warnings, fmt.Sprintf("%s: could not check PersistentVolume %q of claim %q: %v; its driver was not checked",
				self, c.Spec.VolumeName, c.Name, err))
		case pv == nil:
			warnings = append(warnings, fmt.Sprintf("%s: PersistentVolume %q of claim %q does not exist; its driver was not checked",
				self, c.Spec.VolumeName, c.Name))
		case pv.Spec.CSI == nil:
			m.notCSI = append(m.notCSI, fmt.Sprintf("%q (volume %q)", c.Name, pv.Name))
		default:
			m.drivers[pv.Spec.CSI.Driver] = append(m.drivers[pv.Spec.CSI.Driver], c.Name)
		}
	}
	return m, warnings
}

func (m members) errors(self string) field.ErrorList {
	var errs field.ErrorList
	if n := len(m.unbound); n > 0 {
		errs = append(errs, forbidden(groupSelectorPath,
			"%s selects %s %s, which %s not bound yet: a group snapshot is cut from bound volumes only; wait until %s %s %s bound, or change spec.source.selector or the claims' labels",
			self, plural(n, "PersistentVolumeClaim", "PersistentVolumeClaims"), quoteAll(m.unbound), plural(n, "is", "are"),
			plural(n, "claim", "claims"), quoteAll(m.unbound), plural(n, "is", "are")))
	}
	if n := len(m.notCSI); n > 0 {
		errs = append(errs, forbidden(groupSelectorPath,
			"%s selects %s %s, which %s: only CSI volumes can be snapshotted as a group; change spec.source.selector or the claims' labels so that only CSI volumes are selected",
			self, plural(n, "PersistentVolumeClaim", "PersistentVolumeClaims"), strings.Join(m.notCSI, ", "),
			plural(n, "is not a CSI volume", "are not CSI volumes")))
	}
	if len(m.drivers) > 1 {
		var parts []string
		for _, d := range slices.Sorted(maps.Keys(m.drivers)) {
			parts = append(parts, fmt.Sprintf("%s %s of driver %q",
				plural(len(m.drivers[d]), "claim", "claims"), quoteAll(m.drivers[d]), d))
		}
		errs = append(errs, forbidden(groupSelectorPath,
			"%s selects volumes of %d CSI drivers (%s): one driver cuts a group snapshot, so it would fail; change spec.source.selector or the claims' labels so that it selects the claims of one driver",
			self, len(m.drivers), strings.Join(parts, "; ")))
	}
	return errs
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
