package snapshot

import (
	"fmt"
	"sort"
	"strings"
)

// ReservedPrefix is the StorageClass-style prefix of class parameters that
// the controller consumes and never passes to the driver.
const ReservedPrefix = "csi.storage.k8s.io/"

// Known reserved class parameter keys.
const (
	ParamSecretName              = ReservedPrefix + "snapshotter-secret-name"
	ParamSecretNamespace         = ReservedPrefix + "snapshotter-secret-namespace"
	ParamListSecretName          = ReservedPrefix + "snapshotter-list-secret-name"
	ParamListSecretNamespace     = ReservedPrefix + "snapshotter-list-secret-namespace"
	ParamGroupSecretName         = ReservedPrefix + "group-snapshotter-secret-name"
	ParamGroupSecretNamespace    = ReservedPrefix + "group-snapshotter-secret-namespace"
	ParamGroupGetSecretName      = ReservedPrefix + "group-snapshotter-get-secret-name"
	ParamGroupGetSecretNamespace = ReservedPrefix + "group-snapshotter-get-secret-namespace"
)

// Extra metadata keys passed to the driver with --extra-create-metadata.
const (
	MetaSnapshotName             = ReservedPrefix + "volumesnapshot/name"
	MetaSnapshotNamespace        = ReservedPrefix + "volumesnapshot/namespace"
	MetaContentName              = ReservedPrefix + "volumesnapshotcontent/name"
	MetaGroupSnapshotName        = ReservedPrefix + "volumegroupsnapshot/name"
	MetaGroupSnapshotNamespace   = ReservedPrefix + "volumegroupsnapshot/namespace"
	MetaGroupSnapshotContentName = ReservedPrefix + "volumegroupsnapshotcontent/name"
)

// SecretParamPair is a name/namespace pair of reserved parameters together
// with the template tokens each may use.
type SecretParamPair struct {
	NameKey, NamespaceKey string
	// NameTokens and NamespaceTokens are the ${...} tokens allowed in each.
	NameTokens, NamespaceTokens []string
}

// Template tokens.
const (
	TokenContentName       = "${volumesnapshotcontent.name}"
	TokenSnapshotNamespace = "${volumesnapshot.namespace}"
	TokenSnapshotName      = "${volumesnapshot.name}"

	TokenGroupContentName       = "${volumegroupsnapshotcontent.name}"
	TokenGroupSnapshotNamespace = "${volumegroupsnapshot.namespace}"
	TokenGroupSnapshotName      = "${volumegroupsnapshot.name}"
)

// SecretParamPairs lists every known secret pair of a class.
var SecretParamPairs = []SecretParamPair{
	{ParamSecretName, ParamSecretNamespace,
		[]string{TokenContentName, TokenSnapshotNamespace, TokenSnapshotName},
		[]string{TokenContentName, TokenSnapshotNamespace}},
	{ParamListSecretName, ParamListSecretNamespace,
		[]string{TokenContentName, TokenSnapshotNamespace, TokenSnapshotName},
		[]string{TokenContentName, TokenSnapshotNamespace}},
	{ParamGroupSecretName, ParamGroupSecretNamespace,
		[]string{TokenGroupContentName, TokenGroupSnapshotNamespace, TokenGroupSnapshotName},
		[]string{TokenGroupContentName, TokenGroupSnapshotNamespace}},
	{ParamGroupGetSecretName, ParamGroupGetSecretNamespace,
		[]string{TokenGroupContentName, TokenGroupSnapshotNamespace, TokenGroupSnapshotName},
		[]string{TokenGroupContentName, TokenGroupSnapshotNamespace}},
}

// IsKnownReservedParam reports whether key is a reserved key we understand.
func IsKnownReservedParam(key string) bool {
	for _, p := range SecretParamPairs {
		if key == p.NameKey || key == p.NamespaceKey {
			return true
		}
	}
	return false
}

// IsReservedParam reports whether key carries the reserved prefix.
func IsReservedParam(key string) bool { return strings.HasPrefix(key, ReservedPrefix) }

// DriverParameters returns the class parameters minus the reserved keys: what
// the driver receives in CreateSnapshot. A key under the reserved prefix that
// is not a known one is refused, as the community sidecar refuses it: a typo
// in a secret parameter must not silently drop the secret.
func DriverParameters(params map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(params))
	var unknown []string
	for k, v := range params {
		switch {
		case !IsReservedParam(k):
			out[k] = v
		case !IsKnownReservedParam(k):
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("unknown parameter %q with the reserved prefix %s in the VolumeSnapshotClass; remove it or fix its spelling", unknown[0], ReservedPrefix)
	}
	return out, nil
}

// TemplateVars holds the values the secret templates may refer to.
type TemplateVars struct {
	ContentName, SnapshotNamespace, SnapshotName string
}

// ResolveTemplate replaces the known tokens in tmpl by their values.
func ResolveTemplate(tmpl string, v TemplateVars) string {
	return strings.NewReplacer(
		TokenContentName, v.ContentName,
		TokenSnapshotNamespace, v.SnapshotNamespace,
		TokenSnapshotName, v.SnapshotName,
		TokenGroupContentName, v.ContentName,
		TokenGroupSnapshotNamespace, v.SnapshotNamespace,
		TokenGroupSnapshotName, v.SnapshotName,
	).Replace(tmpl)
}
