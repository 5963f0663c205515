package main

import (
	"bytes"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

const repoRoot = "../.."

// release returns the trees of the release and its client module, as the
// command finds them: `go mod download` fetches them when the module cache
// lacks them.
func release(t *testing.T) (upstream, client string) {
	t.Helper()
	mods, err := peerModules(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	return mods[upstreamModule].Dir, mods[clientModule].Dir
}

// copyRelease copies the files the check reads into a temporary tree, so a
// test can change them.
func copyRelease(t *testing.T) (upstream, client string) {
	t.Helper()
	srcUp, srcClient := release(t)
	upstream, client = filepath.Join(t.TempDir(), "upstream"), filepath.Join(t.TempDir(), "client")
	files := []string{upstreamGatesFile}
	for _, b := range upstreamBinaries {
		files = append(files, b.file)
	}
	for _, f := range upstreamRBAC {
		files = append(files, f)
	}
	for _, f := range files {
		copyFile(t, filepath.Join(srcUp, f), filepath.Join(upstream, f))
	}
	crds, err := filepath.Glob(filepath.Join(srcClient, upstreamCRDDir, "*.yaml"))
	if err != nil || len(crds) == 0 {
		t.Fatalf("no CRDs in %s: %v", srcClient, err)
	}
	for _, f := range crds {
		copyFile(t, f, filepath.Join(client, upstreamCRDDir, filepath.Base(f)))
	}
	return upstream, client
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// replaceIn changes a file of the copied release; the pattern must match, so
// that a release that rewrites the line makes the test fail, not pass.
func replaceIn(file, pattern, repl string) func(t *testing.T, upstream, client string) {
	return func(t *testing.T, upstream, _ string) {
		t.Helper()
		path := filepath.Join(upstream, file)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		re := regexp.MustCompile(pattern)
		if !re.Match(b) {
			t.Fatalf("%s: %s does not match", file, pattern)
		}
		if err := os.WriteFile(path, re.ReplaceAll(b, []byte(repl)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func runCheck(t *testing.T, cfg config) (int, string) {
	t.Helper()
	var out bytes.Buffer
	code, err := run(&out, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return code, out.String()
}

func TestRealTreeHasNoUnknownDifference(t *testing.T) {
	if code, out := runCheck(t, config{Repo: repoRoot}); code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

func TestAChangedReleaseFails(t *testing.T) {
	tests := map[string]struct {
		edit func(t *testing.T, upstream, client string)
		want string
	}{
		"the copied release unchanged passes": {},
		"a feature gate default flipped is named": {
			edit: replaceIn(upstreamGatesFile, `(VolumeGroupSnapshot:\s*\{Default: )true`, "${1}false"),
			want: "feature gate CSIVolumeGroupSnapshot default: upstream false, ours true",
		},
		"a flag default changed is named": {
			edit: replaceIn("cmd/snapshot-controller/main.go", `("leader-election-lease-duration", )15\*time.Second`, "${1}20*time.Second"),
			want: "flag --leader-election-lease-duration of snapshot-controller default: upstream 20s, ours 15s",
		},
		"a verb added to a role is named": {
			edit: replaceIn(upstreamRBAC["snapshot-controller"], `(resources: \["volumesnapshotcontents/status"\]\s*verbs: \[)"patch"\]`, `${1}"patch", "update"]`),
			want: "RBAC snapshot-controller ClusterRole vs our binder: snapshot.storage.k8s.io/volumesnapshotcontents/status: upstream [patch update], ours [patch]",
		},
		"a schema field removed is named by its path": {
			edit: removeSnapshotClassNameField,
			want: "CRD volumesnapshots.snapshot.storage.k8s.io spec.versions[v1].schema.openAPIV3Schema.properties.spec.properties.volumeSnapshotClassName: upstream absent, ours ",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			upstream, client := copyRelease(t)
			if tc.edit != nil {
				tc.edit(t, upstream, client)
			}
			code, out := runCheck(t, config{Repo: repoRoot, Upstream: upstream, Client: client})
			switch {
			case tc.want == "" && code != 0:
				t.Fatalf("exit %d:\n%s", code, out)
			case tc.want != "" && (code != 1 || !strings.Contains(out, tc.want)):
				t.Fatalf("exit %d, want 1 and a line with %q:\n%s", code, tc.want, out)
			case tc.want != "" && strings.Count(out, "\n") != 1:
				t.Errorf("want this one difference only:\n%s", out)
			}
		})
	}
}

// removeSnapshotClassNameField drops spec.volumeSnapshotClassName from the
// v1 schema of the copied VolumeSnapshot CRD.
func removeSnapshotClassNameField(t *testing.T, _, client string) {
	t.Helper()
	path := filepath.Join(client, upstreamCRDDir, "snapshot.storage.k8s.io_volumesnapshots.yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := yaml.Unmarshal(b, &obj); err != nil {
		t.Fatal(err)
	}
	removed := false
	for _, v := range obj["spec"].(map[string]any)["versions"].([]any) {
		v := v.(map[string]any)
		if v["name"] != "v1" {
			continue
		}
		props := v["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)["properties"].(map[string]any)
		spec := props["spec"].(map[string]any)["properties"].(map[string]any)
		_, removed = spec["volumeSnapshotClassName"]
		delete(spec, "volumeSnapshotClassName")
	}
	if !removed {
		t.Fatal("the v1 VolumeSnapshot schema has no spec.volumeSnapshotClassName")
	}
	if b, err = yaml.Marshal(obj); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestStaleKnownEntryFails(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, knownFile))
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, "- key: \"flag --gone of snapshot-controller default: upstream 1, ours 2\"\n  reason: 'a test'\n"...)
	known := filepath.Join(t.TempDir(), "known.yaml")
	if err := os.WriteFile(known, b, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out := runCheck(t, config{Repo: repoRoot, Known: known})
	if code != 1 || !strings.Contains(out, "stale entry") || !strings.Contains(out, "--gone") {
		t.Fatalf("exit %d, want 1 and the stale entry named:\n%s", code, out)
	}
}

// TestKnownReasonsNameOurDocs: every reason points at a doc of ours that
// exists.
func TestKnownReasonsNameOurDocs(t *testing.T) {
	known, err := readKnown(filepath.Join(repoRoot, knownFile))
	if err != nil {
		t.Fatal(err)
	}
	doc := regexp.MustCompile(`docs/[a-z0-9-]+\.md`)
	for key, e := range known {
		docs := doc.FindAllString(e.Reason, -1)
		if len(docs) == 0 {
			t.Errorf("%s: the reason names no doc under docs/", key)
		}
		for _, d := range docs {
			if _, err := os.Stat(filepath.Join(repoRoot, d)); err != nil {
				t.Errorf("%s: %v", key, err)
			}
		}
	}
}

// TestFlagDefaultsAreFollowed: defaults written as o.Field are read from the
// constructor, through the option structs of other packages, and constants
// are evaluated.
func TestFlagDefaultsAreFollowed(t *testing.T) {
	l := &loader{repo: repoRoot, fset: token.NewFileSet(), pkgs: map[string]*goPkg{}}
	ours, err := l.ourFlags()
	if err != nil {
		t.Fatal(err)
	}
	upstream, _ := release(t)
	theirs, err := l.upstreamFlags(filepath.Join(upstream, "cmd/csi-snapshotter/main.go"))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]flagDef{
		"kube-api-qps":   {Type: "Float64", Default: "1000", File: "cmd/controller/options.go"},
		"kubeconfig":     {Type: "String", Default: `""`, File: "pkg/kubeclient/kubeclient.go"},
		"logging-format": {Type: "String", Default: `"text"`, File: "pkg/logging/logging.go"},
		"timeout":        {Type: "Duration", Default: "1m0s", File: "cmd/controller/options.go"},
		"feature-gates":  {Type: "String", Default: `""`, File: "cmd/controller/options.go"},
	} {
		if got := ours[name]; got != want {
			t.Errorf("ours --%s: %+v, want %+v", name, got, want)
		}
	}
	if got := theirs["timeout"]; got.Type != "Duration" || got.Default != "1m0s" {
		t.Errorf("csi-snapshotter --timeout: %+v, want a Duration of 1m0s", got)
	}
	if got := theirs["feature-gates"]; got.Type != "Var" {
		t.Errorf("csi-snapshotter --feature-gates: %+v, want a Var", got)
	}
}
