package releasetest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// krewManifest is what the test reads of the krew plugin manifest.
type krewManifest struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Spec struct {
		Version   string `yaml:"version"`
		Platforms []struct {
			Selector struct {
				MatchLabels map[string]string `yaml:"matchLabels"`
			} `yaml:"selector"`
			URI    string `yaml:"uri"`
			SHA256 string `yaml:"sha256"`
			Bin    string `yaml:"bin"`
		} `yaml:"platforms"`
	} `yaml:"spec"`
}

func readKrewManifest(path string) (*krewManifest, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var m krewManifest
	return &m, yaml.Unmarshal(b, &m)
}

// TestKrewManifestMatchesArchives checks the kubectl plugin (`make krew`,
// part of `make release`): a manifest of this version names one archive per
// snapctl platform under KREW_URI_BASE by its sha256, which is the
// archive's and SHA256SUMS's; each archive holds the platform's snapctl
// as kubectl-snapkeeper and LICENSE, both with the commit time; the host's
// binary names itself `kubectl snapkeeper`. It runs `make krew` when the
// manifest is missing or of another version.
func TestKrewManifestMatchesArchives(t *testing.T) {
	r := expected(t)
	rel := filepath.Join(r.root, "bin", "release")
	path := filepath.Join(rel, "krew", "snapkeeper.yaml")
	m, err := readKrewManifest(path)
	fresh := err != nil || m.Spec.Version != r.version
	if fresh {
		run(t, r.root, nil, "make", "--no-print-directory", "krew")
		if m, err = readKrewManifest(path); err != nil {
			t.Fatal(err)
		}
	}
	if m.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || m.Kind != "Plugin" ||
		m.Metadata.Name != "snapkeeper" || m.Spec.Version != r.version {
		t.Errorf("manifest %s: %+v", path, m)
	}
	base := envOr("SNAPKEEPER_KREW_URI_BASE", "https://github.com/snapkeeper/snapkeeper/releases/download/"+r.version)
	sums := map[string]string{}
	if b, err := os.ReadFile(filepath.Join(rel, "SHA256SUMS")); err == nil && !fresh {
		for _, line := range strings.Split(string(b), "\n") {
			if sum, file, ok := strings.Cut(line, "  "); ok {
				sums[file] = sum
			}
		}
	} else {
		t.Logf("SHA256SUMS not checked: the archives are newer than `make release`'s sums or there are none")
	}
	license, err := os.ReadFile(filepath.Join(r.root, "LICENSE"))
	if err != nil {
		t.Fatal(err)
	}
	var plats []string
	for _, p := range m.Spec.Platforms {
		plat := p.Selector.MatchLabels["os"] + "-" + p.Selector.MatchLabels["arch"]
		plats = append(plats, plat)
		name := "kubectl-snapkeeper-" + plat + ".tar.gz"
		if p.URI != base+"/"+name || p.Bin != "kubectl-snapkeeper" {
			t.Errorf("%s: uri %s, bin %s", plat, p.URI, p.Bin)
		}
		archive := filepath.Join(rel, name)
		if sum := fileSum(t, archive); sum != p.SHA256 {
			t.Errorf("%s: the manifest says sha256 %s, the archive is %s", name, p.SHA256, sum)
		}
		if s, listed := sums[name]; len(sums) > 0 && (!listed || s != p.SHA256) {
			t.Errorf("%s: SHA256SUMS says %q, the manifest %s", name, s, p.SHA256)
		}
		files := archiveFiles(t, archive, r)
		snapctl, err := os.ReadFile(filepath.Join(rel, "snapctl-"+plat))
		if err != nil {
			t.Fatal(err)
		}
		if len(files) != 2 || !bytes.Equal(files["kubectl-snapkeeper"], snapctl) || !bytes.Equal(files["LICENSE"], license) {
			t.Errorf("%s: holds %d files; want snapctl-%s as kubectl-snapkeeper and LICENSE", name, len(files), plat)
		}
		if plat == runtime.GOOS+"-"+runtime.GOARCH {
			runPlugin(t, r, files["kubectl-snapkeeper"])
		}
	}
	if strings.Join(plats, " ") != "linux-amd64 linux-arm64 darwin-amd64 darwin-arm64" {
		t.Errorf("platforms %v", plats)
	}
	if s := sums["krew/snapkeeper.yaml"]; len(sums) > 0 && s != fileSum(t, path) {
		t.Errorf("SHA256SUMS says %q for krew/snapkeeper.yaml, the file is %s", s, fileSum(t, path))
	}
}

// archiveFiles reads a plugin archive; every entry must be a regular file
// with the commit time.
func archiveFiles(t *testing.T, path string, r release) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	readTar(t, zr, files, func(h *tar.Header) bool {
		if h.Typeflag != tar.TypeReg || !h.ModTime.Equal(r.created) {
			t.Errorf("%s: %s: type %c, time %v, want a file with the commit time %v", path, h.Name, h.Typeflag, h.ModTime, r.created)
		}
		return true
	})
	return files
}

// runPlugin runs the archive's binary under its plugin name, as kubectl
// does: its help and version name `kubectl snapkeeper`.
func runPlugin(t *testing.T, r release, bin []byte) {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "kubectl-snapkeeper")
	if err := os.WriteFile(p, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := run(t, dir, nil, p, "--help"); !strings.HasPrefix(got, "usage: kubectl snapkeeper validate") {
		t.Errorf("kubectl-snapkeeper --help:\n%s", got)
	}
	checkVersionLine(t, r, "kubectl-snapkeeper", "kubectl snapkeeper ", run(t, dir, nil, p, "--version"))
}
