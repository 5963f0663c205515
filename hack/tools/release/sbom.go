package main

import (
	"crypto/sha256"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// readBOM reads a CycloneDX JSON document.
func readBOM(path string) (*cdx.BOM, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var bom cdx.BOM
	if err := cdx.NewBOMDecoder(f, cdx.BOMFileFormatJSON).Decode(&bom); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &bom, nil
}

func writeBOM(path string, bom *cdx.BOM) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	enc := cdx.NewBOMEncoder(f, cdx.BOMFileFormatJSON).SetPretty(true)
	if err := enc.Encode(bom); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// runImageSBOM writes, next to the layout, one SBOM per platform image:
// the image as the subject (its manifest digest in the purl) and, as its
// components, the modules of the binaries it holds, read from their SBOMs.
func runImageSBOM(args []string) error {
	fs := flag.NewFlagSet("image-sbom", flag.ContinueOnError)
	lay := fs.String("layout", "bin/release/oci/snapkeeper", "OCI layout written by `image`.")
	sbomDir := fs.String("sbom", "bin/release/sbom", "Directory of NAME-OS-ARCH.cdx.json binary SBOMs.")
	repo := fs.String("repository", "ghcr.io/snapkeeper/snapkeeper", "repository_url of the image purl.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	p, err := layout.FromPath(*lay)
	if err != nil {
		return err
	}
	top, err := p.ImageIndex()
	if err != nil {
		return err
	}
	tm, err := top.IndexManifest()
	if err != nil || len(tm.Manifests) != 1 {
		return fmt.Errorf("layout %s: want one image index (%v)", *lay, err)
	}
	idx, err := top.ImageIndex(tm.Manifests[0].Digest)
	if err != nil {
		return err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	version, created := im.Annotations["org.opencontainers.image.version"], im.Annotations["org.opencontainers.image.created"]
	for _, m := range im.Manifests {
		plat := m.Platform.OS + "-" + m.Platform.Architecture
		var boms []*cdx.BOM
		for _, name := range imageBinaries {
			b, err := readBOM(filepath.Join(*sbomDir, name+"-"+plat+".cdx.json"))
			if err != nil {
				return err
			}
			boms = append(boms, b)
		}
		purl := fmt.Sprintf("pkg:oci/snapkeeper@%s?arch=%s&repository_url=%s", strings.Replace(m.Digest.String(), ":", "%3A", 1), m.Platform.Architecture, *repo)
		subject := cdx.Component{
			BOMRef: purl, Type: cdx.ComponentTypeContainer, Name: "snapkeeper", Version: version, PackageURL: purl,
			Hashes: &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: m.Digest.Hex}},
		}
		out := mergeBOMs(subject, created, boms)
		if err := writeBOM(*lay+"-"+plat+".cdx.json", out); err != nil {
			return err
		}
	}
	return nil
}

// mergeBOMs is one document with subject as its metadata component and the
// union of the inputs' subjects, components and dependencies; the serial
// number derives from the subject and the timestamp is the commit time, so
// the document is reproducible.
func mergeBOMs(subject cdx.Component, created string, boms []*cdx.BOM) *cdx.BOM {
	out := cdx.NewBOM()
	u := sha256.Sum256([]byte(subject.BOMRef))
	u[6], u[8] = u[6]&0x0f|0x50, u[8]&0x3f|0x80 // name-based UUID layout
	out.SerialNumber = fmt.Sprintf("urn:uuid:%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
	if _, err := time.Parse(time.RFC3339, created); err == nil {
		out.Metadata = &cdx.Metadata{Timestamp: created}
	} else {
		out.Metadata = &cdx.Metadata{}
	}
	out.Metadata.Component = &subject
	comps := map[string]cdx.Component{}
	deps := map[string]map[string]bool{subject.BOMRef: {}}
	addDep := func(ref string, on ...string) {
		if deps[ref] == nil {
			deps[ref] = map[string]bool{}
		}
		for _, o := range on {
			deps[ref][o] = true
		}
	}
	for _, b := range boms {
		if b.Metadata != nil && b.Metadata.Component != nil {
			c := *b.Metadata.Component
			c.Type = cdx.ComponentTypeApplication
			comps[c.BOMRef] = c
			addDep(subject.BOMRef, c.BOMRef)
		}
		if b.Components != nil {
			for _, c := range *b.Components {
				comps[c.BOMRef] = c
			}
		}
		if b.Dependencies != nil {
			for _, d := range *b.Dependencies {
				on := []string{}
				if d.Dependencies != nil {
					on = *d.Dependencies
				}
				addDep(d.Ref, on...)
			}
		}
	}
	list := make([]cdx.Component, 0, len(comps))
	for _, c := range comps {
		list = append(list, c)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].BOMRef < list[j].BOMRef })
	out.Components = &list
	dl := make([]cdx.Dependency, 0, len(deps))
	for ref, on := range deps {
		refs := make([]string, 0, len(on))
		for o := range on {
			refs = append(refs, o)
		}
		sort.Strings(refs)
		dl = append(dl, cdx.Dependency{Ref: ref, Dependencies: &refs})
	}
	sort.Slice(dl, func(i, j int) bool { return dl[i].Ref < dl[j].Ref })
	out.Dependencies = &dl
	return out
}
