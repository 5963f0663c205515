package main

import (
	"fmt"
	"strconv"
	"strings"
)

// Feature gates of the community components (--feature-gates), with their
// community defaults (gates below).
const (
	// FeatureGroupSnapshots serves volume group snapshots: GA and on by
	// default since v8.7.0; =false still turns them off.
	FeatureGroupSnapshots = "CSIVolumeGroupSnapshot"
	// FeatureReleaseLeaseOnExit is accepted; our leader election always
	// releases its Lease on a clean exit.
	FeatureReleaseLeaseOnExit = "ReleaseLeaderElectionOnExit"
	// featureAllBeta (and featureAllAlpha) switch every beta (alpha) gate
	// that is not set by name, as in every Kubernetes component.
	featureAllBeta  = "AllBeta"
	featureAllAlpha = "AllAlpha"
)

// gate is one feature gate we act on: its stage and its default, as the
// community release declares them (hack/drift compares the two).
type gate struct {
	Stage   string // "Alpha", "Beta" or "GA"
	Default bool
}

// gates are the feature gates of the community binaries that this one acts
// on or accepts by name.
var gates = map[string]gate{
	FeatureGroupSnapshots:     {Stage: "GA", Default: true},
	FeatureReleaseLeaseOnExit: {Stage: "Alpha", Default: false},
}

// inheritedGates are the gates the community binaries know through the
// Kubernetes libraries they link (k8s.io/apiserver and component-base: the
// v8.6.0 release links v0.36, v8.7.0 v0.37; this is both sets, as
// their --help lists them). They change nothing here; they are accepted so
// that a deployment that sets one does not stop us, where the community
// binary would run.
var inheritedGates = []string{
	"APIResponseCompression", "APIServerIdentity", "APIServerTracing",
	"APIServerWebhookAuthenticationToken", "APIServingWithRoutine",
	"AggregatedDiscoveryRemoveBetaType", "AllowParsingUserUIDFromCertAuth",
	"AllowUnsafeMalformedObjectDeletion", "AnonymousAuthConfigurableEndpoints",
	"AuthorizeWithSelectors", "BtreeWatchCache", "CBORServingAndStorage", "ComponentFlagz",
	"ComponentStatusz", "ConcurrentWatchObjectDecode", "ConsistentListFromCache",
	"ConsistentListFromCacheSkipTimeoutFallback", "ConstrainedImpersonation",
	"CoordinatedLeaderElection", "DeclarativeValidation", "DeclarativeValidationBeta",
	"DeclarativeValidationTakeover", "DetectCacheInconsistency", "EtcdRangeStream",
	"ExcludeAdmissionWebhookVirtualResources", "KMSv1", "ListFromCacheSnapshot",
	"ManifestBasedAdmissionControlConfig", "MutatingAdmissionPolicy", "NativeHistograms",
	"OpenAPIEnums", "RemoteRequestHeaderUID", "ResilientWatchCacheInitialization",
	"RetryGenerateName", "SeparateCacheWatchRPC", "ShardedListAndWatch", "SizeBasedListCostEstimate",
	"StorageVersionAPI", "StorageVersionHash", "StreamingCollectionEncodingToJSON",
	"StreamingCollectionEncodingToProtobuf", "StructuredAuthenticationConfiguration",
	"StructuredAuthenticationConfigurationEgressSelector",
	"StructuredAuthenticationConfigurationJWKSMetrics", "TokenRequestServiceAccountUIDValidation",
	"UnauthenticatedHTTP2DOSMitigation", "UnknownVersionInteroperabilityProxy",
	"WatchCacheInitializationPostStartHook", "WatchList", "WatchListCompression",
	"WebhookRoundTripLoadBalancing",
}

// parseFeatureGates reads "key=bool,key=bool". As in the community
// components an unknown gate or a value that is not a bool is an error, and
// AllBeta=true turns on the beta gates not set by name.
func parseFeatureGates(s string) (map[string]bool, error) {
	known := map[string]bool{featureAllBeta: true, featureAllAlpha: true}
	for g := range gates {
		known[g] = true
	}
	for _, g := range inheritedGates {
		known[g] = true
	}
	set := map[string]bool{}
	for _, kv := range strings.Split(s, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok {
			return nil, fmt.Errorf("--feature-gates: %q is not key=bool", kv)
		}
		if !known[k] {
			return nil, fmt.Errorf("--feature-gates: unrecognized feature gate %q (this binary acts on %s; see --help of the community binaries for the others it accepts)", k, FeatureGroupSnapshots)
		}
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("--feature-gates: invalid value of %s: %q is not a bool", k, v)
		}
		set[k] = b
	}
	// A gate not set by name takes its default, or AllAlpha/AllBeta for
	// its stage; a GA gate takes only its default.
	out := map[string]bool{}
	for name, g := range gates {
		out[name] = g.Default
		if v, ok := set["All"+g.Stage]; ok && g.Stage != "GA" {
			out[name] = v
		}
	}
	for k, v := range set {
		out[k] = v
	}
	return out, nil
}

// GroupSnapshots reports whether the group snapshot feature gate is on.
func (o *Options) GroupSnapshots() bool {
	gates, err := parseFeatureGates(o.FeatureGates)
	return err == nil && gates[FeatureGroupSnapshots]
}
