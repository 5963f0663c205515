package validation

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
)

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
			quoteAll(knownClassParamKeys()))
		if s := closest(key, knownClassParamKeys()); s != "" {
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
	tokens, err := templateTokens(value)
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
	resolved := snapshot.ResolveTemplate(value, sampleTemplateVars)
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

func quoteAll(s []string) string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = fmt.Sprintf("%q", v)
	}
	return strings.Join(q, ", ")
}
