package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// entry is one file or directory of a layer.
type entry struct {
	path string // without a leading slash; directories end in "/"
	mode int64
	uid  int
	data []byte
	link string // a symbolic link's target
}

// passwd and group name the two users the image supports: root, its
// default (docs/releases.md, "Image user"), and nonroot, the UID/GID 65532
// the chart runs as.
const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group  = "root:x:0:\nnonroot:x:65532:\n"
)

// baseEntries is the platform-independent layer: users, CA certificates,
// home directories and /tmp.
func baseEntries(caFile string) ([]entry, error) {
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("CA certificates: %w", err)
	}
	if !bytes.Contains(ca, []byte("BEGIN CERTIFICATE")) {
		return nil, fmt.Errorf("%s holds no PEM certificate", caFile)
	}
	return []entry{
		{path: "etc/", mode: 0o755},
		{path: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{path: "etc/group", mode: 0o644, data: []byte(group)},
		{path: "etc/ssl/", mode: 0o755},
		{path: "etc/ssl/certs/", mode: 0o755},
		{path: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: ca},
		{path: "home/", mode: 0o755},
		{path: "home/nonroot/", mode: 0o700, uid: 65532},
		{path: "root/", mode: 0o700},
		{path: "tmp/", mode: 0o1777},
	}, nil
}

// binEntries puts the binaries under /usr/local/bin.
func binEntries(bins map[string][]byte) []entry {
	es := []entry{{path: "usr/", mode: 0o755}, {path: "usr/local/", mode: 0o755}, {path: "usr/local/bin/", mode: 0o755}}
	for name, data := range bins {
		es = append(es, entry{path: "usr/local/bin/" + name, mode: 0o755, data: data})
	}
	return es
}

// tarBytes writes the entries sorted by path, every time stamp mtime and
// no user or group names, so equal entries give equal bytes.
func tarBytes(es []entry, mtime time.Time) ([]byte, error) {
	sort.Slice(es, func(i, j int) bool { return es[i].path < es[j].path })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range es {
		h := &tar.Header{
			Name: e.path, Mode: e.mode, Uid: e.uid, Gid: e.uid,
			ModTime: mtime, Format: tar.FormatPAX,
		}
		switch {
		case strings.HasSuffix(e.path, "/"):
			h.Typeflag = tar.TypeDir
		case e.link != "":
			h.Typeflag, h.Linkname = tar.TypeSymlink, e.link
		default:
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// newLayer is an OCI gzip layer of the entries, at gzip level level
// (BestCompression for what we publish; BestSpeed for the node plane's
// tarballs, which never leave the machine); gzip's own header carries no
// time or name, so the compressed digest is stable too.
func newLayer(es []entry, mtime time.Time, level int) (v1.Layer, error) {
	raw, err := tarBytes(es, mtime)
	if err != nil {
		return nil, err
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(raw)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(level))
}
