package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// krewTestOptions has a fake snapctl per platform and a license.
func krewTestOptions(t *testing.T) krewOptions {
	t.Helper()
	dir := t.TempDir()
	o := krewOptions{binDir: dir, out: filepath.Join(dir, "out"), manifest: filepath.Join(dir, "out", "krew", "snapkeeper.yaml"),
		license: filepath.Join(dir, "LICENSE"), version: "v1.2.3", uriBase: "https://example.com/download/v1.2.3",
		homepage: "https://example.com", mtime: time.Unix(1700000000, 0).UTC(),
		platforms: []string{"linux-amd64", "linux-arm64", "darwin-amd64", "darwin-arm64"}}
	writeTestFile(t, o.license, "Apache License\n", 0o644)
	for _, p := range o.platforms {
		writeTestFile(t, filepath.Join(dir, "snapctl-"+p), "snapctl for "+p, 0o755)
	}
	return o
}

func writeTestFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

// The manifest, as krew reads it from the file, names every archive by its
// real sha256; each archive holds exactly the binary and the license.
func TestKrewManifestMatchesArchives(t *testing.T) {
	o := krewTestOptions(t)
	if _, err := writeKrew(o); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(o.manifest)
	if err != nil {
		t.Fatal(err)
	}
	var m krewPlugin
	if err := yaml.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if m.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || m.Kind != "Plugin" || m.Metadata.Name != "snapkeeper" ||
		m.Spec.Version != "v1.2.3" || m.Spec.Homepage != "https://example.com" || m.Spec.ShortDescription == "" ||
		!strings.Contains(m.Spec.Description, "kubectl snapkeeper doctor") {
		t.Errorf("manifest:\n%s", raw)
	}
	if len(m.Spec.Platforms) != len(o.platforms) {
		t.Fatalf("%d platforms, want %d", len(m.Spec.Platforms), len(o.platforms))
	}
	for i, p := range m.Spec.Platforms {
		plat := o.platforms[i]
		goos, arch, _ := strings.Cut(plat, "-")
		if l := p.Selector.MatchLabels; len(l) != 2 || l["os"] != goos || l["arch"] != arch {
			t.Errorf("%s: selector %v", plat, l)
		}
		name := "kubectl-snapkeeper-" + plat + ".tar.gz"
		if p.URI != o.uriBase+"/"+name || p.Bin != "kubectl-snapkeeper" ||
			!slices.Equal(p.Files, []krewFile{{"kubectl-snapkeeper", "."}, {"LICENSE", "."}}) {
			t.Errorf("%s: %+v", plat, p)
		}
		tgz, err := os.ReadFile(filepath.Join(o.out, name))
		if err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(tgz); p.SHA256 != hex.EncodeToString(sum[:]) {
			t.Errorf("%s: manifest sha256 %s, archive %x", plat, p.SHA256, sum)
		}
		files := readArchive(t, tgz, o.mtime)
		if len(files) != 2 || string(files["kubectl-snapkeeper"]) != "snapctl for "+plat || string(files["LICENSE"]) != "Apache License\n" {
			t.Errorf("%s: archive holds %v", plat, files)
		}
	}
}

// readArchive returns the archive's files and checks that every entry is a
// regular file with the fixed time, owner 0 and the mode krew keeps.
func readArchive(t *testing.T, tgz []byte, mtime time.Time) map[string][]byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		t.Fatal(err)
	}
	if !zr.ModTime.IsZero() || zr.Name != "" {
		t.Errorf("gzip header: time %v, name %q", zr.ModTime, zr.Name)
	}
	modes := map[string]int64{"kubectl-snapkeeper": 0o755, "LICENSE": 0o644}
	files := map[string][]byte{}
	eachTarEntry(t, zr, func(h *tar.Header, content io.Reader) {
		if h.Typeflag != tar.TypeReg || !h.ModTime.Equal(mtime) || h.Uid != 0 || h.Uname != "" || h.Mode != modes[h.Name] {
			t.Errorf("%s: type %c, mtime %v, uid %d %q, mode %o", h.Name, h.Typeflag, h.ModTime, h.Uid, h.Uname, h.Mode)
		}
		var err error
		if files[h.Name], err = io.ReadAll(content); err != nil {
			t.Fatal(err)
		}
	})
	return files
}

// Two runs give the same bytes; the commit time reaches them.
func TestKrewIsReproducible(t *testing.T) {
	o := krewTestOptions(t)
	read := func(o krewOptions) []byte {
		if _, err := writeKrew(o); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(o.manifest)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	first := read(o)
	o2 := o
	o2.out, o2.manifest = filepath.Join(t.TempDir(), "out"), filepath.Join(t.TempDir(), "snapkeeper.yaml")
	if second := read(o2); !bytes.Equal(first, second) {
		t.Fatalf("two runs, two manifests:\n%s\n%s", first, second)
	}
	o2.mtime = o2.mtime.Add(time.Second)
	if third := read(o2); bytes.Equal(first, third) {
		t.Fatal("the commit time does not reach the archives")
	}
	o2.platforms = []string{"windows-amd64"}
	if _, err := writeKrew(o2); err == nil {
		t.Error("a platform without a binary was packed")
	}
}
