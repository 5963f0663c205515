package validation

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/snapkeeper/snapkeeper/pkg/apis/snapkeeper/v1alpha1"
	"github.com/snapkeeper/snapkeeper/pkg/schedule"
)

var (
	schedNamePath       = field.NewPath("metadata", "name")
	schedLinePath       = field.NewPath("spec", "schedule")
	schedZonePath       = field.NewPath("spec", "timeZone")
	schedSelectorPath   = field.NewPath("spec", "claimSelector")
	schedRetentionPath  = field.NewPath("spec", "retention")
	schedClassPath      = field.NewPath("spec", "snapshotTemplate", "volumeSnapshotClassName")
	schedGroupClassPath = field.NewPath("spec", "groupSnapshot", "volumeGroupSnapshotClassName")
)

// maxScheduleName is the longest label value: the name becomes the
// snapkeeper.io/schedule label of every snapshot the schedule cuts. The CRD
// says so too, but offline validation never meets the CRD.
const maxScheduleName = 63

// fewClasses is how many class names a denial lists in full.
const fewClasses = 5

// Schedule validates a SnapshotSchedule. old is the stored object on
// UPDATE. Nothing of a schedule is immutable: an update is judged by the
// rules of a create, ratcheted as every update is (docs/webhook.md), so a
// schedule whose class was deleted since stays editable.
func (v Validator) Schedule(op Operation, s, old *v1alpha1.SnapshotSchedule) (field.ErrorList, []string) {
	if op == Update && old != nil {
		if beingDeleted(s, old) || equality.Semantic.DeepEqual(s.Spec, old.Spec) {
			return nil, nil
		}
		errs, warnings := v.scheduleRules(s)
		oldErrs, _ := v.scheduleRules(old)
		return ratchet(errs, withoutInternal(oldErrs)), warnings
	}
	return v.scheduleRules(s)
}

// withoutInternal drops failed lookups: a lookup that failed for the old
// object too must not wave the new one through unchecked.
func withoutInternal(errs field.ErrorList) field.ErrorList {
	return slices.DeleteFunc(errs, func(e *field.Error) bool { return e.Type == field.ErrorTypeInternal })
}

func schedObj(s *v1alpha1.SnapshotSchedule) string {
	return nsObj("SnapshotSchedule", s.Namespace, s.Name)
}

