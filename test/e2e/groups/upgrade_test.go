package groups

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// TestGroupFromV1beta1DeletesWithItsMembers: a group content that carries
// no member list in its status (as objects written by a v1beta1 controller,
// whose volumeSnapshotHandlePairList the newer versions do not have) is
// deleted with DeleteVolumeGroupSnapshot naming every member: the CSI side
// rebuilds the list from the member contents.
func TestGroupFromV1beta1DeletesWithItsMembers(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, framework.ScenarioOptions{ClaimSizes: dbSizes})
	dbClaims(t, w)
	w.Group(t, "db", dbSelector)
	g := w.WaitGroupReady(t, "db", 60*time.Second)
	name := *g.Status.BoundVolumeGroupSnapshotContentName
	contents := w.Env.Snap.GroupsnapshotV1().VolumeGroupSnapshotContents()
	if _, err := contents.Patch(ctx, name, types.MergePatchType,
		[]byte(`{"status":{"volumeSnapshotInfoList":null}}`), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	if c, err := contents.Get(ctx, name, metav1.GetOptions{}); err != nil || len(c.Status.VolumeSnapshotInfoList) != 0 {
		t.Fatalf("member list not removed (%v): %s", err, framework.JSON(c.Status))
	}
	w.DeleteGroup(t, "db")
	w.WaitGroupGone(t, "db")
	w.NothingLeft(t)
	w.groupDeletesNamedTheirMembers(t, 3)
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// TestCRDCheckReportsStoredVersionsThatBlockAnUpgrade: snapctl crd-check
// passes on the CRDs the chart installs, warns when an older version is
// still stored, and blocks (exit 1, with the fix) when the next CRDs lack a
// stored version.
func TestCRDCheckReportsStoredVersionsThatBlockAnUpgrade(t *testing.T) {
	ctx := context.Background()
	env := framework.Shared(t)
	bin, err := framework.OwnBinary("./cmd/snapctl")
	if err != nil {
		t.Fatal(err)
	}
	check := func(dir string) (string, int) {
		t.Helper()
		out, err := exec.Command(bin, "crd-check", "--crds", dir, "--kubeconfig", env.Kubeconfig).CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	if out, code := check(framework.CRDDir()); code != 0 || !strings.Contains(out, "0 findings") {
		t.Fatalf("the chart's own CRDs: exit %d:\n%s", code, out)
	}

	// A cluster whose group contents were once stored at v1beta1.
	const crd = "volumegroupsnapshotcontents.groupsnapshot.storage.k8s.io"
	crds := env.Dynamic.Resource(crdGVR)
	setStored := func(versions string) {
		t.Helper()
		if _, err := crds.Patch(ctx, crd, types.MergePatchType,
			[]byte(`{"status":{"storedVersions":`+versions+`}}`), metav1.PatchOptions{}, "status"); err != nil {
			t.Fatal(err)
		}
	}
	setStored(`["v1beta1","v1beta2"]`)
	t.Cleanup(func() { setStored(`["v1beta2"]`) })
	if out, code := check(framework.CRDDir()); code != 0 || !strings.Contains(out, "warning: "+crd) || !strings.Contains(out, "v1beta1") {
		t.Fatalf("an older stored version: exit %d:\n%s", code, out)
	}

	// The next CRDs drop v1beta1.
	next := t.TempDir()
	var obj map[string]any
	if err := framework.ReadYAML(filepath.Join(framework.CRDDir(), "groupsnapshot.storage.k8s.io_volumegroupsnapshotcontents.yaml"), &obj); err != nil {
		t.Fatal(err)
	}
	spec := obj["spec"].(map[string]any)
	var kept []any
	for _, v := range spec["versions"].([]any) {
		if v.(map[string]any)["name"] != "v1beta1" {
			kept = append(kept, v)
		}
	}
	spec["versions"] = kept
	out, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(next, "contents.yaml"), out, 0o644); err != nil {
		t.Fatal(err)
	}
	report, code := check(next)
	if code != 1 {
		t.Fatalf("a stored version the next CRD lacks: exit %d, want 1:\n%s", code, report)
	}
	for _, want := range []string{"blocking: " + crd, "v1beta1", "kubectl patch crd " + crd} {
		if !strings.Contains(report, want) {
			t.Errorf("report does not say %q:\n%s", want, report)
		}
	}
}
