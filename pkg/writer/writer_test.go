package writer

import (
	"context"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// Claims are written with update (the community snapshot-controller role
// grants no patch on them), conditional on the read copy's
// resourceVersion, and counted like every other write.
func TestClaimFinalizersAreUpdatedFromTheReadCopy(t *testing.T) {
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{
		Namespace: "ns", Name: "data", UID: "u1", ResourceVersion: "7",
		Finalizers:  []string{"kubernetes.io/pvc-protection"},
		Annotations: map[string]string{"keep": "1", "drop": "1"},
	}}
	kube := fake.NewClientset(pvc)
	var sent *corev1.PersistentVolumeClaim
	var verbs []string
	kube.PrependReactor("*", "persistentvolumeclaims", func(a k8stesting.Action) (bool, runtime.Object, error) {
		verbs = append(verbs, a.GetVerb())
		if u, ok := a.(k8stesting.UpdateAction); ok {
			sent = u.GetObject().(*corev1.PersistentVolumeClaim).DeepCopy()
		}
		return false, nil, nil
	})
	reg := prometheus.NewRegistry()
	w := New(kube, nil, reg)

	p := &Patch{}
	p.Meta.AddFinalizers(pvc, "snapshot.storage.kubernetes.io/pvc-as-source-protection").
		SetAnnotation(pvc, "new", "v").RemoveAnnotation(pvc, "drop")
	if _, err := w.UpdatePVC(context.Background(), pvc, p); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(verbs, []string{"update"}) {
		t.Fatalf("verbs = %v, want [update]", verbs)
	}
	if sent.ResourceVersion != "7" {
		t.Errorf("resourceVersion = %q, want the read copy's 7", sent.ResourceVersion)
	}
	if want := []string{"kubernetes.io/pvc-protection", "snapshot.storage.kubernetes.io/pvc-as-source-protection"}; !slices.Equal(sent.Finalizers, want) {
		t.Errorf("finalizers = %v, want %v", sent.Finalizers, want)
	}
	if a := sent.Annotations; a["keep"] != "1" || a["new"] != "v" || len(a) != 2 {
		t.Errorf("annotations = %v", a)
	}
	if len(pvc.Finalizers) != 1 || len(pvc.Annotations) != 2 {
		t.Errorf("the read copy was modified: %+v", pvc.ObjectMeta)
	}
	var m dto.Metric
	if err := w.writes.WithLabelValues("persistentvolumeclaims", "update", "ok").Write(&m); err != nil || m.GetCounter().GetValue() != 1 {
		t.Errorf("counted writes = %v (%v), want 1", m.GetCounter().GetValue(), err)
	}
	if !w.Stale(pvc) {
		t.Error("the read copy is not remembered as stale")
	}

	// Nothing to change: no write at all.
	verbs = nil
	if _, err := w.UpdatePVC(context.Background(), pvc, &Patch{}); err != nil || len(verbs) != 0 {
		t.Errorf("empty change: err %v, verbs %v", err, verbs)
	}
}
