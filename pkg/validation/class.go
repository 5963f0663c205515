package validation

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
)

var (
	classDefaultPath = field.NewPath("metadata", "annotations").Key(snapshot.AnnDefaultClass)
	classDriverPath  = field.NewPath("driver")
	classParamsPath  = field.NewPath("parameters")
	classPolicyPath  = field.NewPath("deletionPolicy")
)

// Class validates a VolumeSnapshotClass. old is the stored object on UPDATE.
func (v Validator) Class(op Operation, c, old *snapv1.VolumeSnapshotClass) (field.ErrorList, []string) {
	if op == Update && old != nil {
		return v.classUpdate(c, old)
	}
	errs := classSpecErrors(c)
	warnings := defaultValueWarnings(c, nil)
	if snapshot.IsDefaultClass(c.Annotations) {
		e, w := v.defaultConflict(c)
		errs = append(errs, e...)
		warnings = append(warnings, w...)
	}
	return errs, warnings
}

func (v Validator) classUpdate(c, old *snapv1.VolumeSnapshotClass) (field.ErrorList, []string) {
	if beingDeleted(c, old) {
		return nil, nil
	}
	warnings := defaultValueWarnings(c, old)
	var errs field.ErrorList
	if c.Driver != old.Driver || c.DeletionPolicy != old.DeletionPolicy ||
		!equality.Semantic.DeepEqual(c.Parameters, old.Parameters) {
		errs = ratchet(classSpecErrors(c), classSpecErrors(old))
		warnings = append(warnings, v.classInUseWarnings(c, old)...)
	}
	// Only a change that newly makes the class the default of a driver is
	// judged against the other classes: a GitOps re-sync of an unchanged
	// default class must never fail, even where two defaults already exist.
	newlyDefault := snapshot.IsDefaultClass(c.Annotations) &&
		(!snapshot.IsDefaultClass(old.Annotations) || c.Driver != old.Driver)
	if newlyDefault {
		e, w := v.defaultConflict(c)
		errs = append(errs, e...)
		warnings = append(warnings, w...)
	}
	return errs, warnings
}

// classSpecErrors are the rules that depend on the class alone.
func classSpecErrors(c *snapv1.VolumeSnapshotClass) field.ErrorList {
	var errs field.ErrorList
	self := clusterObj("VolumeSnapshotClass", c.Name)
	if why := validCSIDriverName(c.Driver); why != "" {
		errs = append(errs, invalid(classDriverPath, c.Driver,
			"%s has an invalid driver %q: %s; use the name the CSI driver reports (the name of its CSIDriver object)",
			self, c.Driver, why))
	}
	if p := c.DeletionPolicy; p != snapv1.VolumeSnapshotContentDelete && p != snapv1.VolumeSnapshotContentRetain {
		errs = append(errs, invalid(classPolicyPath, p,
			"%s has deletionPolicy %q: it must be %q or %q; set one of them",
			self, p, snapv1.VolumeSnapshotContentDelete, snapv1.VolumeSnapshotContentRetain))
	}
	return append(errs, paramErrors(self, c.Parameters)...)
}

// paramErrors checks the reserved csi.storage.k8s.io/ parameters: the
// controller strips and interprets them, and fails every snapshot of the
// class on an unknown key or an unusable secret reference.
func paramErrors(self string, params map[string]string) field.ErrorList {
	var errs field.ErrorList
	for _, key := range slices.Sorted(maps.Keys(params)) {
		if !snapshot.IsReservedParam(key) || snapshot.IsKnownReservedParam(key) {
			continue
		}
		fix := fmt.Sprintf("use one of %s, or drop the prefix if the key is meant for the driver",
			quoteAll(snapshot.KnownClassParamKeys()))
		if s := closest(key, snapshot.KnownClassParamKeys()); s != "" {
			fix = fmt.Sprintf("did you mean %q?", s)
		}
		errs = append(errs, invalid(classParamsPath.Key(key), key,
			"%s has unknown parameter %q: keys starting with %q are reserved for the snapshot controller, which fails every snapshot of this class on an unknown one; %s",
			self, key, snapshot.ReservedPrefix, fix))
	}
	for _, pair := range snapshot.SecretParamPairs {
		errs = append(errs, secretPairErrors(self, params, pair)...)
	}
	return errs
}

func secretPairErrors(self string, params map[string]string, pair snapshot.SecretParamPair) field.ErrorList {
	name, hasName := params[pair.NameKey]
	ns, hasNS := params[pair.NamespaceKey]
	switch {
	case !hasName && !hasNS:
		return nil
	case hasName != hasNS:
		have, missing := pair.NameKey, pair.NamespaceKey
		if hasNS {
			have, missing = missing, have
		}
		return field.ErrorList{required(classParamsPath.Key(missing),
			"%s sets parameter %q but not %q: a secret reference needs both a name and a namespace; add %q or remove %q",
			self, have, missing, missing, have)}
	}
	errs := secretValueErrors(self, pair.NameKey, name, pair.NameTokens, "secret name", utilvalidation.IsDNS1123Subdomain)
	return append(errs, secretValueErrors(self, pair.NamespaceKey, ns, pair.NamespaceTokens, "namespace", utilvalidation.IsDNS1123Label)...)
}

