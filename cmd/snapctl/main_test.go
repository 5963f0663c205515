package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestExamplesAreValid(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"validate", "../../examples/00-class.yaml", "../../examples/10-volume.yaml", "../../examples/20-snapshot.yaml"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errOut.String())
	}
}

func TestASecondDefaultClassIsDeniedWithTheFix(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run([]string{"validate", "../../examples/00-class.yaml", "../../examples/invalid/invalid-second-default-class.yaml"}, &out, &errOut)
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
	if code := run([]string{"validate", dir}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "1 documents of other kinds ignored") {
		t.Fatalf("exit %d\n%s", code, out.String())
	}
	if code := run([]string{"lint"}, &out, &errOut); code != 2 {
		t.Fatalf("unknown verb: exit %d, want 2", code)
	}
	if code := run([]string{"validate", filepath.Join(dir, "missing.yaml")}, &out, &errOut); code != 2 {
		t.Fatalf("missing file: exit %d, want 2", code)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
