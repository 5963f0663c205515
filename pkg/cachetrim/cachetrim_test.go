package cachetrim

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func TestDropManagedFields(t *testing.T) {
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Finalizers: []string{"f"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}}
	out, err := DropManagedFields(pvc)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*corev1.PersistentVolumeClaim)
	if got.ManagedFields != nil || got.Name != "c" || len(got.Finalizers) != 1 {
		t.Errorf("got %+v, want the claim without managedFields and nothing else changed", got.ObjectMeta)
	}
	tomb := cache.DeletedFinalStateUnknown{Key: "ns/c", Obj: pvc}
	if out, err := DropManagedFields(tomb); err != nil || out != any(tomb) {
		t.Errorf("a tombstone: got %v, %v; want it unchanged", out, err)
	}
	if out, err := DropManagedFields("not an object"); err != nil || out != "not an object" {
		t.Errorf("a non-object: got %v, %v; want it unchanged", out, err)
	}
}
