package validation

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// claimSelectorErrors denies a schedule's claimSelector that is invalid or
// that no set of labels satisfies: such a schedule would silently never
// snapshot anything.
func claimSelectorErrors(self string, sel *metav1.LabelSelector) field.ErrorList {
	if _, err := metav1.LabelSelectorAsSelector(sel); err != nil {
		return field.ErrorList{invalid(schedSelectorPath, metav1.FormatLabelSelector(sel),
			"%s has an invalid spec.claimSelector: %v; write matchLabels as valid label keys and values, and matchExpressions with operator In or NotIn (with values) or Exists or DoesNotExist (without)",
			self, err)}
	}
	if c := selectorContradictions(sel); len(c) > 0 {
		return field.ErrorList{invalid(schedSelectorPath, metav1.FormatLabelSelector(sel),
			"%s has a spec.claimSelector that no claim can match: %s; remove or change one of them, or the schedule never snapshots anything",
			self, strings.Join(c, "; "))}
	}
	return nil
}

// keyRequirements are the requirements of a selector on one label key, by
// what they demand of the key.
type keyRequirements struct {
	restrict []string   // matchLabels and In: the key has one of these values
	allowed  [][]string // the values each of them allows
	exists   []string   // Exists
	absent   []string   // DoesNotExist
	exclude  []string   // NotIn
	excluded map[string]bool
}

// selectorContradictions describes, key by key, the requirements of a valid
// selector that no set of labels satisfies together.
func selectorContradictions(sel *metav1.LabelSelector) []string {
	keys := map[string]*keyRequirements{}
	on := func(key string) *keyRequirements {
		if keys[key] == nil {
			keys[key] = &keyRequirements{excluded: map[string]bool{}}
		}
		return keys[key]
	}
	for _, k := range slices.Sorted(maps.Keys(sel.MatchLabels)) {
		r, val := on(k), sel.MatchLabels[k]
		r.restrict = append(r.restrict, fmt.Sprintf("matchLabels %s=%s", k, val))
		r.allowed = append(r.allowed, []string{val})
	}
	for _, e := range sel.MatchExpressions {
		r := on(e.Key)
		desc := fmt.Sprintf("matchExpressions %s %s", e.Key, e.Operator)
		if len(e.Values) > 0 {
			desc += fmt.Sprintf(" [%s]", strings.Join(e.Values, ", "))
		}
		switch e.Operator {
		case metav1.LabelSelectorOpIn:
			r.restrict = append(r.restrict, desc)
			r.allowed = append(r.allowed, e.Values)
		case metav1.LabelSelectorOpNotIn:
			r.exclude = append(r.exclude, desc)
			for _, val := range e.Values {
				r.excluded[val] = true
			}
		case metav1.LabelSelectorOpExists:
			r.exists = append(r.exists, desc)
		case metav1.LabelSelectorOpDoesNotExist:
			r.absent = append(r.absent, desc)
		}
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if clash := keys[k].contradiction(); len(clash) > 0 {
			out = append(out, fmt.Sprintf("%s contradict (label %q)", joinAnd(clash), k))
		}
	}
	return out
}

// contradiction returns the requirements that cannot hold together, or nil.
func (r *keyRequirements) contradiction() []string {
	present := slices.Concat(r.restrict, r.exists)
	if len(r.absent) > 0 && len(present) > 0 {
		return slices.Concat(present, r.absent)
	}
	if len(r.allowed) == 0 {
		return nil
	}
	values := r.allowed[0]
	for _, more := range r.allowed[1:] {
		values = slices.DeleteFunc(slices.Clone(values), func(v string) bool { return !slices.Contains(more, v) })
	}
	if len(values) == 0 {
		return r.restrict
	}
	if !slices.ContainsFunc(values, func(v string) bool { return !r.excluded[v] }) {
		return slices.Concat(r.restrict, r.exclude)
	}
	return nil
}

func joinAnd(s []string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}
