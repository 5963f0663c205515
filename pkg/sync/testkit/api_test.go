package testkit

import (
	"context"
	"errors"
	"slices"
	"testing"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
)

var ctx = context.Background()

func patch(api *API, name, body string, sub ...string) (*snapv1.VolumeSnapshotContent, error) {
	return api.Snap.SnapshotV1().VolumeSnapshotContents().Patch(ctx, name, types.MergePatchType, []byte(body), metav1.PatchOptions{}, sub...)
}

func TestResourceVersions(t *testing.T) {
	api := NewAPI(t, Content("c1"))
	got, err := patch(api, "c1", `{"metadata":{"resourceVersion":"1","finalizers":["a"]}}`)
	if err != nil || got.ResourceVersion != "101" || !slices.Equal(got.Finalizers, []string{"a"}) {
		t.Fatalf("patch with the current resourceVersion: %v, %+v", err, got)
	}
	if _, err := patch(api, "c1", `{"metadata":{"resourceVersion":"1","finalizers":[]}}`); !apierrors.IsConflict(err) {
		t.Errorf("patch with a stale resourceVersion: %v, want a conflict", err)
	}
	if _, err := patch(api, "c1", `{"metadata":{"labels":{"l":"v"}}}`); err != nil {
		t.Errorf("patch without a resourceVersion: %v", err)
	}

	pvc, _ := BoundClaim("pvc1")
	api = NewAPI(t, pvc)
	stale := pvc.DeepCopy()
	pvc.Finalizers = []string{"a"}
	if _, err := api.Kube.CoreV1().PersistentVolumeClaims(Namespace).Update(ctx, pvc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := api.Kube.CoreV1().PersistentVolumeClaims(Namespace).Update(ctx, stale, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("update of a stale copy: %v, want a conflict", err)
	}
	if got := api.Claim(Namespace, "pvc1"); !slices.Equal(got.Finalizers, []string{"a"}) || got.ResourceVersion != "101" {
		t.Errorf("claim after the updates: %+v", got.ObjectMeta)
	}
}

func TestStatusSubresource(t *testing.T) {
	api := NewAPI(t, Content("c1", Ready("h1")))
	if _, err := patch(api, "c1", `{"metadata":{"labels":{"l":"v"}},"status":{"readyToUse":false}}`, "status"); err != nil {
		t.Fatal(err)
	}
	got := api.Content("c1")
	if *got.Status.ReadyToUse || got.Labels != nil {
		t.Errorf("a status patch wrote labels %v, readyToUse %v; want only the status", got.Labels, *got.Status.ReadyToUse)
	}
	if _, err := patch(api, "c1", `{"metadata":{"labels":{"l":"v"}},"status":{"readyToUse":true}}`); err != nil {
		t.Fatal(err)
	}
	got = api.Content("c1")
	if *got.Status.ReadyToUse || got.Labels["l"] != "v" {
		t.Errorf("a patch of the object wrote readyToUse %v, labels %v; want only the labels", *got.Status.ReadyToUse, got.Labels)
	}
}

func TestFinalizersHoldDeletes(t *testing.T) {
	api := NewAPI(t, Content("held", Finalizers("a", "b")), Content("free", Finalizers()))
	contents := api.Snap.SnapshotV1().VolumeSnapshotContents()
	if err := contents.Delete(ctx, "held", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr.To(types.UID("other"))}}); !apierrors.IsConflict(err) {
		t.Errorf("delete of another UID: %v, want a conflict", err)
	}
	for _, name := range []string{"held", "free"} {
		if err := contents.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr.To(types.UID("uid-" + name))}}); err != nil {
			t.Fatal(err)
		}
	}
	if api.Content("free") != nil {
		t.Error("a content without finalizers outlived its delete")
	}
	held := api.Content("held")
	if held == nil || held.DeletionTimestamp == nil || !held.DeletionTimestamp.Time.Equal(Time) {
		t.Fatalf("a content with finalizers after its delete: %+v", held)
	}
	// The object's writes cannot clear the deletionTimestamp.
	if _, err := patch(api, "c1", `{"metadata":{"deletionTimestamp":null}}`); !apierrors.IsNotFound(err) {
		t.Errorf("patch of a missing content: %v, want not found", err)
	}
	if _, err := patch(api, "held", `{"metadata":{"deletionTimestamp":null,"finalizers":["b"]}}`); err != nil || api.Content("held").DeletionTimestamp == nil {
		t.Fatalf("patch of a deleting content: %v, %+v", err, api.Content("held"))
	}
	if _, err := patch(api, "held", `{"metadata":{"finalizers":null}}`); err != nil {
		t.Fatal(err)
	}
	if api.Content("held") != nil {
		t.Error("a deleting content outlived its last finalizer")
	}
}

func TestFaultsAndWrites(t *testing.T) {
	api := NewAPI(t, Content("c1"), Secret("ns", "creds", nil))
	boom := errors.New("boom")
	api.Inject(Fault{Verb: "patch", Resource: "volumesnapshotcontents", Subresource: "status", Err: boom, Times: 2},
		Fault{Verb: "get", Resource: "secrets", Err: boom})
	for range 2 {
		if _, err := patch(api, "c1", `{"status":{}}`, "status"); !errors.Is(err, boom) {
			t.Errorf("faulty status patch: %v", err)
		}
	}
	if _, err := patch(api, "c1", `{"status":{}}`, "status"); err != nil {
		t.Errorf("a fault outlived its times: %v", err)
	}
	if _, err := patch(api, "c1", `{"metadata":{"annotations":{"`+snapshot.AnnBeingCreated+`":"yes"}}}`); err != nil {
		t.Errorf("the fault of the status hit the object: %v", err)
	}
	if _, err := api.Kube.CoreV1().Secrets("ns").Get(ctx, "creds", metav1.GetOptions{}); !errors.Is(err, boom) {
		t.Errorf("faulty get: %v", err)
	}
	var got []string
	for _, w := range api.Writes() {
		got = append(got, w.String())
	}
	want := []string{"patch volumesnapshotcontents/status", "patch volumesnapshotcontents/status",
		"patch volumesnapshotcontents/status", "patch volumesnapshotcontents"}
	if !slices.Equal(got, want) {
		t.Errorf("writes %v, want %v", got, want)
	}
	if api.ClearActions(); len(api.Writes()) != 0 {
		t.Error("writes remain after ClearActions")
	}
}
