package main

import (
	"compress/gzip"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// imageBinaries are the binaries in the image; the first is the entrypoint
// (a driver chart swaps its csi-snapshotter sidecar image for this one and
// keeps its arguments; the chart's webhook sets its command). snapctl is
// there for the chart's `helm test` Pod (snapctl selftest webhook), so the
// test needs no image but ours.
var imageBinaries = []string{"snapkeeper-controller", "snapkeeper-webhook", "snapctl"}

// imageOptions describe one image index.
type imageOptions struct {
	binDir, out, caFile string
	tarball, name       string
	level               int // gzip level of the layers
	version, revision   string
	source, tag         string
	created             time.Time
	platforms           []v1.Platform
}

func runImage(args []string) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	var o imageOptions
	var epoch int64
	var platforms string
	fs.StringVar(&o.binDir, "bin", "bin/release", "Directory holding NAME-OS-ARCH binaries.")
	fs.StringVar(&o.out, "out", "bin/release/oci/snapkeeper", "OCI layout directory to (re)create.")
	fs.StringVar(&o.caFile, "ca", "/etc/ssl/certs/ca-certificates.crt", "CA bundle copied into the image.")
	fs.StringVar(&o.version, "version", "", "Release version (org.opencontainers.image.version).")
	fs.StringVar(&o.revision, "revision", "", "Commit (org.opencontainers.image.revision).")
	fs.StringVar(&o.source, "source", "https://github.com/snapkeeper/snapkeeper", "org.opencontainers.image.source.")
	fs.StringVar(&o.tag, "tag", "", "Tag recorded in the layout (org.opencontainers.image.ref.name); default the version with + as _.")
	fs.Int64Var(&epoch, "epoch", -1, "Commit time in Unix seconds (SOURCE_DATE_EPOCH): image creation and file times.")
	fs.StringVar(&platforms, "platforms", "linux/amd64,linux/arm64", "Comma-separated OS/ARCH list.")
	fs.StringVar(&o.tarball, "tarball", "", "Instead of -out: a docker-archive tarball of the one image of -platforms, for the node plane's containerd (`make test`'s image).")
	fs.StringVar(&o.name, "name", "", "With -tarball: the reference the tarball carries (REPOSITORY:TAG).")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.version == "" || o.revision == "" || epoch < 0 {
		return fmt.Errorf("image: -version, -revision and -epoch are required")
	}
	if o.tag == "" {
		o.tag = strings.ReplaceAll(o.version, "+", "_")
	}
	o.created = time.Unix(epoch, 0).UTC()
	for _, p := range strings.Split(platforms, ",") {
		goos, arch, ok := strings.Cut(p, "/")
		if !ok {
			return fmt.Errorf("image: platform %q is not OS/ARCH", p)
		}
		o.platforms = append(o.platforms, v1.Platform{OS: goos, Architecture: arch})
	}
	o.level = gzip.BestCompression // what we publish
	if o.tarball != "" {
		o.level = gzip.BestSpeed
		return writeTarball(o)
	}
	idx, err := buildIndex(o)
	if err != nil {
		return err
	}
	return writeLayout(o, idx)
}

// writeTarball writes the image of the one platform of o as a
// docker-archive tarball tagged o.name: the same image as the layout's
// for that platform, without writing the layout first.
func writeTarball(o imageOptions) error {
	if len(o.platforms) != 1 || o.name == "" {
		return fmt.Errorf("image: -tarball needs one platform in -platforms and -name")
	}
	tag, err := name.NewTag(o.name)
	if err != nil {
		return fmt.Errorf("image: -name: %w", err)
	}
	baseLayer, err := o.baseLayer()
	if err != nil {
		return err
	}
	img, err := buildImage(o, o.platforms[0], baseLayer)
	if err != nil {
		return err
	}
	tmp := o.tarball + ".tmp"
	if err := tarball.WriteToFile(tmp, tag, img); err != nil {
		return err
	}
	return os.Rename(tmp, o.tarball)
}

// labels are the image's OCI labels, also set as index annotations.
func (o imageOptions) labels() map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       "snapkeeper",
		"org.opencontainers.image.description": "CSI volume snapshot control plane: snapkeeper-controller (entrypoint), snapkeeper-webhook and snapctl",
		"org.opencontainers.image.version":     o.version,
		"org.opencontainers.image.revision":    o.revision,
		"org.opencontainers.image.source":      o.source,
		"org.opencontainers.image.created":     o.created.Format(time.RFC3339),
	}
}

// baseLayer is the platform-independent layer (baseEntries) of every
// image of o.
func (o imageOptions) baseLayer() (v1.Layer, error) {
	base, err := baseEntries(o.caFile)
	if err != nil {
		return nil, err
	}
	return newLayer(base, o.created, o.level)
}

func buildIndex(o imageOptions) (v1.ImageIndex, error) {
	baseLayer, err := o.baseLayer()
	if err != nil {
		return nil, err
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range o.platforms {
		img, err := buildImage(o, p, baseLayer)
		if err != nil {
			return nil, fmt.Errorf("%s/%s: %w", p.OS, p.Architecture, err)
		}
		plat := p
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &plat}})
	}
	return mutate.Annotations(idx, o.labels()).(v1.ImageIndex), nil
}

func buildImage(o imageOptions, p v1.Platform, baseLayer v1.Layer) (v1.Image, error) {
	bins := map[string][]byte{}
	for _, name := range imageBinaries {
		file := filepath.Join(o.binDir, fmt.Sprintf("%s-%s-%s", name, p.OS, p.Architecture))
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		if err := static(file, data); err != nil {
			return nil, err
		}
		bins[name] = data
	}
	binLayer, err := newLayer(binEntries(bins), o.created, o.level)
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: o.created}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: baseLayer, MediaType: types.OCILayer, History: v1.History{
			Created: created, CreatedBy: "snapkeeper-release: /etc/passwd, /etc/group (root, nonroot 65532), CA certificates"}},
		mutate.Addendum{Layer: binLayer, MediaType: types.OCILayer, History: v1.History{
			Created: created, CreatedBy: "snapkeeper-release: " + strings.Join(imageBinaries, ", ") + " in /usr/local/bin"}},
	)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Variant = p.OS, p.Architecture, p.Variant
	cfg.Created = created
	cfg.Author = ""
	cfg.Config.Entrypoint = []string{"/usr/local/bin/" + imageBinaries[0]}
	cfg.Config.Cmd = nil
	// Root, as the community sidecar images: see docs/releases.md.
	cfg.Config.User = "0:0"
	cfg.Config.WorkingDir = "/"
	cfg.Config.Env = []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
	}
	cfg.Config.Labels = o.labels()
	return mutate.ConfigFile(img, cfg)
}

// writeLayout replaces o.out with a fresh OCI layout whose index.json
// points at the image index, tagged o.tag, and writes o.out + ".digests".
func writeLayout(o imageOptions, idx v1.ImageIndex) error {
	if err := os.RemoveAll(o.out); err != nil {
		return err
	}
	p, err := layout.Write(o.out, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": o.tag,
	})); err != nil {
		return err
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	lines := fmt.Sprintf("%s index %s\n", d, o.tag)
	for _, m := range im.Manifests {
		lines += fmt.Sprintf("%s %s/%s\n", m.Digest, m.Platform.OS, m.Platform.Architecture)
	}
	fmt.Print(lines)
	return os.WriteFile(o.out+".digests", []byte(lines), 0o644)
}
