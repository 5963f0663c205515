package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// pluginBin is the name kubectl finds a plugin by: `kubectl snapkeeper`
// runs kubectl-snapkeeper from PATH (krew links it into its bin directory).
const pluginBin = "kubectl-snapkeeper"

// krewOptions describe the kubectl plugin release: one archive per snapctl
// platform and the krew manifest that names them.
type krewOptions struct {
	binDir, out, manifest, license string
	version, uriBase, homepage     string
	mtime                          time.Time
	platforms                      []string // OS-ARCH
}

func runKrew(args []string) error {
	fs := flag.NewFlagSet("krew", flag.ContinueOnError)
	var o krewOptions
	var epoch int64
	var platforms string
	fs.StringVar(&o.binDir, "bin", "bin/release", "Directory holding the snapctl-OS-ARCH binaries.")
	fs.StringVar(&o.out, "out", "bin/release", "Directory for the kubectl-snapkeeper-OS-ARCH.tar.gz archives.")
	fs.StringVar(&o.manifest, "manifest", "bin/release/krew/snapkeeper.yaml", "Krew plugin manifest to write.")
	fs.StringVar(&o.license, "license", "LICENSE", "License file put next to the binary in each archive.")
	fs.StringVar(&o.version, "version", "", "Release version with its leading v (spec.version).")
	fs.StringVar(&o.uriBase, "uri-base", "", "URL the archives are downloaded from: the release's download URL.")
	fs.StringVar(&o.homepage, "homepage", "https://github.com/snapkeeper/snapkeeper", "spec.homepage.")
	fs.Int64Var(&epoch, "epoch", -1, "Commit time in Unix seconds (SOURCE_DATE_EPOCH): the archives' file times.")
	fs.StringVar(&platforms, "platforms", "linux-amd64,linux-arm64,darwin-amd64,darwin-arm64", "OS-ARCH list, comma or space separated.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	// krew parses spec.version as semver with a leading v.
	if !strings.HasPrefix(o.version, "v") || o.uriBase == "" || epoch < 0 {
		return fmt.Errorf("krew: -version vX.Y.Z, -uri-base and -epoch are required")
	}
	o.uriBase = strings.TrimSuffix(o.uriBase, "/")
	o.mtime = time.Unix(epoch, 0).UTC()
	o.platforms = strings.FieldsFunc(platforms, func(r rune) bool { return r == ',' || r == ' ' })
	plugin, err := writeKrew(o)
	if err != nil {
		return err
	}
	for _, p := range plugin.Spec.Platforms {
		fmt.Printf("%s %s\n", p.SHA256, p.URI)
	}
	return nil
}

// krewPlugin is a krew plugin manifest, the fields krew reads
// (krew.googlecontainertools.github.com/v1alpha2, kind Plugin).
type krewPlugin struct {
	APIVersion string       `yaml:"apiVersion"`
	Kind       string       `yaml:"kind"`
	Metadata   krewMetadata `yaml:"metadata"`
	Spec       krewSpec     `yaml:"spec"`
}

type krewMetadata struct {
	Name string `yaml:"name"`
}

type krewSpec struct {
	Version          string         `yaml:"version"`
	Homepage         string         `yaml:"homepage"`
	ShortDescription string         `yaml:"shortDescription"`
	Description      string         `yaml:"description"`
	Platforms        []krewPlatform `yaml:"platforms"`
}

type krewPlatform struct {
	Selector krewSelector `yaml:"selector"`
	URI      string       `yaml:"uri"`
	SHA256   string       `yaml:"sha256"`
	Bin      string       `yaml:"bin"`
	Files    []krewFile   `yaml:"files"`
}

type krewSelector struct {
	MatchLabels map[string]string `yaml:"matchLabels"`
}

type krewFile struct {
	From string `yaml:"from"`
	To   string `yaml:"to"`
}

const krewDescription = `snapkeeper's CLI, snapctl, as a kubectl plugin:

  kubectl snapkeeper validate PATH    judge snapshot, group snapshot and claim
                                      manifests with the snapkeeper webhook's
                                      rules, offline or against the cluster
  kubectl snapkeeper crd-check        find what would block an upgrade of the
                                      snapshot CRDs
  kubectl snapkeeper doctor           explain every stuck snapshot object, with
                                      its fix
  kubectl snapkeeper selftest webhook check that the API server reaches the
                                      snapkeeper admission webhook
`

// writeKrew writes an archive per platform and the manifest naming each
// with its sha256; the bytes depend only on the inputs and o.mtime.
func writeKrew(o krewOptions) (krewPlugin, error) {
	plugin := krewPlugin{
		APIVersion: "krew.googlecontainertools.github.com/v1alpha2",
		Kind:       "Plugin",
		Metadata:   krewMetadata{Name: "snapkeeper"},
		Spec: krewSpec{
			Version:          o.version,
			Homepage:         o.homepage,
			ShortDescription: "Validate, check and debug CSI volume snapshots",
			Description:      krewDescription,
		},
	}
	license, err := os.ReadFile(o.license)
	if err != nil {
		return plugin, err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return plugin, err
	}
	for _, plat := range o.platforms {
		goos, arch, ok := strings.Cut(plat, "-")
		if !ok {
			return plugin, fmt.Errorf("krew: platform %q is not OS-ARCH", plat)
		}
		bin, err := os.ReadFile(filepath.Join(o.binDir, "snapctl-"+plat))
		if err != nil {
			return plugin, err
		}
		tgz, err := pluginArchive(bin, license, o.mtime)
		if err != nil {
			return plugin, fmt.Errorf("%s: %w", plat, err)
		}
		name := pluginBin + "-" + plat + ".tar.gz"
		if err := os.WriteFile(filepath.Join(o.out, name), tgz, 0o644); err != nil {
			return plugin, err
		}
		sum := sha256.Sum256(tgz)
		plugin.Spec.Platforms = append(plugin.Spec.Platforms, krewPlatform{
			Selector: krewSelector{MatchLabels: map[string]string{"os": goos, "arch": arch}},
			URI:      o.uriBase + "/" + name,
			SHA256:   hex.EncodeToString(sum[:]),
			Bin:      pluginBin,
			Files:    []krewFile{{From: pluginBin, To: "."}, {From: "LICENSE", To: "."}},
		})
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(plugin); err != nil {
		return plugin, err
	}
	if err := enc.Close(); err != nil {
		return plugin, err
	}
	if err := os.MkdirAll(filepath.Dir(o.manifest), 0o755); err != nil {
		return plugin, err
	}
	return plugin, os.WriteFile(o.manifest, buf.Bytes(), 0o644)
}

// pluginArchive is what krew installs from: the snapctl binary already
// named kubectl-snapkeeper, and the license, nothing else; so a user who
// unpacks it by hand has a working plugin too.
func pluginArchive(bin, license []byte, mtime time.Time) ([]byte, error) {
	return newTgz([]entry{
		{path: pluginBin, mode: 0o755, data: bin},
		{path: "LICENSE", mode: 0o644, data: license},
	}, mtime)
}
