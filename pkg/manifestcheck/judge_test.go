package manifestcheck

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/pkg/validation"
	vt "github.com/snapkeeper/snapkeeper/pkg/validation/validationtest"
)

// fakeWorld is a cluster held in memory.
type fakeWorld struct{ *validation.StaticLookup }

func (f fakeWorld) Live(obj metav1.Object) (metav1.Object, error) {
	for _, c := range f.Contents {
		if c.Name == obj.GetName() && kindOf(obj) == "VolumeSnapshotContent" {
			return c, nil
		}
	}
	return nil, nil
}

func judge(t *testing.T, world World, objs ...metav1.Object) []Result {
	t.Helper()
	var in []Object
	for i, o := range objs {
		in = append(in, Object{File: "set.yaml", Document: i + 1, Obj: o})
	}
	return Judge(in, Config{World: world})
}

func TestRestoreFromASnapshotOfTheCluster(t *testing.T) {
	live := &validation.StaticLookup{}
	if err := live.Add(vt.NewSnapshot("ns", "nightly", vt.FromPVC("db"), vt.Ready("5Gi", "c1"))); err != nil {
		t.Fatal(err)
	}
	pvc := vt.NewPVC("ns", "restore", vt.RestoresFrom("nightly"), vt.WithSize("1Gi"))
	r := judge(t, fakeWorld{live}, pvc)
	if len(r) != 1 || r[0].Allowed || !strings.Contains(r[0].Errors[0].Message, "5Gi") {
		t.Fatalf("a restore smaller than the live snapshot: %+v", r)
	}
	// The set wins: it redefines the snapshot (not ready, no size yet).
	r = judge(t, fakeWorld{live}, vt.NewPVC("ns", "restore", vt.RestoresFrom("nightly"), vt.WithSize("1Gi")),
		vt.NewSnapshot("ns", "nightly", vt.FromPVC("db")))
	if !r[0].Allowed || len(r[0].Warnings) == 0 {
		t.Fatalf("the set's snapshot should win: %+v", r[0])
	}
	// Offline, the snapshot is unknown: a warning only.
	if r := judge(t, nil, vt.NewPVC("ns", "restore", vt.RestoresFrom("nightly"))); !r[0].Allowed {
		t.Fatalf("offline: %+v", r)
	}
}

func TestAnObjectOfTheClusterIsAnUpdate(t *testing.T) {
	live := &validation.StaticLookup{}
	if err := live.Add(vt.NewContent("c", vt.WithSnapshotHandle("h"), vt.BoundTo("ns", "s", ""))); err != nil {
		t.Fatal(err)
	}
	r := judge(t, fakeWorld{live}, vt.NewContent("c", vt.WithSnapshotHandle("h"), vt.BoundTo("ns", "other", "")))
	if r[0].Operation != "UPDATE" || r[0].Allowed {
		t.Fatalf("moving the live content's volumeSnapshotRef: %+v", r[0])
	}
}

func TestNamespaceDefaultAndKinds(t *testing.T) {
	r := judge(t, nil, vt.NewSnapshot("", "s", vt.FromPVC("p")), vt.NewPV("pv", "d"))
	if len(r) != 1 || r[0].Namespace != "default" || r[0].Kind != "VolumeSnapshot" {
		t.Fatalf("%+v", r)
	}
}

func TestARestoreFromADeniedSnapshotOfTheSetWarns(t *testing.T) {
	r := judge(t, nil, vt.NewSnapshot("ns", "s"), vt.NewPVC("ns", "restore", vt.RestoresFrom("s")))
	if r[0].Allowed || !r[1].Allowed || !strings.Contains(strings.Join(r[1].Warnings, "\n"), "is denied") {
		t.Fatalf("%+v", r)
	}
}
