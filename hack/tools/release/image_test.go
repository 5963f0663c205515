package main

import (
	"archive/tar"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// testOptions builds an index from two small fake binaries per platform.
func testOptions(t *testing.T) imageOptions {
	t.Helper()
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := imageOptions{binDir: dir, caFile: ca, version: "v1.2.3", revision: "abc", source: "src",
		created: time.Unix(1700000000, 0).UTC(), out: filepath.Join(dir, "oci", "snapkeeper"), tag: "v1.2.3", level: gzip.BestCompression}
	for _, arch := range []string{"amd64", "arm64"} {
		o.platforms = append(o.platforms, v1.Platform{OS: "linux", Architecture: arch})
		for _, b := range imageBinaries {
			if err := os.WriteFile(filepath.Join(dir, b+"-linux-"+arch), []byte(b+arch), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	return o
}

func TestIndexIsReproducible(t *testing.T) {
	o := testOptions(t)
	var digests []v1.Hash
	for range 2 {
		idx, err := buildIndex(o)
		if err != nil {
			t.Fatal(err)
		}
		d, err := idx.Digest()
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, d)
	}
	if digests[0] != digests[1] {
		t.Fatalf("two builds, two digests: %v", digests)
	}
	o.created = o.created.Add(time.Second)
	idx, err := buildIndex(o)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := idx.Digest(); d == digests[0] {
		t.Fatal("the commit time does not reach the digest")
	}
}

func TestImageContent(t *testing.T) {
	o := testOptions(t)
	idx, err := buildIndex(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeLayout(o, idx); err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 2 || im.Manifests[1].Platform.Architecture != "arm64" {
		t.Fatalf("manifests: %+v", im.Manifests)
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Config.User != "0:0" || cfg.Architecture != "amd64" || cfg.Config.Labels["org.opencontainers.image.created"] != "2023-11-14T22:13:20Z" {
		t.Fatalf("config: %+v", cfg)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]*tar.Header{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		eachTarEntry(t, rc, func(h *tar.Header, _ io.Reader) {
			if !h.ModTime.Equal(o.created) {
				t.Errorf("%s: mtime %v", h.Name, h.ModTime)
			}
			files[h.Name] = h
		})
		rc.Close()
	}
	for _, f := range []string{"etc/passwd", "etc/group", "etc/ssl/certs/ca-certificates.crt", "usr/local/bin/snapkeeper-controller", "usr/local/bin/snapkeeper-webhook", "usr/local/bin/snapctl", "tmp/"} {
		if files[f] == nil {
			t.Errorf("%s missing", f)
		}
	}
	if h := files["home/nonroot/"]; h == nil || h.Uid != 65532 {
		t.Errorf("home/nonroot: %+v", h)
	}
	if _, err := os.Stat(o.out + ".digests"); err != nil {
		t.Error(err)
	}
}

func TestStaticRefusesDynamicBinaries(t *testing.T) {
	if err := static("script", []byte("#!/bin/sh\necho hi\n")); err != nil {
		t.Errorf("a script: %v", err)
	}
	data, err := os.ReadFile("/bin/sh")
	if err != nil {
		t.Skip("no /bin/sh to read:", err)
	}
	if err := static("/bin/sh", data); err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Errorf("/bin/sh (dynamically linked): got %v, want the refusal naming CGO_ENABLED=0", err)
	}
}
