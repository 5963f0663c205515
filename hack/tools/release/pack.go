package main

import (
	"bytes"
	"compress/gzip"
	"debug/elf"
	"flag"
	"fmt"
	"os"
	"path"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// packOptions describe one single-platform image for the node plane's
// containerd (test/framework/node.go): no registry there, so every image a
// pod runs is imported from a tarball (`ctr images import`).
type packOptions struct {
	ref, out, entrypoint, user string
	files                      []string // SRC:DST
	links                      []string // DST:TARGET
}

// runPack writes a docker-archive tarball holding a new image of the given
// files (test images: the pause binary, the mock CSI driver,
// csi-provisioner) on the release image's base layer (users, CA
// certificates, /tmp). Our own image's tarball is `image -tarball`.
func runPack(args []string) error {
	fs := flag.NewFlagSet("pack", flag.ContinueOnError)
	var o packOptions
	fs.StringVar(&o.ref, "name", "", "Image reference the tarball carries (e.g. snapkeeper.local/pause:1). Required.")
	fs.StringVar(&o.out, "out", "", "Tarball to write. Required.")
	fs.StringVar(&o.entrypoint, "entrypoint", "", "Entrypoint of a new image (default: the first -file's destination).")
	fs.StringVar(&o.user, "user", "0:0", "User of a new image.")
	fs.Func("file", "SRC:DST, a file of the new image (repeatable); DST is an absolute path, mode 0755.", func(s string) error {
		o.files = append(o.files, s)
		return nil
	})
	fs.Func("link", "DST:TARGET, a symbolic link of the new image (repeatable), e.g. /bin/sh:busybox.", func(s string) error {
		o.links = append(o.links, s)
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.ref == "" || o.out == "" || len(o.files) == 0 {
		return fmt.Errorf("pack: -name, -out and -file are required")
	}
	ref, err := name.ParseReference(o.ref)
	if err != nil {
		return fmt.Errorf("pack: -name: %w", err)
	}
	tag, ok := ref.(name.Tag)
	if !ok {
		return fmt.Errorf("pack: -name %s is not a tag", o.ref)
	}
	img, err := packImage(o)
	if err != nil {
		return fmt.Errorf("pack %s: %w", o.ref, err)
	}
	tmp := o.out + ".tmp"
	if err := tarball.WriteToFile(tmp, tag, img); err != nil {
		return fmt.Errorf("pack %s: %w", o.ref, err)
	}
	return os.Rename(tmp, o.out)
}

func packImage(o packOptions) (v1.Image, error) {
	es := []entry{}
	dirs := map[string]bool{}
	// parents adds the directories above dst that no entry added yet.
	parents := func(dst string) {
		for d := path.Dir(dst); d != "/" && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
			es = append(es, entry{path: strings.TrimPrefix(d, "/") + "/", mode: 0o755})
		}
	}
	entrypoint := o.entrypoint
	for _, f := range o.files {
		src, dst, ok := strings.Cut(f, ":")
		if !ok || !path.IsAbs(dst) {
			return nil, fmt.Errorf("-file %q is not SRC:/DST", f)
		}
		data, err := os.ReadFile(src)
		if err != nil {
			return nil, err
		}
		if err := static(src, data); err != nil {
			return nil, err
		}
		parents(dst)
		es = append(es, entry{path: strings.TrimPrefix(dst, "/"), mode: 0o755, data: data})
		if entrypoint == "" {
			entrypoint = dst
		}
	}
	for _, l := range o.links {
		dst, target, ok := strings.Cut(l, ":")
		if !ok || !path.IsAbs(dst) || target == "" {
			return nil, fmt.Errorf("-link %q is not /DST:TARGET", l)
		}
		parents(dst)
		es = append(es, entry{path: strings.TrimPrefix(dst, "/"), mode: 0o777, link: target})
	}
	created := time.Unix(0, 0).UTC()
	base, err := baseEntries("/etc/ssl/certs/ca-certificates.crt")
	if err != nil {
		return nil, err
	}
	baseLayer, err := newLayer(base, created, gzip.BestSpeed)
	if err != nil {
		return nil, err
	}
	fileLayer, err := newLayer(es, created, gzip.BestSpeed)
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, baseLayer, fileLayer)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", runtime.GOARCH
	cfg.Config.Entrypoint = []string{entrypoint}
	cfg.Config.User = o.user
	cfg.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	return mutate.ConfigFile(img, cfg)
}

// static refuses an ELF binary that needs a dynamic loader: the images
// have no C library, so a binary built with cgo would fail at its pod's
// start with a bare "no such file or directory".
func static(file string, data []byte) error {
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return nil // not ELF: a script or data file
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked (built with cgo): images need static binaries; remove it and build it again with CGO_ENABLED=0 (the Makefile's default)", file)
		}
	}
	return nil
}
