package main

import "testing"

func TestParseFeatureGates(t *testing.T) {
	for _, tc := range []struct {
		in     string
		groups bool
		err    bool
	}{
		// GA and on by default since v8.7.0: only the gate by name turns it off.
		{in: "", groups: true},
		{in: "CSIVolumeGroupSnapshot=true", groups: true},
		{in: "CSIVolumeGroupSnapshot=false", groups: false},
		{in: " CSIVolumeGroupSnapshot = True ,ReleaseLeaderElectionOnExit=false", groups: true},
		{in: "AllBeta=false", groups: true},
		{in: "AllBeta=true,CSIVolumeGroupSnapshot=false", groups: false},
		{in: "AllAlpha=false", groups: true},
		{in: "WatchListCompression=true,ConsistentListFromCache=false", groups: true},
		{in: "Foo=true", err: true},
		{in: "CSIVolumeGroupSnapshot=maybe", err: true},
		{in: "CSIVolumeGroupSnapshot", err: true},
	} {
		gates, err := parseFeatureGates(tc.in)
		if (err != nil) != tc.err {
			t.Errorf("%q: error %v, want error %v", tc.in, err, tc.err)
			continue
		}
		if err == nil && gates[FeatureGroupSnapshots] != tc.groups {
			t.Errorf("%q: groups %v, want %v", tc.in, gates[FeatureGroupSnapshots], tc.groups)
		}
	}
}