// secretValueErrors checks one side of a secret reference: non-empty, only
// known templates, and a valid name once the templates are resolved.
func secretValueErrors(self, key, value string, allowed []string, what string, valid func(string) []string) field.ErrorList {
	path := classParamsPath.Key(key)
	if value == "" {
		return field.ErrorList{required(path,
			"%s has an empty parameter %q: the %s of a secret reference must not be empty; set it, or remove both keys of the pair",
			self, key, what)}
	}
	tokens, err := snapshot.TemplateTokens(value)
	if err != nil {
		return field.ErrorList{invalid(path, value,
			"%s parameter %q has an %v; close it with \"}\"", self, key, err)}
	}
	for _, t := range tokens {
		if !slices.Contains(allowed, t) {
			return field.ErrorList{invalid(path, value,
				"%s parameter %q uses template %s, which is not known for a %s; use %s or a literal %s",
				self, key, t, what, strings.Join(allowed, ", "), what)}
		}
	}
	resolved := snapshot.ResolveTemplate(value, snapshot.SampleTemplateVars)
	if msgs := valid(resolved); len(msgs) > 0 {
		once := ""
		if len(tokens) > 0 {
			once = " once its templates are resolved"
		}
		return field.ErrorList{invalid(path, value,
			"%s parameter %q value %q is not a valid %s%s: %s; use lower-case letters, digits and '-'%s",
			self, key, value, what, once, msgs[0], dotsFor(what))}
	}
	return nil
}

func dotsFor(what string) string {
	if what == "namespace" {
		return ""
	}
	return " and '.'"
}

// defaultConflict denies a class that would become a second default for its
// driver. It reads the classes fresh from the API server, so a default class
// created a moment ago (and not yet in the cache) is seen.
func (v Validator) defaultConflict(c *snapv1.VolumeSnapshotClass) (field.ErrorList, []string) {
	var warnings []string
	classes, err := v.Lookup.ListClassesFresh()
	if err != nil {
		warnings = append(warnings, fmt.Sprintf(
			"could not read VolumeSnapshotClasses from the API server (%v); checked the default class against the cache", err))
		classes, err = v.Lookup.ListClasses()
		if err != nil {
			return field.ErrorList{lookupFailed(classDefaultPath, "VolumeSnapshotClasses", err)}, warnings
		}
	}
	var others []string
	for _, o := range classes {
		if o.Name != c.Name && o.Driver == c.Driver && snapshot.IsDefaultClass(o.Annotations) && !snapshot.IsBeingDeleted(o) {
			others = append(others, o.Name)
		}
	}
	if len(others) == 0 {
		return nil, warnings
	}
	slices.Sort(others)
	verb := "already is"
	if len(others) > 1 {
		verb = "already are"
	}
	return field.ErrorList{invalid(classDefaultPath, c.Annotations[snapshot.AnnDefaultClass],
		"%s cannot be the default for driver %q: %s %s; remove the annotation from %s first",
		clusterObj("VolumeSnapshotClass", c.Name), c.Driver, quoteAll(others), verb, quoteAll(others))}, warnings
}

// defaultValueWarnings warns about an is-default-class value that is neither
// "true" nor "false": it is silently not a default. On UPDATE it warns only
// when the value changed, so re-syncs stay quiet.
func defaultValueWarnings(c, old *snapv1.VolumeSnapshotClass) []string {
	val, ok := c.Annotations[snapshot.AnnDefaultClass]
	if !ok || val == "true" || val == "false" {
		return nil
	}
	if old != nil && old.Annotations[snapshot.AnnDefaultClass] == val {
		return nil
	}
	return []string{fmt.Sprintf(
		"VolumeSnapshotClass %q has %s: %q, which is not \"true\", so it is not a default class; write \"true\" or \"false\"",
		c.Name, snapshot.AnnDefaultClass, val)}
}

// classInUseWarnings warns when a class already used by contents changes its
// driver or deletion policy: existing contents keep what they were made with.
func (v Validator) classInUseWarnings(c, old *snapv1.VolumeSnapshotClass) []string {
	if c.Driver == old.Driver && c.DeletionPolicy == old.DeletionPolicy {
		return nil
	}
	inUse, err := v.Lookup.ClassInUse(c.Name)
	if err != nil {
		return []string{fmt.Sprintf("could not check whether VolumeSnapshotClass %q is in use: %v", c.Name, err)}
	}
	if !inUse {
		return nil
	}
	var w []string
	if c.Driver != old.Driver {
		w = append(w, fmt.Sprintf(
			"VolumeSnapshotClass %q is in use and changes driver from %q to %q: existing snapshots stay with %q, new ones go to %q",
			c.Name, old.Driver, c.Driver, old.Driver, c.Driver))
	}
	if c.DeletionPolicy != old.DeletionPolicy {
		w = append(w, fmt.Sprintf(
			"VolumeSnapshotClass %q is in use and changes deletionPolicy from %s to %s: existing VolumeSnapshotContents keep %s; patch them to change it",
			c.Name, old.DeletionPolicy, c.DeletionPolicy, old.DeletionPolicy))
	}
	return w
}

func quoteAll(s []string) string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = fmt.Sprintf("%q", v)
	}
	return strings.Join(q, ", ")
}
