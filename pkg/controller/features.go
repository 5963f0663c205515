package controller

import (
	"fmt"
	"strconv"
	"strings"
)

// Feature gates of the community components (--feature-gates), with their
// community defaults.
const (
	// FeatureGroupSnapshots turns on volume group snapshots.
	FeatureGroupSnapshots = "CSIVolumeGroupSnapshot"
	// FeatureReleaseLeaseOnExit is accepted; our leader election always
	// releases its Lease on a clean exit.
	FeatureReleaseLeaseOnExit = "ReleaseLeaderElectionOnExit"
)

var featureDefaults = map[string]bool{
	FeatureGroupSnapshots:     false,
	FeatureReleaseLeaseOnExit: false,
}

// parseFeatureGates reads "key=bool,key=bool" over the defaults. As the
// community components do, an unknown gate or a value that is not a bool
// is an error.
func parseFeatureGates(s string) (map[string]bool, error) {
	out := make(map[string]bool, len(featureDefaults))
	for k, v := range featureDefaults {
		out[k] = v
	}
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
		if _, known := featureDefaults[k]; !known {
			return nil, fmt.Errorf("--feature-gates: unrecognized feature gate %q (known: %s, %s)", k, FeatureGroupSnapshots, FeatureReleaseLeaseOnExit)
		}
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("--feature-gates: invalid value of %s: %q is not a bool", k, v)
		}
		out[k] = b
	}
	return out, nil
}

// GroupSnapshots reports whether the group snapshot feature gate is on.
func (o *Options) GroupSnapshots() bool {
	gates, err := parseFeatureGates(o.FeatureGates)
	return err == nil && gates[FeatureGroupSnapshots]
}
