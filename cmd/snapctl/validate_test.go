package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/snapkeeper/snapkeeper/pkg/manifestcheck"
	"github.com/snapkeeper/snapkeeper/pkg/validation/validationtest"
)

func runJSON(t *testing.T, args ...string) ([]manifestcheck.Result, int, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run("snapctl", append([]string{"validate", "-o", "json"}, args...), &out, &errOut)
	var results []manifestcheck.Result
	if code != 2 {
		if err := json.Unmarshal(out.Bytes(), &results); err != nil {
			t.Fatalf("output is not JSON: %v\n%s", err, out.String())
		}
	}
	return results, code, errOut.String()
}

// TestSets runs every multi-file set of test/testdata/sets offline; the
// e2e test runs the same sets through the live webhook.
func TestSets(t *testing.T) {
	sets, err := validationtest.LoadSets(filepath.Join("..", "..", "test", "testdata", "sets"))
	if err != nil || len(sets) < 5 {
		t.Fatalf("sets: %d, %v", len(sets), err)
	}
	for _, s := range sets {
		t.Run(s.Name, func(t *testing.T) {
			results, code, stderr := runJSON(t, s.Dir)
			wantCode := 0
			if len(s.Denied) > 0 {
				wantCode = 1
			}
			if code != wantCode {
				t.Errorf("exit %d, want %d\n%s", code, wantCode, stderr)
			}
			seen := 0
			for _, r := range results {
				fields, denied := s.Denied[validationtest.SetKey(r.Kind, r.Namespace, r.Name)]
				if denied {
					seen++
				}
				if r.Allowed == denied {
					t.Errorf("%s %s/%s: allowed=%v, want %v: %+v", r.Kind, r.Namespace, r.Name, r.Allowed, !denied, r.Errors)
				}
				for _, f := range fields {
					if !slices.ContainsFunc(r.Errors, func(e manifestcheck.FieldError) bool { return e.Field == f }) {
						t.Errorf("%s %s: no error on field %s: %+v", r.Kind, r.Name, f, r.Errors)
					}
				}
			}
			if seen != len(s.Denied) {
				t.Errorf("outcome.txt names %d objects, %d were judged", len(s.Denied), seen)
			}
		})
	}
}

func TestStdinListsAndJSONSchema(t *testing.T) {
	in := `{"apiVersion":"v1","kind":"List","items":[
	  {"apiVersion":"snapshot.storage.k8s.io/v1","kind":"VolumeSnapshotClass","metadata":{"name":"c"},"driver":"not a driver","deletionPolicy":"Delete"},
	  {"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"}}]}`
	old := stdin
	stdin = strings.NewReader(in)
	defer func() { stdin = old }()
	var out, errOut bytes.Buffer
	if code := run("snapctl", []string{"validate", "-o", "json", "-v", "-"}, &out, &errOut); code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", code, out.String(), errOut.String())
	}
	var raw []map[string]any
	if err := json.Unmarshal(out.Bytes(), &raw); err != nil || len(raw) != 1 {
		t.Fatalf("%v: %s", err, out.String())
	}
	for _, key := range []string{"file", "document", "kind", "name", "allowed", "errors", "warnings"} {
		if _, ok := raw[0][key]; !ok {
			t.Errorf("result lacks %q: %v", key, raw[0])
		}
	}
	if raw[0]["file"] != "<stdin>" || raw[0]["item"] != float64(1) {
		t.Errorf("where: %v", raw[0])
	}
	if !strings.Contains(errOut.String(), `<stdin>:1.2: ignored`) {
		t.Errorf("-v does not note the Deployment: %q", errOut.String())
	}
}

func TestTextOutputAndDuplicates(t *testing.T) {
	dir := t.TempDir()
	doc := "apiVersion: snapshot.storage.k8s.io/v1\nkind: VolumeSnapshot\nmetadata: {name: s}\nspec: {source: {persistentVolumeClaimName: p}}\n"
	writeFile(t, filepath.Join(dir, "a.yaml"), doc+"---\n"+doc)
	var out, errOut bytes.Buffer
	if code := run("snapctl", []string{"validate", dir}, &out, &errOut); code != 1 {
		t.Fatalf("exit %d\n%s", code, out.String())
	}
	want := filepath.Join(dir, "a.yaml") + ":2: VolumeSnapshot default/s: DENIED: VolumeSnapshot \"default/s\" is defined twice"
	if !strings.Contains(out.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, out.String())
	}
}

func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "bad.yaml"), "apiVersion: snapshot.storage.k8s.io/v1\nkind: VolumeSnapshot\nspecc: {}\n")
	for name, args := range map[string][]string{
		"no path":        {"validate"},
		"bad format":     {"validate", "-o", "yaml", dir},
		"unknown field":  {"validate", dir},
		"bad kubeconfig": {"validate", "--kubeconfig", filepath.Join(dir, "none"), "../../examples"},
	} {
		var out, errOut bytes.Buffer
		if code := run("snapctl", args, &out, &errOut); code != 2 {
			t.Errorf("%s: exit %d, want 2\n%s%s", name, code, out.String(), errOut.String())
		}
	}
}
