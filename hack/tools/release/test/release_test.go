package releasetest

import (
	"archive/tar"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// TestImageThroughRegistry pushes the image index to a registry, pulls it
// back and checks each platform's config and its binaries' build info (the
// release's Go), then runs the binaries of the host's platform with
// --version.
func TestImageThroughRegistry(t *testing.T) {
	r := expected(t)
	local, dir := imageIndex(t, r)
	localDigest, err := local.Digest()
	if err != nil {
		t.Fatal(err)
	}
	digests, err := os.ReadFile(dir + ".digests")
	if err != nil {
		t.Fatal(err)
	}
	if first, _, _ := strings.Cut(string(digests), " "); first != localDigest.String() {
		t.Fatalf("%s.digests says %s, the layout holds %s", dir, first, localDigest)
	}

	ref, err := name.ParseReference(startRegistry(t) + "/snapkeeper/snapkeeper:" + r.imageTag)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := remote.WriteIndex(ref, local); err != nil {
		t.Fatal(err)
	}
	pulled, err := remote.Index(ref)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pushed and pulled %s@%s in %s", ref, localDigest, time.Since(start).Round(time.Millisecond))
	if d, _ := pulled.Digest(); d != localDigest {
		t.Fatalf("pulled digest %s, pushed %s", d, localDigest)
	}
	im, err := pulled.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var archs []string
	for _, m := range im.Manifests {
		if m.Platform == nil || m.Platform.OS != "linux" {
			t.Fatalf("manifest %s: platform %+v", m.Digest, m.Platform)
		}
		archs = append(archs, m.Platform.Architecture)
		img, err := pulled.Image(m.Digest)
		if err != nil {
			t.Fatal(err)
		}
		checkConfig(t, r, img, m.Platform.Architecture)
		files := imageFiles(t, img)
		for _, bin := range imageBinaries {
			checkBuildInfo(t, r, "linux/"+m.Platform.Architecture+" image: "+bin, files["usr/local/bin/"+bin], "linux", m.Platform.Architecture)
		}
		if m.Platform.Architecture == runtime.GOARCH {
			checkBinaries(t, r, files)
		}
	}
	if !slices.Equal(archs, []string{"amd64", "arm64"}) {
		t.Errorf("architectures %v, want amd64 and arm64", archs)
	}
}

func checkConfig(t *testing.T, r release, img v1.Image, arch string) {
	t.Helper()
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.Config
	if !slices.Equal(c.Entrypoint, []string{"/usr/local/bin/snapkeeper-controller"}) {
		t.Errorf("%s: entrypoint %v", arch, c.Entrypoint)
	}
	if c.User != "0:0" {
		t.Errorf("%s: user %q, want 0:0 (docs/releases.md, Image user)", arch, c.User)
	}
	if cfg.Architecture != arch || cfg.OS != "linux" {
		t.Errorf("config platform %s/%s, index says linux/%s", cfg.OS, cfg.Architecture, arch)
	}
	if !cfg.Created.Time.Equal(r.created) {
		t.Errorf("%s: created %v, want the commit time %v", arch, cfg.Created.Time, r.created)
	}
	want := map[string]string{
		"org.opencontainers.image.version":  r.version,
		"org.opencontainers.image.revision": r.revision,
		"org.opencontainers.image.source":   "https://github.com/snapkeeper/snapkeeper",
		"org.opencontainers.image.created":  r.created.Format(time.RFC3339),
	}
	for k, v := range want {
		if c.Labels[k] != v {
			t.Errorf("%s: label %s=%q, want %q", arch, k, c.Labels[k], v)
		}
	}
}

// imageBinaries are the binaries we ship: in the image's /usr/local/bin,
// and in bin/release for each platform (snapctl alone for darwin).
var imageBinaries = []string{"snapkeeper-controller", "snapkeeper-webhook", "snapctl"}

// imageFiles extracts the files of the image checkBinaries looks at.
func imageFiles(t *testing.T, img v1.Image) map[string][]byte {
	t.Helper()
	paths := []string{"etc/passwd", "etc/ssl/certs/ca-certificates.crt"}
	for _, bin := range imageBinaries {
		paths = append(paths, "usr/local/bin/"+bin)
	}
	return extract(t, img, paths...)
}

// checkBinaries checks the users and the CA bundle among the image's files,
// and runs the three binaries with --version (snapctl is the chart's helm
// test: TestChartTestPodRunsTheReleasedImage).
func checkBinaries(t *testing.T, r release, files map[string][]byte) {
	t.Helper()
	if !strings.Contains(string(files["etc/passwd"]), "nonroot:x:65532:65532:") ||
		!strings.HasPrefix(string(files["etc/passwd"]), "root:x:0:0:") {
		t.Errorf("etc/passwd:\n%s", files["etc/passwd"])
	}
	if !strings.Contains(string(files["etc/ssl/certs/ca-certificates.crt"]), "BEGIN CERTIFICATE") {
		t.Error("no CA certificates")
	}
	dir := t.TempDir()
	for bin, prefix := range map[string]string{
		"snapkeeper-controller": "",
		"snapkeeper-webhook":    "snapkeeper-webhook ",
		"snapctl":               "snapctl ",
	} {
		p := filepath.Join(dir, bin)
		if err := os.WriteFile(p, files["usr/local/bin/"+bin], 0o755); err != nil {
			t.Fatal(err)
		}
		checkVersionLine(t, r, bin, prefix, run(t, dir, nil, p, "--version"))
	}
}

// extract reads the named files from the image's layers, the last layer
// holding a path winning, and fails on a missing one.
func extract(t *testing.T, img v1.Image, paths ...string) map[string][]byte {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		readTar(t, rc, out, func(h *tar.Header) bool { return slices.Contains(paths, h.Name) })
		rc.Close()
	}
	for _, p := range paths {
		if out[p] == nil {
			t.Fatalf("%s not in the image", p)
		}
	}
	return out
}

// TestChartThroughRegistry packages the chart (`make chart`), pushes it as
// an OCI artifact with helm, pulls it back and compares the bytes and the
// versions.
func TestChartThroughRegistry(t *testing.T) {
	r := expected(t)
	tgz := packagedChart(t, r)
	helm := filepath.Join(r.root, "bin", "helm")
	home := t.TempDir()
	env := helmEnv(home)
	host := startRegistry(t)
	run(t, home, env, helm, "push", tgz, "oci://"+host+"/charts", "--plain-http")
	run(t, home, env, helm, "pull", "oci://"+host+"/charts/snapkeeper", "--version", r.chartVersion, "--plain-http", "-d", home)
	if a, b := fileSum(t, tgz), fileSum(t, filepath.Join(home, filepath.Base(tgz))); a != b {
		t.Fatalf("pulled chart %s, pushed %s", b, a)
	}
	meta := run(t, home, env, helm, "show", "chart", filepath.Join(home, filepath.Base(tgz)))
	for _, want := range []string{"version: " + r.chartVersion, "appVersion: " + r.imageTag} {
		if !strings.Contains(meta, want) {
			t.Errorf("Chart.yaml lacks %q:\n%s", want, meta)
		}
	}
}

func fileSum(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", sha256.Sum256(b))
}
