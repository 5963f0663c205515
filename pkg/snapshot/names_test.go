package snapshot

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func TestCSINameMatchesTheCommunitySidecar(t *testing.T) {
	uid := types.UID("4b8d4c1e-9a3f-4e0c-8f4e-2d1c0b9a8f7e")
	cases := map[string]struct {
		prefix string
		length int
		want   string
	}{
		"the default keeps the whole UID":          {"snapshot", -1, "snapshot-4b8d4c1e-9a3f-4e0c-8f4e-2d1c0b9a8f7e"},
		"a length cuts the UID without dashes":     {"snap", 8, "snap-4b8d4c1e"},
		"a length beyond the UID keeps all of it":  {"snap", 64, "snap-4b8d4c1e9a3f4e0c8f4e2d1c0b9a8f7e"},
		"zero leaves only the prefix, as upstream": {"snap", 0, "snap-"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := CSIName(tc.prefix, uid, tc.length); got != tc.want {
				t.Fatalf("CSIName = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestContentNames(t *testing.T) {
	if got := ContentNameFor("u-1"); got != "snapcontent-u-1" {
		t.Errorf("ContentNameFor = %q", got)
	}
	if got := GroupContentNameFor("g-1"); got != "groupsnapcontent-g-1" {
		t.Errorf("GroupContentNameFor = %q", got)
	}
	if got := GroupMemberSuffix("g", "h"); len(got) != 64 {
		t.Errorf("GroupMemberSuffix = %q, want 64 hex characters", got)
	}
}

func TestParametersAndTemplates(t *testing.T) {
	params := map[string]string{ParamSecretName: "s", ParamListSecretNamespace: "ns", "tier": "gold"}
	if got, err := DriverParameters(params); err != nil || len(got) != 1 || got["tier"] != "gold" {
		t.Errorf("DriverParameters = %v, %v; want only tier", got, err)
	}
	params[ReservedPrefix+"snapshoter-secret-name"] = "typo"
	if _, err := DriverParameters(params); err == nil || !strings.Contains(err.Error(), "snapshoter-secret-name") {
		t.Errorf("DriverParameters with an unknown reserved key: err = %v, want it named", err)
	}
	if !IsKnownReservedParam(ParamListSecretNamespace) || IsKnownReservedParam(ReservedPrefix+"x") {
		t.Error("IsKnownReservedParam is wrong")
	}
	v := TemplateVars{ContentName: "c", SnapshotNamespace: "ns", SnapshotName: "s"}
	if got := ResolveTemplate("${volumesnapshot.namespace}-${volumesnapshotcontent.name}-${volumesnapshot.name}", v); got != "ns-c-s" {
		t.Errorf("ResolveTemplate = %q", got)
	}
}
