package snapshot

import (
	"fmt"
	"slices"
	"strings"
)

// PairOf returns the secret pair whose name key is nameKey.
func PairOf(nameKey string) (SecretParamPair, bool) {
	for _, p := range SecretParamPairs {
		if p.NameKey == nameKey {
			return p, true
		}
	}
	return SecretParamPair{}, false
}

// ResolveSecretTemplate resolves one side of a class's secret reference.
// Every ${...} token must be one of allowed (SecretParamPair.NameTokens or
// NamespaceTokens); any other token, or a "${" without its "}", is an
// error that names it and what may be used instead.
//
// The threat: the webhook refuses such templates at apply time, but a class
// stored while the webhook was absent or bypassed still reaches the
// controllers. ResolveTemplate alone replaces every token it knows in
// either side, so a namespace template "${volumesnapshot.name}" would let
// whoever names a VolumeSnapshot pick the namespace whose Secret the driver
// receives: another tenant's. Only the VolumeSnapshotContent name (not
// chosen by the user) and the snapshot's own namespace may name a
// namespace (docs/contract.md, "VolumeSnapshotClass parameters").
func ResolveSecretTemplate(tmpl, what string, allowed []string, v TemplateVars) (string, error) {
	rest := tmpl
	for {
		start := strings.Index(rest, "${")
		if start < 0 {
			break
		}
		end := strings.IndexByte(rest[start:], '}')
		if end < 0 {
			return "", fmt.Errorf("the %s template %q has a \"${\" without its \"}\"; close it or use a literal %s", what, tmpl, what)
		}
		token := rest[start : start+end+1]
		if !slices.Contains(allowed, token) {
			return "", fmt.Errorf("the %s template %q uses %s, which is not allowed in a %s; use %s or a literal %s",
				what, tmpl, token, what, strings.Join(allowed, ", "), what)
		}
		rest = rest[start+end+1:]
	}
	return ResolveTemplate(tmpl, v), nil
}

// ResolveSecretPair resolves both templates of pair from params: ("", "",
// nil) when params name no secret. It checks the tokens only; callers
// check that the results are a valid name and namespace.
func ResolveSecretPair(pair SecretParamPair, params map[string]string, v TemplateVars) (name, namespace string, err error) {
	nameT, nsT := params[pair.NameKey], params[pair.NamespaceKey]
	if nameT == "" && nsT == "" {
		return "", "", nil
	}
	if name, err = ResolveSecretTemplate(nameT, "secret name", pair.NameTokens, v); err != nil {
		return "", "", fmt.Errorf("parameter %s: %w", pair.NameKey, err)
	}
	if namespace, err = ResolveSecretTemplate(nsT, "namespace", pair.NamespaceTokens, v); err != nil {
		return "", "", fmt.Errorf("parameter %s: %w", pair.NamespaceKey, err)
	}
	return name, namespace, nil
}
