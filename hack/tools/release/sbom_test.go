package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	cdx "github.com/CycloneDX/cyclonedx-go"
)

func bom(main string, comps ...string) *cdx.BOM {
	b := cdx.NewBOM()
	b.Metadata = &cdx.Metadata{Component: &cdx.Component{BOMRef: main, Name: main, Type: cdx.ComponentTypeApplication}}
	var cs []cdx.Component
	for _, c := range comps {
		cs = append(cs, cdx.Component{BOMRef: c, Name: c, Version: "v1", Licenses: &cdx.Licenses{{License: &cdx.License{ID: "MIT"}}}})
	}
	b.Components = &cs
	b.Dependencies = &[]cdx.Dependency{{Ref: main, Dependencies: &comps}}
	return b
}

func TestMergeBOMs(t *testing.T) {
	subject := cdx.Component{BOMRef: "img", Name: "snapkeeper", Type: cdx.ComponentTypeContainer}
	a := mergeBOMs(subject, "2026-01-01T00:00:00Z", []*cdx.BOM{bom("main", "x", "y"), bom("main", "y", "z")})
	b := mergeBOMs(subject, "2026-01-01T00:00:00Z", []*cdx.BOM{bom("main", "x", "y"), bom("main", "y", "z")})
	if a.SerialNumber != b.SerialNumber || !strings.HasPrefix(a.SerialNumber, "urn:uuid:") {
		t.Fatalf("serials %s %s", a.SerialNumber, b.SerialNumber)
	}
	var names []string
	for _, c := range *a.Components {
		names = append(names, c.Name)
	}
	if strings.Join(names, ",") != "main,x,y,z" {
		t.Fatalf("components %v", names)
	}
	if a.Metadata.Component.BOMRef != "img" || a.Metadata.Timestamp != "2026-01-01T00:00:00Z" {
		t.Fatalf("metadata %+v", a.Metadata)
	}
}

func TestLicenses(t *testing.T) {
	dir := t.TempDir()
	for name, b := range map[string]*cdx.BOM{
		"snapctl-darwin-arm64.cdx.json":              bom("github.com/snapkeeper/snapkeeper", "golang.org/x/net", "a"),
		"snapkeeper-controller-linux-amd64.cdx.json": bom("github.com/snapkeeper/snapkeeper", "a", "std"),
	} {
		if err := writeBOM(filepath.Join(dir, name), b); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "licenses.md")
	files, _ := filepath.Glob(filepath.Join(dir, "*.cdx.json"))
	if err := runLicenses(append([]string{"-out", out}, files...)); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| a | v1 | MIT | snapctl, snapkeeper-controller |",
		"| golang.org/x/net | v1 | BSD-3-Clause (detected: MIT) | snapctl |",
		"| github.com/snapkeeper/snapkeeper | this repository | Apache-2.0 (the repository's LICENSE) |",
	} {
		if !strings.Contains(string(md), want) {
			t.Errorf("missing %q in\n%s", want, md)
		}
	}
}

func TestLicenseText(t *testing.T) {
	if got := licenseText(cdx.Component{Name: "std"}, false); !strings.HasPrefix(got, "BSD-3-Clause") {
		t.Errorf("std: %s", got)
	}
	if got := licenseText(cdx.Component{Name: "m"}, false); got != "not detected" {
		t.Errorf("m: %s", got)
	}
}
