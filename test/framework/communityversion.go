package framework

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// CommunityModule is the community's module; the version every suite runs
// next to ours is the one hack/tools/peers/go.mod requires (the one place
// that names it: the Makefile reads it too).
const CommunityModule = "github.com/kubernetes-csi/external-snapshotter/v8"

// CommunityEnv names an environment variable that selects the community
// release the suites run next to ours. Unset, it is the one
// hack/tools/peers/go.mod requires, built as bin/snapshot-controller and
// bin/csi-snapshotter. "previous" is the release before it, the one
// hack/tools/peers-previous/go.mod requires, built as
// bin/<name>-<version> (`make test-migration-previous` sets it). Any other
// value is an error.
const CommunityEnv = "SNAPKEEPER_COMMUNITY"

// communityVersions reads the version of each selectable tools module once.
var communityVersions = map[string]func() (string, error){
	"":         modVersion("peers"),
	"previous": modVersion("peers-previous"),
}

func modVersion(dir string) func() (string, error) {
	return sync.OnceValues(func() (string, error) {
		path := filepath.Join(RepoRoot(), "hack", "tools", dir, "go.mod")
		b, err := os.ReadFile(path)
		if err != nil {
			return "", err
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "require "))
			if len(f) >= 2 && f[0] == CommunityModule {
				return f[1], nil
			}
		}
		return "", fmt.Errorf("%s does not require %s", path, CommunityModule)
	})
}

// communityVersion is the version $SNAPKEEPER_COMMUNITY selects, and
// whether it is the default one.
func communityVersion() (v string, isDefault bool, err error) {
	sel := os.Getenv(CommunityEnv)
	read, ok := communityVersions[sel]
	if !ok {
		return "", false, fmt.Errorf("%s=%q: want \"previous\" or unset", CommunityEnv, sel)
	}
	v, err = read()
	return v, sel == "", err
}

// CommunityVersion is the community release the peers are built from
// (v8.7.0, say), as hack/tools/peers/go.mod requires it, or the previous
// one (hack/tools/peers-previous) with SNAPKEEPER_COMMUNITY=previous.
func CommunityVersion() string {
	v, _, err := communityVersion()
	if err != nil {
		panic("framework: " + err.Error())
	}
	return v
}

// communityBinary is the file in bin/ of the community binary name
// (snapshot-controller or csi-snapshotter) of the selected release: name
// itself, or name-<version> for the previous release. Other names are
// returned unchanged.
func communityBinary(name string) (string, error) {
	if !isCommunityBinary(name) {
		return name, nil
	}
	v, isDefault, err := communityVersion()
	if err != nil || isDefault {
		return name, err
	}
	return name + "-" + v, nil
}

// isCommunityBinary reports whether name is one of the community's two
// binaries.
func isCommunityBinary(name string) bool {
	return name == "snapshot-controller" || name == "csi-snapshotter"
}