func (v Validator) scheduleRules(s *v1alpha1.SnapshotSchedule) (field.ErrorList, []string) {
	if errs := scheduleSpecErrors(s); len(errs) > 0 {
		return errs, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(&s.Spec.ClaimSelector)
	if err != nil {
		return nil, nil // denied by scheduleSpecErrors already
	}
	m, warnings := v.scheduleClaims(s, sel)
	var errs field.ErrorList
	var w []string
	if s.Spec.GroupSnapshot != nil {
		errs, w = v.scheduleGroupClass(s, m)
	} else {
		errs, w = v.scheduleClass(s, m)
	}
	return errs, append(warnings, w...)
}

// scheduleSpecErrors are the rules that depend on the schedule alone.
func scheduleSpecErrors(s *v1alpha1.SnapshotSchedule) field.ErrorList {
	var errs field.ErrorList
	self := schedObj(s)
	if n := len(s.Name); n > maxScheduleName {
		errs = append(errs, invalid(schedNamePath, s.Name,
			"%s has a name of %d characters: at most %d are allowed, as the name is the value of the snapkeeper.io/schedule label of each of its snapshots; choose a shorter name",
			self, n, maxScheduleName))
	}
	errs = append(errs, scheduleTimeErrors(self, s.Spec.Schedule, deref(s.Spec.TimeZone))...)
	errs = append(errs, retentionErrors(self, s.Spec.Retention)...)
	errs = append(errs, claimSelectorErrors(self, &s.Spec.ClaimSelector)...)
	if c := s.Spec.SnapshotTemplate.VolumeSnapshotClassName; c != nil && *c == "" {
		errs = append(errs, invalid(schedClassPath, "",
			"%s sets spec.snapshotTemplate.volumeSnapshotClassName to the empty string: omit the field to use the default class of each claim's driver, or name a class",
			self))
	}
	if g := s.Spec.GroupSnapshot; g != nil && g.VolumeGroupSnapshotClassName != nil && *g.VolumeGroupSnapshotClassName == "" {
		errs = append(errs, invalid(schedGroupClassPath, "",
			"%s sets spec.groupSnapshot.volumeGroupSnapshotClassName to the empty string: omit the field to use the default group class of the claims' driver, or name a group class",
			self))
	}
	return errs
}

// scheduleTimeErrors reads the cron line apart from a bad time zone, so that
// both are reported at once.
func scheduleTimeErrors(self, line, tz string) field.ErrorList {
	var errs field.ErrorList
	_, err := schedule.Parse(line, tz)
	if errors.Is(err, schedule.ErrTimeZone) {
		why := trimSentinel(err, schedule.ErrTimeZone)
		// Parse's answer to "Local" already says what to write instead.
		if tz != "Local" {
			why += "; write an IANA name, or omit spec.timeZone to use UTC"
		}
		errs = append(errs, invalid(schedZonePath, tz, "%s has an invalid spec.timeZone: %s", self, why))
		_, err = schedule.Parse(line, "")
	}
	if err != nil {
		errs = append(errs, invalid(schedLinePath, line, "%s has an invalid spec.schedule: %s",
			self, trimSentinel(err, schedule.ErrSchedule)))
	}
	return errs
}

// trimSentinel drops the "invalid ...: " a wrapped sentinel puts first: the
// message names the field itself.
func trimSentinel(err, sentinel error) string {
	return strings.TrimPrefix(err.Error(), sentinel.Error()+": ")
}

func retentionErrors(self string, r v1alpha1.RetentionPolicy) field.ErrorList {
	_, err := schedule.PolicyFrom(r)
	if err == nil {
		return nil
	}
	shown := describeRetention(r)
	if shown == "" {
		return field.ErrorList{required(schedRetentionPath,
			"%s has no retention rule: set at least one of keepLast, hourly, daily, weekly, monthly, yearly or maxAge in spec.retention (for example keepLast: 7), so that the schedule knows which snapshots to keep",
			self)}
	}
	// PolicyFrom names the fields from retention down; ours from spec.
	why := strings.ReplaceAll(trimSentinel(err, schedule.ErrRetention), "retention.", "spec.retention.")
	return field.ErrorList{invalid(schedRetentionPath, shown,
		"%s has an invalid spec.retention: %s; correct or remove the rules named", self, why)}
}

// describeRetention lists the rules that are set, "" when none is.
func describeRetention(r v1alpha1.RetentionPolicy) string {
	var parts []string
	for _, rule := range schedule.RetentionRules(r) {
		if rule.Name == "maxAge" {
			parts = append(parts, fmt.Sprintf("maxAge: %q", rule.MaxAge))
			continue
		}
		parts = append(parts, fmt.Sprintf("%s: %d", rule.Name, rule.Count))
	}
	return strings.Join(parts, ", ")
}

// scheduleClaims sorts the claims the selector matches today by driver.
// Schedules often come before their claims (a GitOps sync applies both in
// any order), so matching none is a warning; so is a failed lookup, which
// leaves the drivers unchecked.
func (v Validator) scheduleClaims(s *v1alpha1.SnapshotSchedule, sel labels.Selector) (members, []string) {
	self := schedObj(s)
	shown := fmt.Sprintf("spec.claimSelector %q", metav1.FormatLabelSelector(&s.Spec.ClaimSelector))
	if sel.Empty() {
		shown = "the empty spec.claimSelector, which selects every claim,"
	}
	claims, err := v.Lookup.ListPVCs(s.Namespace, sel)
	if err != nil {
		return members{}, []string{fmt.Sprintf(
			"%s: could not list the PersistentVolumeClaims that %s matches (%v); their drivers were not checked", self, shown, err)}
	}
	if len(claims) == 0 {
		return members{}, []string{fmt.Sprintf(
			"%s: %s matches no PersistentVolumeClaim in namespace %q yet; the schedule cuts nothing until claims with matching labels exist",
			self, shown, s.Namespace)}
	}
	return v.sortMembers(self, claims)
}

// scheduleClass checks the class of the schedule's VolumeSnapshots against
// the drivers of the bound claims it selects; unbound claims have no driver
// yet and are left out.
func (v Validator) scheduleClass(s *v1alpha1.SnapshotSchedule, m members) (field.ErrorList, []string) {
	self := schedObj(s)
	drivers := slices.Sorted(maps.Keys(m.drivers))
	name := deref(s.Spec.SnapshotTemplate.VolumeSnapshotClassName)
	if name != "" {
		class, errs := v.namedClass(singleClasses, self, name, schedClassPath)
		for _, d := range drivers {
			if class != nil && d != class.driver {
				n := len(m.drivers[d])
				errs = append(errs, classDriverMismatch(singleClasses, self, class, d, m.drivers[d], schedClassPath,
					plural(n, "the snapshots of that claim", "the snapshots of those claims")))
			}
		}
		return errs, nil
	}
	var warnings []string
	for _, d := range drivers {
		claims := m.drivers[d]
		n := len(claims)
		defaults, err := v.defaultsOf(singleClasses, d)
		switch {
		case err != nil:
			warnings = append(warnings, fmt.Sprintf("%s: could not list VolumeSnapshotClasses (%v); the default class of driver %q was not checked",
				self, err, d))
		case len(defaults) == 0:
			warnings = append(warnings, fmt.Sprintf(
				"%s names no VolumeSnapshotClass and driver %q of %s %s has no default VolumeSnapshotClass, so snapshots of %s would fail; set spec.snapshotTemplate.volumeSnapshotClassName, or mark a class of driver %q default (annotation %s: \"true\")",
				self, d, plural(n, "claim", "claims"), quoteAll(claims), plural(n, "that claim", "those claims"), d, singleClasses.annotation))
		case len(defaults) > 1:
			warnings = append(warnings, fmt.Sprintf(
				"%s names no VolumeSnapshotClass and driver %q of %s %s has several default VolumeSnapshotClasses (%s), so snapshots of %s would fail; set spec.snapshotTemplate.volumeSnapshotClassName, or keep annotation %s on only one of them",
				self, d, plural(n, "claim", "claims"), quoteAll(claims), quoteAll(defaults), plural(n, "that claim", "those claims"), singleClasses.annotation))
		}
	}
	return nil, warnings
}

// scheduleGroupClass checks group mode: each run cuts one VolumeGroupSnapshot
// of all the bound claims selected, by one driver, with one group class.
func (v Validator) scheduleGroupClass(s *v1alpha1.SnapshotSchedule, m members) (field.ErrorList, []string) {
	self := schedObj(s)
	var errs field.ErrorList
	var warnings []string
	if c := deref(s.Spec.SnapshotTemplate.VolumeSnapshotClassName); c != "" {
		warnings = append(warnings, fmt.Sprintf(
			"%s sets spec.snapshotTemplate.volumeSnapshotClassName %q, which group mode does not use: group snapshots are cut with the group class of spec.groupSnapshot.volumeGroupSnapshotClassName; remove it",
			self, c))
	}
	var class *classView
	name := deref(s.Spec.GroupSnapshot.VolumeGroupSnapshotClassName)
	if name != "" {
		class, errs = v.namedClass(groupClasses, self, name, schedGroupClassPath)
	}
	drivers := slices.Sorted(maps.Keys(m.drivers))
	switch {
	case len(drivers) > 1:
		var parts []string
		for _, d := range drivers {
			parts = append(parts, fmt.Sprintf("%s %s of driver %q", plural(len(m.drivers[d]), "claim", "claims"), quoteAll(m.drivers[d]), d))
		}
		errs = append(errs, forbidden(schedSelectorPath,
			"%s is in group mode (spec.groupSnapshot) and selects volumes of %d CSI drivers (%s): one driver cuts a group snapshot, so every run would fail; change spec.claimSelector or the claims' labels so that it selects the claims of one driver, or remove spec.groupSnapshot to snapshot each claim on its own",
			self, len(drivers), strings.Join(parts, "; ")))
	case len(drivers) == 0:
		// Nothing bound is selected yet: no driver to check a class against.
	case class != nil:
		if class.driver != drivers[0] {
			errs = append(errs, classDriverMismatch(groupClasses, self, class, drivers[0], m.drivers[drivers[0]], schedGroupClassPath,
				"every group snapshot"))
		}
	case name == "":
		errs = append(errs, v.defaultGroupClassErrors(self, drivers[0], m.drivers[drivers[0]])...)
	}
	return errs, warnings
}

// defaultGroupClassErrors denies group mode when the claims' driver has no
// single default group class to fall back on: every run would fail.
func (v Validator) defaultGroupClassErrors(self, driver string, claims []string) field.ErrorList {
	defaults, err := v.defaultsOf(groupClasses, driver)
	n := len(claims)
	switch {
	case err != nil:
		return field.ErrorList{lookupFailed(schedGroupClassPath, "VolumeGroupSnapshotClasses", err)}
	case len(defaults) == 0:
		return field.ErrorList{required(schedGroupClassPath,
			"%s is in group mode without a group class: it names none, and driver %q of %s %s has no default VolumeGroupSnapshotClass, so every group snapshot would fail; name one in spec.groupSnapshot.volumeGroupSnapshotClassName, or mark a VolumeGroupSnapshotClass of driver %q default (annotation %s: \"true\")",
			self, driver, plural(n, "claim", "claims"), quoteAll(claims), driver, groupClasses.annotation)}
	case len(defaults) > 1:
		return field.ErrorList{required(schedGroupClassPath,
			"%s is in group mode without a group class: it names none, and driver %q of %s %s has several default VolumeGroupSnapshotClasses (%s), so every group snapshot would fail; name one in spec.groupSnapshot.volumeGroupSnapshotClassName, or keep annotation %s on only one of them",
			self, driver, plural(n, "claim", "claims"), quoteAll(claims), quoteAll(defaults), groupClasses.annotation)}
	}
	return nil
}

// namedClass reads the class a schedule names at path; a class that does
// not exist is denied, since every run would fail until it does.
func (v Validator) namedClass(f *classFamily, self, name string, path *field.Path) (*classView, field.ErrorList) {
	var class *classView
	var err error
	if f == groupClasses {
		c, e := v.Lookup.GetGroupClass(name)
		class, err = groupClassView(c), e
	} else {
		c, e := v.Lookup.GetClass(name)
		class, err = singleClassView(c), e
	}
	if err != nil {
		return nil, field.ErrorList{lookupFailed(path, fmt.Sprintf("%s %q", f.kind, name), err)}
	}
	if class != nil {
		return class, nil
	}
	return nil, field.ErrorList{invalid(path, name,
		"%s names %s %q in %s, which does not exist, so every run would fail: create the class first, or name an existing one%s",
		self, f.kind, name, path, v.existingClasses(f, name))}
}

// existingClasses suggests what to name instead of a missing class: all
// the classes when they are few, else the nearest name.
func (v Validator) existingClasses(f *classFamily, name string) string {
	classes, err := f.list(v.Lookup)
	if err != nil {
		return ""
	}
	names := make([]string, 0, len(classes))
	for _, c := range classes {
		names = append(names, c.GetName())
	}
	slices.Sort(names)
	switch {
	case len(names) == 0:
		return fmt.Sprintf(" (no %s exists yet)", f.kind)
	case len(names) <= fewClasses:
		return fmt.Sprintf(" (existing: %s)", quoteAll(names))
	}
	if c := closest(name, names); c != "" {
		return fmt.Sprintf(" (did you mean %q?)", c)
	}
	return ""
}

// classDriverMismatch denies a named class of another driver than claims
// of the schedule; what is what would fail.
func classDriverMismatch(f *classFamily, self string, class *classView, driver string, claims []string, path *field.Path, what string) *field.Error {
	return invalid(path, class.GetName(),
		"%s names %s %q of driver %q, but it selects %s %s of driver %q, so %s would fail; name a %s of driver %q, or change spec.claimSelector so that it selects only claims of driver %q",
		self, f.kind, class.GetName(), class.driver, plural(len(claims), "claim", "claims"), quoteAll(claims), driver,
		what, f.kind, driver, class.driver)
}
