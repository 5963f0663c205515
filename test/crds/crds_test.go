// Package crds proves that the CRDs we generate into the chart are
// schema-equivalent to the manifests shipped in the client/v8 module, so an
// existing cluster's snapshot objects stay valid when it switches to us.
package crds

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

func moduleCRDDir(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/kubernetes-csi/external-snapshotter/client/v8").Output()
	if err != nil {
		t.Fatalf("go list client/v8: %v", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "config", "crd")
}

func readCRDs(t *testing.T, dir string) map[string]map[string]any {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, f := range files {
		var obj map[string]any
		if err := framework.ReadYAML(f, &obj); err != nil {
			t.Fatal(err)
		}
		if obj["kind"] != "CustomResourceDefinition" {
			continue
		}
		name := obj["metadata"].(map[string]any)["name"].(string)
		out[name] = obj
	}
	return out
}

// stripDescriptions removes documentation text, which follows the Go doc
// comments and the controller-gen version, and carries no schema meaning.
func stripDescriptions(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, val := range x {
			if k == "description" {
				if _, isText := val.(string); isText {
					continue
				}
			}
			m[k] = stripDescriptions(val)
		}
		return m
	case []any:
		s := make([]any, len(x))
		for i, val := range x {
			s[i] = stripDescriptions(val)
		}
		return s
	default:
		return v
	}
}

func versionsByName(t *testing.T, crd map[string]any) map[string]any {
	t.Helper()
	spec := crd["spec"].(map[string]any)
	out := map[string]any{}
	for _, v := range spec["versions"].([]any) {
		m := v.(map[string]any)
		out[m["name"].(string)] = stripDescriptions(m)
	}
	return out
}

func TestGeneratedCRDsMatchModule(t *testing.T) {
	ours := readCRDs(t, framework.CRDDir())
	theirs := readCRDs(t, moduleCRDDir(t))
	// Our own API's CRD (group snapkeeper.io) is not the module's.
	for name := range ours {
		if strings.HasSuffix(name, ".snapkeeper.io") {
			delete(ours, name)
		}
	}
	if len(ours) != 6 {
		t.Errorf("chart has %d snapshot CRDs, want 6", len(ours))
	}
	for name, ref := range theirs {
		got, ok := ours[name]
		if !ok {
			t.Errorf("CRD %s missing from %s", name, framework.CRDDir())
			continue
		}
		refMeta, gotMeta := ref["metadata"].(map[string]any), got["metadata"].(map[string]any)
		refAnn, _ := refMeta["annotations"].(map[string]any)
		gotAnn, _ := gotMeta["annotations"].(map[string]any)
		if refAnn["api-approved.kubernetes.io"] != gotAnn["api-approved.kubernetes.io"] {
			t.Errorf("%s: api-approved.kubernetes.io = %v, want %v", name, gotAnn["api-approved.kubernetes.io"], refAnn["api-approved.kubernetes.io"])
		}
		refSpec, gotSpec := ref["spec"].(map[string]any), got["spec"].(map[string]any)
		for _, field := range []string{"group", "names", "scope", "conversion"} {
			if d := cmp.Diff(refSpec[field], gotSpec[field]); d != "" {
				t.Errorf("%s: spec.%s differs (-module +ours):\n%s", name, field, d)
			}
		}
		// Same versions in the same order, each with the same flags,
		// subresources, printer columns and schema (CEL rules included).
		var refOrder, gotOrder []string
		for _, v := range refSpec["versions"].([]any) {
			refOrder = append(refOrder, v.(map[string]any)["name"].(string))
		}
		for _, v := range gotSpec["versions"].([]any) {
			gotOrder = append(gotOrder, v.(map[string]any)["name"].(string))
		}
		if d := cmp.Diff(refOrder, gotOrder); d != "" {
			t.Errorf("%s: versions differ (-module +ours):\n%s", name, d)
		}
		if d := cmp.Diff(versionsByName(t, ref), versionsByName(t, got)); d != "" {
			t.Errorf("%s: version contents differ (-module +ours):\n%s", name, d)
		}
	}
}

// TestCELRulesPresent guards against a generation step that silently drops
// the x-kubernetes-validations rules (the diff above would catch it too, but
// this names the rule that matters most to users).
func TestCELRulesPresent(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(framework.CRDDir(), "snapshot.storage.k8s.io_volumesnapshots.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "x-kubernetes-validations") {
		t.Fatal("VolumeSnapshot CRD has no x-kubernetes-validations rules")
	}
}
