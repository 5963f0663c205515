package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/snapkeeper/snapkeeper/pkg/apis/snapkeeper/v1alpha1"
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

// The doctor reads the schedules and explains them with the rest; a
// schedule with two findings counts as one stuck object.
func TestDoctorExplainsSchedules(t *testing.T) {
	s := v1alpha1.SnapshotSchedule{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "shop", CreationTimestamp: metav1.NewTime(time.Now().Add(-time.Hour))},
		Spec: v1alpha1.SnapshotScheduleSpec{Schedule: "@hourly", ClaimSelector: metav1.LabelSelector{MatchLabels: map[string]string{"backup": "hourly"}},
			Retention: v1alpha1.RetentionPolicy{KeepLast: ptr.To(int32(3))}}}
	data := corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "shop", Labels: map[string]string{"app": "db"}}}
	api := &clusterAPI{lists: map[string][]any{
		"/apis/snapshot.storage.k8s.io/v1/namespaces/shop/volumesnapshots": {},
		"/apis/snapshot.storage.k8s.io/v1/volumesnapshotcontents":          {},
		"/apis/snapshot.storage.k8s.io/v1/volumesnapshotclasses":           {},
		"/api/v1/namespaces/shop/persistentvolumeclaims":                   {data},
		"/api/v1/persistentvolumes":                                        {},
		"/apis/coordination.k8s.io/v1/leases":                              {},
		"/apis/snapkeeper.io/v1alpha1/namespaces/shop/snapshotschedules":   {s},
		"/api/v1/namespaces/shop/events":                                   {},
	}}
	var out, errOut bytes.Buffer
	code := run("snapctl", []string{"doctor", "-n", "shop", "--kubeconfig", serve(t, api, "shop")}, &out, &errOut)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if code != 1 || len(lines) != 3 || lines[2] != "1 stuck objects" ||
		!strings.HasPrefix(lines[0], `SnapshotSchedule shop/db [no-claims-selected] spec.claimSelector "backup=hourly" selects no PersistentVolumeClaim in namespace shop; labels of the namespace's claims (1): app=db (1)`) ||
		!strings.HasPrefix(lines[1], "SnapshotSchedule shop/db [schedules-not-running] no status ") {
		t.Errorf("exit %d, stderr %q, output\n%s", code, errOut.String(), out.String())
	}
}
