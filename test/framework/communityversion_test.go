package framework

import (
	"regexp"
	"strings"
	"testing"
)

var versionRE = regexp.MustCompile(`^v8\.\d+\.\d+$`)

func TestCommunityVersion(t *testing.T) {
	t.Setenv(CommunityEnv, "")
	cur := CommunityVersion()
	if !versionRE.MatchString(cur) {
		t.Fatalf("CommunityVersion() = %q, want v8.x.y", cur)
	}
	if f, err := communityBinary("csi-snapshotter"); err != nil || f != "csi-snapshotter" {
		t.Errorf("communityBinary(csi-snapshotter) = %q, %v; want csi-snapshotter", f, err)
	}

	t.Setenv(CommunityEnv, "previous")
	prev := CommunityVersion()
	if !versionRE.MatchString(prev) || prev == cur {
		t.Fatalf("with %s=previous CommunityVersion() = %q, want v8.x.y other than %s", CommunityEnv, prev, cur)
	}
	if f, err := communityBinary("snapshot-controller"); err != nil || f != "snapshot-controller-"+prev {
		t.Errorf("communityBinary(snapshot-controller) = %q, %v; want snapshot-controller-%s", f, err, prev)
	}
	if f, err := communityBinary("kubectl"); err != nil || f != "kubectl" {
		t.Errorf("communityBinary(kubectl) = %q, %v; want kubectl", f, err)
	}

	t.Setenv(CommunityEnv, "v8.5.0")
	if _, err := Tool("snapshot-controller"); err == nil || !strings.Contains(err.Error(), CommunityEnv) {
		t.Errorf("Tool with %s=v8.5.0: %v, want an error naming %s", CommunityEnv, err, CommunityEnv)
	}
}
