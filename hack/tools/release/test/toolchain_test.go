package releasetest

import (
	"bytes"
	"debug/buildinfo"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// releaseGo is the Go release release.mk builds the release with
// (RELEASE_GO_TOOLCHAIN): SNAPKEEPER_GO_TOOLCHAIN, set by `make
// test-release`, else `make release-go-toolchain`.
func releaseGo(t *testing.T, root string) string {
	t.Helper()
	if v := os.Getenv("SNAPKEEPER_GO_TOOLCHAIN"); v != "" {
		return v
	}
	return run(t, root, nil, "make", "-s", "--no-print-directory", "release-go-toolchain")
}

// checkBuildInfo fails unless the binary's build info (what `go version -m`
// prints) names the release's Go and the platform of its file name, and
// shows a static, path-free build.
func checkBuildInfo(t *testing.T, r release, name string, bin []byte, goos, goarch string) {
	t.Helper()
	bi, err := buildinfo.Read(bytes.NewReader(bin))
	if err != nil {
		t.Errorf("%s: no Go build info: %v", name, err)
		return
	}
	if bi.GoVersion != r.goToolchain {
		t.Errorf("%s: built with %s, want %s (RELEASE_GO_TOOLCHAIN, release.mk)", name, bi.GoVersion, r.goToolchain)
	}
	if bi.Main.Path != "github.com/snapkeeper/snapkeeper" {
		t.Errorf("%s: main module %q", name, bi.Main.Path)
	}
	want := map[string]string{"GOOS": goos, "GOARCH": goarch, "CGO_ENABLED": "0", "-trimpath": "true"}
	for _, s := range bi.Settings {
		if v, ok := want[s.Key]; ok {
			if s.Value != v {
				t.Errorf("%s: build setting %s=%s, want %s", name, s.Key, s.Value, v)
			}
			delete(want, s.Key)
		}
	}
	for k, v := range want {
		t.Errorf("%s: build setting %s missing, want %s", name, k, v)
	}
}

// checkVersionLine checks what a binary prints for --version: prefix (the
// program's name and a space, or nothing for the controller), the version,
// then the commit and the Go release (pkg/version.String).
func checkVersionLine(t *testing.T, r release, name, prefix, got string) {
	t.Helper()
	if want := prefix + r.version + " (revision " + r.revision + ", " + r.goToolchain + ")"; got != want {
		t.Errorf("%s --version: %q, want %q", name, got, want)
	}
}

// TestReleaseBinariesNameTheReleaseGo reads the build info of every release
// binary in bin/release (the image's are checked by
// TestImageThroughRegistry): each must be built with RELEASE_GO_TOOLCHAIN,
// so a release built with another Go fails here. The binaries' SBOMs of
// this commit, when `make sbom` has written them, must name the same Go:
// their std component and their GOVERSION build property.
func TestReleaseBinariesNameTheReleaseGo(t *testing.T) {
	r := expected(t)
	imageIndex(t, r) // builds the Linux binaries unless they are of this commit
	rel := filepath.Join(r.root, "bin", "release")
	type binary struct{ file, goos, goarch string }
	var bins []binary
	for _, plat := range []string{"linux-amd64", "linux-arm64", "darwin-amd64", "darwin-arm64"} {
		goos, goarch, _ := strings.Cut(plat, "-")
		for _, name := range imageBinaries {
			if goos == "darwin" && name != "snapctl" {
				continue
			}
			bins = append(bins, binary{name + "-" + plat, goos, goarch})
		}
	}
	n := 0
	for _, bin := range bins {
		b, err := os.ReadFile(filepath.Join(rel, bin.file))
		if os.IsNotExist(err) && bin.goos == "darwin" {
			t.Logf("%s not built (make release-binaries): not checked", bin.file)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		checkBuildInfo(t, r, bin.file, b, bin.goos, bin.goarch)
		n++
	}
	t.Logf("%d binaries checked for %s", n, r.goToolchain)

	sboms, err := filepath.Glob(filepath.Join(rel, "sbom", "*.cdx.json"))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, p := range sboms {
		if checkSBOMGo(t, r, p) {
			checked++
		}
	}
	t.Logf("%d SBOMs of this commit name %s (%d in bin/release/sbom)", checked, r.goToolchain, len(sboms))
}

// checkSBOMGo checks the Go a binary's SBOM names, if the SBOM is of this
// commit (cyclonedx-gomod gives the main module a pseudo-version ending in
// the commit's first 12 digits); it reports whether it checked.
func checkSBOMGo(t *testing.T, r release, path string) bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var bom struct {
		Metadata struct {
			Component struct {
				Version    string `json:"version"`
				Properties []struct {
					Name  string `json:"name"`
					Value string `json:"value"`
				} `json:"properties"`
			} `json:"component"`
		} `json:"metadata"`
		Components []struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"components"`
	}
	if err := json.Unmarshal(b, &bom); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(r.revision) < 12 || !strings.HasSuffix(bom.Metadata.Component.Version, "-"+r.revision[:12]) {
		t.Logf("%s: of version %s, not this commit: not checked", filepath.Base(path), bom.Metadata.Component.Version)
		return false
	}
	std, goVersion := "", ""
	for _, c := range bom.Components {
		if c.Name == "std" {
			std = c.Version
		}
	}
	for _, p := range bom.Metadata.Component.Properties {
		if p.Name == "cdx:gomod:build:env:GOVERSION" {
			goVersion = p.Value
		}
	}
	if std != r.goToolchain || goVersion != r.goToolchain {
		t.Errorf("%s: std component %q, GOVERSION property %q; want %s (the Go the binaries are built with)",
			filepath.Base(path), std, goVersion, r.goToolchain)
	}
	return true
}
