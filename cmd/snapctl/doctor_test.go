package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/snapkeeper/snapkeeper/pkg/doctor"
)

func TestParseDoctorFlags(t *testing.T) {
	var stderr bytes.Buffer
	o, err := parseDoctorFlags("snapctl", []string{"snap", "-n", "team", "-o", "json"}, &stderr)
	if err != nil || o.name != "snap" || o.namespace != "team" || o.output != "json" {
		t.Fatalf("parse = %+v, %v", o, err)
	}
	o, err = parseDoctorFlags("snapctl", []string{"--namespace=team", "snap"}, &stderr)
	if err != nil || o.name != "snap" || o.namespace != "team" || o.output != "text" {
		t.Fatalf("parse = %+v, %v", o, err)
	}
	for _, bad := range [][]string{{"a", "b"}, {"-o", "yaml"}, {"--nope"}} {
		if _, err := parseDoctorFlags("snapctl", bad, &stderr); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

func TestDoctorUsageAndOutput(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run("snapctl", []string{"doctor", "-o", "yaml"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), doctorUsage("snapctl")) {
		t.Errorf("exit %d, stderr %q", code, errOut.String())
	}
	out.Reset()
	f := doctor.Finding{Kind: "VolumeSnapshot", Namespace: "ns", Name: "s", Code: doctor.PVCMissing, Reason: "r", Fix: "f"}
	if err := printFindings(&out, "text", []doctor.Finding{f}, false); err != nil {
		t.Fatal(err)
	}
	if want := "VolumeSnapshot ns/s [pvc-missing] r; fix: f\n"; !strings.HasPrefix(out.String(), want) || !strings.Contains(out.String(), "Leases could not be read") {
		t.Errorf("output = %q", out.String())
	}
	out.Reset()
	if err := printFindings(&out, "json", nil, true); err != nil || !strings.Contains(out.String(), `"findings": []`) {
		t.Errorf("json = %q, %v", out.String(), err)
	}
}
