package faults

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

// laxKeys are the schema keys stripCRD removes: the CEL rules, enums and
// bounds that the CRDs of older releases did not have.
var laxKeys = []string{"x-kubernetes-validations", "enum", "minimum", "maximum", "maxLength", "oneOf", "anyOf"}

// TestHostileObjectsStoredBeforeCRDRules stores, through copies of the
// snapshot CRDs without their rules, objects that those rules refuse today,
// then puts the real CRDs back (as an upgrade of the CRDs does) and starts
// the controller. As the community controllers do, each such object ends
// with a status error (VolumeSnapshot: SnapshotValidationError, content:
// ContentValidationError) that names the fields and the fix; no CSI call is
// made for it, nothing is written again, the good snapshot next to them
// becomes ready, and each can still be deleted. A ready content whose
// status says restoreSize -1 (the real schema's minimum is 0) is bound, and
// its snapshot becomes ready with restoreSize -1: the binder mirrors the
// content's status as it is, as the community controller does.
func TestHostileObjectsStoredBeforeCRDRules(t *testing.T) {
	newRand(t)
	s := framework.NewScenario(t, framework.ScenarioOptions{DriverPrefix: "hostile", NoController: true})
	w := newWorld(s)
	ctx := context.Background()
	env := s.Env
	installLaxCRDs(t, env)

	pvc := "data"
	s.PVC(t, pvc)
	refs := storeRuleBreakers(t, s, pvc)
	negContent := "hostile-neg-size-" + s.NS

	if err := framework.InstallCRDs(ctx, env.Dynamic, framework.CRDDir()); err != nil {
		t.Fatalf("putting the real CRDs back: %v", err)
	}
	s.Ctrl = s.StartController(t, s.Args...)
	w.addController(s.Ctrl)
	if err := w.create(ctx, "good", pvc); err != nil {
		t.Fatal(err)
	}

	for _, name := range []string{"both-sources", "no-source"} {
		expectSnapshotError(t, env, s.NS, name, time.Minute, "exactly one must be set", "delete it and create")
		expectWarning(t, env, s.NS, name, snapshot.ReasonSnapshotValidationError)
	}
	wants := map[string][]string{"both-handles": {"sets both spec.source.volumeHandle and spec.source.snapshotHandle"},
		"no-handle": {"sets neither"}, "no-ref": {"spec.volumeSnapshotRef without name or namespace"}}
	for suffix, parts := range wants {
		name := "hostile-" + suffix + "-" + s.NS
		msg := expectContentError(t, env, name, time.Minute, append(parts, "delete the content")...)
		expectWarning(t, env, "default", name, snapshot.ReasonContentValidationError)
		t.Logf("content %s: %q", suffix, msg)
	}
	s.WaitReady(t, "good", time.Minute)
	neg := s.WaitReady(t, "neg-size", time.Minute)
	t.Logf("snapshot of a content with restoreSize -1: status %s", framework.JSON(neg.Status))
	writes := expectSettled(t, env, 2*time.Minute, refs...)
	t.Logf("settled: %s", settledSummary(writes))
	if calls := s.Drv.CallLog(t, 0); touchesHandle(calls, "no-such-handle") || createdNames(calls) != 1 {
		t.Errorf("CSI calls about the hostile objects: %+v", calls.Entries)
	}

	for _, name := range []string{"both-sources", "no-source", "neg-size"} {
		s.DeleteSnapshot(t, name)
		s.WaitSnapshotGone(t, name)
	}
	for _, r := range refs {
		if r.ns == "" && r.name != negContent { // the snapshot's deletion took it
			s.DeleteContent(t, r.name)
			s.WaitContentGone(t, r.name)
		}
	}
	w.checkInvariants(t, time.Minute)
}

