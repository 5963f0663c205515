package faults

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

var snapshotGVR = schema.GroupVersionResource{Group: snapshot.GroupName, Version: "v1", Resource: "volumesnapshots"}

// TestHostileValues hands the controller absurd values, with the real CRDs:
//   - the largest size a driver can report (size_bytes = 2^63-1);
//   - a content status rewritten with creationTime at the ends of int64
//     (years 2262 and 1677), a negative restoreSize and one beyond int64
//     (which the CRD's schema may refuse: the test logs what it did);
//   - unknown fields in a VolumeSnapshot (pruned by the API server);
//   - a pre-provisioned content with a 4 KiB snapshotHandle the driver does
//     not know.
//
// A negative size_bytes from the driver is covered by the CSI side's unit
// test (TestHostileContents): the mock driver refuses to send one.
func TestHostileValues(t *testing.T) {
	newRand(t)
	s := framework.NewScenario(t, framework.ScenarioOptions{DriverPrefix: "hostile", ClaimSizes: map[string]int64{"huge": math.MaxInt64}})
	w := newWorld(s)
	ctx := context.Background()
	env := s.Env
	for _, c := range []string{"good", "huge"} {
		s.PVC(t, c)
		if err := w.create(ctx, c, c); err != nil {
			t.Fatal(err)
		}
	}
	createWithUnknownFields(t, w, "unknown", "good")

	handle := strings.Repeat("h", 4096)
	big := "hostile-4k-" + s.NS
	s.PreProvisionedContent(t, big, handle, "big-handle", snapv1.VolumeSnapshotContentDelete)
	pre := "big-handle"
	env.CreateSnapshot(t, &snapv1.VolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: s.NS, Name: pre},
		Spec: snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{VolumeSnapshotContentName: &big}, VolumeSnapshotClassName: &s.Class}})

	vs := s.WaitReady(t, "huge", time.Minute)
	if got := vs.Status.RestoreSize; got == nil || got.Value() != math.MaxInt64 {
		t.Errorf("restoreSize of the largest driver size = %v, want %d", got, int64(math.MaxInt64))
	}
	hugeContent := *vs.Status.BoundVolumeSnapshotContentName
	before := framework.JSON(vs.Status)
	for _, st := range []struct {
		what  string
		patch string
	}{
		{"creationTime 2^63-1 ns (2262)", fmt.Sprintf(`{"status":{"creationTime":%d}}`, int64(math.MaxInt64))},
		{"creationTime -2^63 ns (1677)", fmt.Sprintf(`{"status":{"creationTime":%d}}`, int64(math.MinInt64))},
		{"restoreSize -1", `{"status":{"restoreSize":-1}}`},
		{"restoreSize 10^20 (beyond int64)", `{"status":{"restoreSize":100000000000000000000}}`},
	} {
		_, err := env.Snap.SnapshotV1().VolumeSnapshotContents().Patch(ctx, hugeContent, types.MergePatchType, []byte(st.patch), metav1.PatchOptions{}, "status")
		if err != nil {
			t.Logf("content status %s: refused by the API server: %v", st.what, err)
			continue
		}
		framework.Eventually(t, time.Minute, "the snapshot mirroring "+st.what, func() (bool, error) {
			now := framework.JSON(s.GetSnapshot(t, "huge").Status)
			return now != before, nil
		})
		before = framework.JSON(s.GetSnapshot(t, "huge").Status)
		t.Logf("content status %s: stored; the snapshot's status: %s", st.what, before)
	}

	msg := expectContentError(t, env, big, time.Minute, "does not know snapshot")
	expectSnapshotError(t, env, s.NS, pre, time.Minute, "does not know snapshot")
	expectWarning(t, env, "default", big, snapshot.ReasonCheckFailed)
	writes := expectSettled(t, env, time.Minute, objRef{s.NS, pre}, objRef{"", big}, objRef{s.NS, "good"}, objRef{s.NS, "unknown"},
		objRef{s.NS, "huge"}, objRef{"", hugeContent})
	t.Logf("4 KiB handle: content error of %d characters; settled: %s", len(msg), settledSummary(writes))

	s.DeleteSnapshot(t, pre)
	s.WaitSnapshotGone(t, pre)
	s.WaitContentGone(t, big)
	if n := s.Drv.Calls(t).Count("DeleteSnapshot", "OK"); n == 0 {
		t.Errorf("the 4 KiB handle was never passed to DeleteSnapshot")
	}
	w.checkInvariants(t, time.Minute)
}

// createWithUnknownFields creates VolumeSnapshot name of claim with fields
// no version of the CRD knows, in spec, status and at the top; the API
// server prunes them and the snapshot must become ready like any other.
func createWithUnknownFields(t *testing.T, w *world, name, claim string) {
	t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": snapshot.GroupName + "/v1", "kind": snapshot.KindSnapshot,
		"metadata": map[string]any{"name": name, "namespace": w.s.NS},
		"spec": map[string]any{
			"source":                  map[string]any{"persistentVolumeClaimName": claim, "fromTheFuture": "x"},
			"volumeSnapshotClassName": w.s.Class,
			"retention":               map[string]any{"days": 7},
		},
		"status":   map[string]any{"readyToUse": true, "bogus": 1},
		"topLevel": []any{"y"},
	}}
	out, err := w.s.Env.Dynamic.Resource(snapshotGVR).Namespace(w.s.NS).Create(context.Background(), obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create snapshot with unknown fields: %v", err)
	}
	spec, _, _ := unstructured.NestedMap(out.Object, "spec")
	_, kept := spec["retention"]
	t.Logf("snapshot with unknown fields stored; spec now %v (unknown field kept: %v), status %v", spec, kept, out.Object["status"])
	w.created(name, out.GetUID())
}
