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

// scheduleWorld is a default class and a claim bound to a volume of its
// driver, as a GitOps repository might hold them beside its schedules.
const scheduleWorld = `apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshotClass
metadata:
  name: standard
  annotations: {snapshot.storage.kubernetes.io/is-default-class: "true"}
driver: hostpath.csi.k8s.io
deletionPolicy: Delete
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-data}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  csi: {driver: hostpath.csi.k8s.io, volumeHandle: h1}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, labels: {app: db}}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
  volumeName: pv-data
status: {phase: Bound}
`

// SnapshotSchedules are judged offline by the webhook's rules, against the
// classes and claims of the other files.
func TestSchedules(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "world.yaml"), scheduleWorld)
	schedule := func(name, spec string) string {
		return "---\napiVersion: snapkeeper.io/v1alpha1\nkind: SnapshotSchedule\nmetadata: {name: " + name + "}\nspec:\n" +
			"  claimSelector: {matchLabels: {app: db}}\n  retention: {keepLast: 2}\n" + spec
	}
	writeFile(t, filepath.Join(dir, "schedules.yaml"), schedule("nightly", "  schedule: \"0 3 * * *\"\n  timeZone: Europe/Berlin\n")+
		schedule("bad-cron", "  schedule: every night\n")+
		schedule("missing-class", "  schedule: \"@daily\"\n  snapshotTemplate: {volumeSnapshotClassName: fast}\n")+
		schedule("group", "  schedule: \"@daily\"\n  groupSnapshot: {}\n")+
		"---\napiVersion: snapkeeper.io/v1alpha1\nkind: SnapshotSchedule\nmetadata: {name: later}\n"+
		"spec: {schedule: \"@hourly\", claimSelector: {matchLabels: {app: web}}, retention: {maxAge: 7d}}\n")
	results, code, stderr := runJSON(t, dir)
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s", code, stderr)
	}
	want := map[string]struct{ field, message, warning string }{
		"nightly":       {},
		"bad-cron":      {field: "spec.schedule", message: `SnapshotSchedule "default/bad-cron" has an invalid spec.schedule: "every night"`},
		"missing-class": {field: "spec.snapshotTemplate.volumeSnapshotClassName", message: `create the class first, or name an existing one (existing: "standard")`},
		"group":         {field: "spec.groupSnapshot.volumeGroupSnapshotClassName", message: `is in group mode without a group class`},
		"later":         {warning: `spec.claimSelector "app=web" matches no PersistentVolumeClaim in namespace "default" yet`},
	}
	seen := 0
	for _, r := range results {
		if r.Kind != "SnapshotSchedule" {
			if !r.Allowed {
				t.Errorf("%s %s denied: %+v", r.Kind, r.Name, r.Errors)
			}
			continue
		}
		seen++
		w, ok := want[r.Name]
		switch {
		case !ok:
			t.Errorf("unexpected schedule %s", r.Name)
		case r.Namespace != "default" || r.Operation != "CREATE":
			t.Errorf("%s: namespace %q, operation %s", r.Name, r.Namespace, r.Operation)
		case w.field == "" && !r.Allowed:
			t.Errorf("%s denied: %+v", r.Name, r.Errors)
		case w.field != "" && (r.Allowed || r.Errors[0].Field != w.field || !strings.Contains(r.Errors[0].Message, w.message)):
			t.Errorf("%s: allowed %v, errors %+v; want a denial on %s containing %q", r.Name, r.Allowed, r.Errors, w.field, w.message)
		}
		if got := strings.Join(r.Warnings, "\n"); (w.warning == "") != (got == "") || !strings.Contains(got, w.warning) {
			t.Errorf("%s: warnings %q, want %q", r.Name, r.Warnings, w.warning)
		}
	}
	if seen != len(want) {
		t.Errorf("%d schedules judged, want %d", seen, len(want))
	}
}