// storeRuleBreakers stores, through the lax CRDs, the snapshots and
// contents the real CRDs' rules refuse, and the content with restoreSize
// -1 with its snapshot; it returns them all.
func storeRuleBreakers(t *testing.T, s *framework.Scenario, pvc string) []objRef {
	t.Helper()
	ctx := context.Background()
	env := s.Env
	snaps := env.Snap.SnapshotV1()
	bad := map[string]*snapv1.VolumeSnapshot{
		"both-sources": {Spec: snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{
			PersistentVolumeClaimName: &pvc, VolumeSnapshotContentName: ptr.To("some-content")}, VolumeSnapshotClassName: &s.Class}},
		"no-source": {Spec: snapv1.VolumeSnapshotSpec{VolumeSnapshotClassName: &s.Class}},
	}
	var refs []objRef
	// Whatever happens, no other test of the package meets these objects.
	t.Cleanup(func() { forceRemove(env, s.NS, refs) })
	for name, vs := range bad {
		vs.Name, vs.Namespace = name, s.NS
		if _, err := snaps.VolumeSnapshots(s.NS).Create(ctx, vs, metav1.CreateOptions{}); err != nil {
			t.Fatalf("store %s through the lax CRD: %v", name, err)
		}
		refs = append(refs, objRef{s.NS, name})
	}
	handle, volume := "no-such-handle", "vol-"+s.NS+"-"+pvc
	contents := map[string]snapv1.VolumeSnapshotContentSpec{
		"both-handles": {Source: snapv1.VolumeSnapshotContentSource{VolumeHandle: &volume, SnapshotHandle: &handle},
			VolumeSnapshotRef: corev1.ObjectReference{Namespace: s.NS, Name: "nobody"}},
		"no-handle": {VolumeSnapshotRef: corev1.ObjectReference{Namespace: s.NS, Name: "nobody"}},
		"no-ref":    {Source: snapv1.VolumeSnapshotContentSource{SnapshotHandle: &handle}},
	}
	for suffix, spec := range contents {
		spec.Driver, spec.DeletionPolicy = s.Drv.Name, snapv1.VolumeSnapshotContentDelete
		name := "hostile-" + suffix + "-" + s.NS
		if _, err := snaps.VolumeSnapshotContents().Create(ctx, &snapv1.VolumeSnapshotContent{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("store content %s through the lax CRD: %v", name, err)
		}
		refs = append(refs, objRef{"", name})
	}

	// A ready pre-provisioned content whose status says restoreSize -1,
	// which the real schema refuses (minimum 0), and its snapshot.
	negContent := "hostile-neg-size-" + s.NS
	if _, err := snaps.VolumeSnapshotContents().Create(ctx, &snapv1.VolumeSnapshotContent{ObjectMeta: metav1.ObjectMeta{Name: negContent},
		Spec: snapv1.VolumeSnapshotContentSpec{Driver: s.Drv.Name, DeletionPolicy: snapv1.VolumeSnapshotContentDelete,
			Source:            snapv1.VolumeSnapshotContentSource{SnapshotHandle: ptr.To("hostile-neg")},
			VolumeSnapshotRef: corev1.ObjectReference{Namespace: s.NS, Name: "neg-size"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	negStatus := []byte(`{"status":{"snapshotHandle":"hostile-neg","readyToUse":true,"restoreSize":-1,"creationTime":1}}`)
	if _, err := snaps.VolumeSnapshotContents().Patch(ctx, negContent, types.MergePatchType, negStatus, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatalf("store a negative restoreSize through the lax CRD: %v", err)
	}
	env.CreateSnapshot(t, &snapv1.VolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: s.NS, Name: "neg-size"},
		Spec: snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{VolumeSnapshotContentName: &negContent}}})
	refs = append(refs, objRef{"", negContent}, objRef{s.NS, "neg-size"})
	return refs

}

// installLaxCRDs applies the snapshot CRDs without laxKeys, and puts the
// real ones back when the test ends, whatever happens in between.
func installLaxCRDs(t *testing.T, env *framework.Env) {
	t.Helper()
	t.Cleanup(func() {
		if err := framework.InstallCRDs(context.Background(), env.Dynamic, framework.CRDDir()); err != nil {
			t.Errorf("putting the real CRDs back: %v", err)
		}
	})
	dir := t.TempDir()
	files, err := filepath.Glob(filepath.Join(framework.CRDDir(), snapshot.GroupName+"_*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no snapshot CRDs in %s: %v", framework.CRDDir(), err)
	}
	stripped := 0
	for _, f := range files {
		var obj map[string]any
		if err := framework.ReadYAML(f, &obj); err != nil {
			t.Fatal(err)
		}
		stripped += stripRules(obj)
		out, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), out, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := framework.InstallCRDs(context.Background(), env.Dynamic, dir); err != nil {
		t.Fatalf("installing the lax CRDs: %v", err)
	}
	t.Logf("lax snapshot CRDs installed: %d rules, enums and bounds stripped", stripped)
}

// stripRules removes laxKeys from a schema, everywhere, and counts them.
func stripRules(v any) int {
	n := 0
	switch x := v.(type) {
	case map[string]any:
		for _, k := range laxKeys {
			if _, ok := x[k]; ok {
				delete(x, k)
				n++
			}
		}
		for _, c := range x {
			n += stripRules(c)
		}
	case []any:
		for _, c := range x {
			n += stripRules(c)
		}
	}
	return n
}

// forceRemove deletes the objects, finalizers and all.
func forceRemove(env *framework.Env, ns string, refs []objRef) {
	ctx := context.Background()
	unfinalize := []byte(`{"metadata":{"finalizers":null}}`)
	for _, r := range refs {
		if r.ns == "" {
			_, _ = env.Snap.SnapshotV1().VolumeSnapshotContents().Patch(ctx, r.name, types.MergePatchType, unfinalize, metav1.PatchOptions{})
			_ = env.Snap.SnapshotV1().VolumeSnapshotContents().Delete(ctx, r.name, metav1.DeleteOptions{})
			continue
		}
		_, _ = env.Snap.SnapshotV1().VolumeSnapshots(ns).Patch(ctx, r.name, types.MergePatchType, unfinalize, metav1.PatchOptions{})
		_ = env.Snap.SnapshotV1().VolumeSnapshots(ns).Delete(ctx, r.name, metav1.DeleteOptions{})
	}
}

// touchesHandle reports whether a driver call was about handle.
func touchesHandle(log framework.CallLog, handle string) bool {
	for _, e := range log.Entries {
		if e.SnapshotID == handle || strings.Contains(e.Name, handle) {
			return true
		}
	}
	return false
}

// createdNames counts the successful CreateSnapshot calls of distinct names.
func createdNames(log framework.CallLog) int {
	names := map[string]bool{}
	for _, e := range log.Entries {
		if e.Method == "CreateSnapshot" && e.Code == "OK" {
			names[e.Name] = true
		}
	}
	return len(names)
}
