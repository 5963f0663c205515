package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestExamplesAreValid(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run("snapctl", []string{"validate", "../../examples/00-class.yaml", "../../examples/10-volume.yaml", "../../examples/20-snapshot.yaml"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errOut.String())
	}
}

func TestASecondDefaultClassIsDeniedWithTheFix(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run("snapctl", []string{"validate", "../../examples/00-class.yaml", "../../examples/invalid/invalid-second-default-class.yaml"}, &out, &errOut)
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", code, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), `remove the annotation from`) {
		t.Fatalf("no fix in the message:\n%s", out.String())
	}
}

func TestOtherKindsAreSkippedAndBadInputIsUsage(t *testing.T) {
	dir := t.TempDir()
	doc := "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\n"
	writeFile(t, filepath.Join(dir, "d.yaml"), doc)
	var out, errOut bytes.Buffer
	if code := run("snapctl", []string{"validate", dir}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "1 documents of other kinds ignored") {
		t.Fatalf("exit %d\n%s", code, out.String())
	}
	if code := run("snapctl", []string{"lint"}, &out, &errOut); code != 2 {
		t.Fatalf("unknown verb: exit %d, want 2", code)
	}
	if code := run("snapctl", []string{"validate", filepath.Join(dir, "missing.yaml")}, &out, &errOut); code != 2 {
		t.Fatalf("missing file: exit %d, want 2", code)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestProgName(t *testing.T) {
	for arg0, want := range map[string]string{
		"kubectl-snapkeeper":          "kubectl snapkeeper",
		"krew/bin/kubectl-snapkeeper": "kubectl snapkeeper",
		"snapctl":                     "snapctl",
		"bin/snapctl":                 "snapctl",
		"./snapctl-linux-amd64":       "snapctl",
		"kubectl_snapkeeper":          "snapctl", // kubectl finds plugins by the kubectl- prefix
		"bin/kubectl-snapkeeper-v1.2": "snapctl",
	} {
		if got := progName(arg0); got != want {
			t.Errorf("progName(%q) = %q, want %q", arg0, got, want)
		}
	}
}

// As a kubectl plugin every usage, help and error text names the command
// `kubectl snapkeeper`; as snapctl nothing changes.
func TestPluginNameInHelpAndErrors(t *testing.T) {
	cases := []struct {
		args   []string
		code   int
		stdout bool // the text is on stdout, else stderr
		want   string
	}{
		{[]string{"--help"}, 0, true, "usage: %[1]s validate"},
		{[]string{"help"}, 0, true, "       %[1]s selftest webhook"},
		{[]string{"-h"}, 0, true, "       %[1]s doctor"},
		{nil, 2, false, "usage: %[1]s validate"},
		{[]string{"lint"}, 2, false, "       %[1]s crd-check"},
		{[]string{"doctor", "-o", "yaml"}, 2, false, "%[1]s doctor: -o must be text or json"},
		{[]string{"doctor", "a", "b"}, 2, false, "usage: %[1]s doctor [-n NAMESPACE]"},
		{[]string{"doctor", "-h"}, 0, false, "Usage of %[1]s doctor:"},
		{[]string{"validate"}, 2, false, "%[1]s validate: no PATH given"},
		{[]string{"crd-check"}, 2, false, "usage: %[1]s validate"},
		{[]string{"help"}, 0, true, "       %[1]s migrate-storage [--dry-run]"},
		{[]string{"migrate-storage", "--workers", "0"}, 2, false, "%[1]s migrate-storage: --workers must be at least 1"},
		{[]string{"migrate-storage", "extra"}, 2, false, "usage: %[1]s migrate-storage [--dry-run]"},
		{[]string{"migrate-storage", "-h"}, 0, false, "Usage of %[1]s migrate-storage:"},
		{[]string{"--version"}, 0, true, "%[1]s "},
		{[]string{"help"}, 0, true, "       %[1]s schedules [-n NAMESPACE | -A]"},
		{[]string{"schedules", "a", "b"}, 2, false, "usage: %[1]s schedules [-n NAMESPACE | -A]"},
		{[]string{"schedules", "-h"}, 0, false, "Usage of %[1]s schedules:"},
		{[]string{"help"}, 0, true, "       %[1]s convert-snapscheduler [-o yaml]"},
		{[]string{"convert-snapscheduler", "-o", "json"}, 2, false, "%[1]s convert-snapscheduler: -o must be yaml"},
		{[]string{"convert-snapscheduler", "-h"}, 0, false, "Usage of %[1]s convert-snapscheduler:"},
	}
	for _, prog := range []string{"kubectl snapkeeper", "snapctl"} {
		for _, c := range cases {
			var out, errOut bytes.Buffer
			code := run(prog, c.args, &out, &errOut)
			text, other := errOut.String(), out.String()
			if c.stdout {
				text, other = other, text
			}
			want := fmt.Sprintf(c.want, prog)
			if code != c.code || !strings.HasPrefix(text, want) && !strings.Contains(text, "\n"+want) {
				t.Errorf("%s %v: exit %d (want %d), output %q, want a line starting %q", prog, c.args, code, c.code, text, want)
			}
			if prog != "snapctl" && strings.Contains(text+other, "snapctl") {
				t.Errorf("%s %v names snapctl: %q", prog, c.args, text+other)
			}
		}
	}
}
