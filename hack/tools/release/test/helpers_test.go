// Package releasetest checks what `make image`, `make chart` and `make
// krew` produce by shipping it: the image index and the chart are pushed to
// an in-process registry on loopback and pulled back, and the image's
// binaries are run; the chart's helm test Pod must run this image; the krew
// manifest must name the plugin archives by their sums.
package releasetest

import (
	"archive/tar"
	"bytes"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// readTar reads the content of the entries of the tar stream r that want
// accepts into files; want sees the header of every entry.
func readTar(t *testing.T, r io.Reader, files map[string][]byte, want func(h *tar.Header) bool) {
	t.Helper()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if want(h) {
			if files[h.Name], err = io.ReadAll(tr); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// repoRoot is the product repository: SNAPKEEPER_ROOT (set by
// `make test-release`), else four directories up.
func repoRoot(t *testing.T) string {
	if r := os.Getenv("SNAPKEEPER_ROOT"); r != "" {
		return r
	}
	r, err := filepath.Abs("../../../..")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// run runs a command in dir and returns its trimmed stdout.
func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out.String(), errb.String())
	}
	return strings.TrimSpace(out.String())
}

// release is what the test expects of this commit; goToolchain is the Go
// release.mk builds it with (RELEASE_GO_TOOLCHAIN).
type release struct {
	root, version, revision, imageTag, chartVersion, goToolchain string
	created                                                      time.Time
}

func expected(t *testing.T) release {
	root := repoRoot(t)
	r := release{root: root}
	r.version = run(t, root, nil, "make", "-s", "--no-print-directory", "version")
	r.revision = run(t, root, nil, "git", "rev-parse", "HEAD")
	epoch, err := strconv.ParseInt(run(t, root, nil, "git", "log", "-1", "--format=%ct"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	r.created = time.Unix(epoch, 0).UTC()
	r.imageTag = strings.ReplaceAll(r.version, "+", "_")
	r.chartVersion = strings.TrimPrefix(r.version, "v")
	r.goToolchain = releaseGo(t, root)
	return r
}

// imageIndex opens the layout `make image` wrote, first running it when the
// layout is missing or of another commit or version (builds of a commit
// are cached by the layout itself).
func imageIndex(t *testing.T, r release) (v1.ImageIndex, string) {
	dir := filepath.Join(r.root, "bin", "release", "oci", "snapkeeper")
	if idx, err := openIndex(dir); err == nil {
		if im, err := idx.IndexManifest(); err == nil &&
			im.Annotations["org.opencontainers.image.version"] == r.version &&
			im.Annotations["org.opencontainers.image.revision"] == r.revision {
			t.Logf("reusing %s (%s)", dir, r.version)
			return idx, dir
		}
	}
	start := time.Now()
	run(t, r.root, nil, "make", "--no-print-directory", "image")
	t.Logf("make image: %s", time.Since(start).Round(time.Second))
	idx, err := openIndex(dir)
	if err != nil {
		t.Fatal(err)
	}
	return idx, dir
}

// openIndex is the one image index index.json of the layout points at.
func openIndex(dir string) (v1.ImageIndex, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, err
	}
	top, err := p.ImageIndex()
	if err != nil {
		return nil, err
	}
	tm, err := top.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(tm.Manifests) != 1 {
		return nil, os.ErrNotExist
	}
	return top.ImageIndex(tm.Manifests[0].Digest)
}

// startRegistry serves an in-memory registry on loopback; it returns the
// host:port.
func startRegistry(t *testing.T) string {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// chartMade is set once `make chart` has run in this test run; the tests
// of this package do not run in parallel.
var chartMade bool

// packagedChart is the chart `make chart` packages, made once per run.
func packagedChart(t *testing.T, r release) string {
	t.Helper()
	if !chartMade {
		run(t, r.root, nil, "make", "--no-print-directory", "chart")
		chartMade = true
	}
	return filepath.Join(r.root, "bin", "release", "snapkeeper-"+r.chartVersion+".tgz")
}

// helmEnv gives helm its own configuration, cache and data under home.
func helmEnv(home string) []string {
	return []string{"HELM_CONFIG_HOME=" + home + "/config", "HELM_CACHE_HOME=" + home + "/cache", "HELM_DATA_HOME=" + home + "/data"}
}

// envOr is the environment variable key (set by `make test-release` from
// release.mk), else def.
func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
