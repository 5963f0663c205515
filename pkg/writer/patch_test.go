package writer

import (
	"encoding/json"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func obj(rv string, finalizers ...string) *metav1.ObjectMeta {
	return &metav1.ObjectMeta{ResourceVersion: rv, Finalizers: finalizers,
		Annotations: map[string]string{"keep": "1"}}
}

func render(t *testing.T, p *Patch) map[string]any {
	t.Helper()
	b, err := p.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestFinalizerChangesCarryTheResourceVersion(t *testing.T) {
	o := obj("7", "other.io/f")
	p := &Patch{}
	p.Meta.AddFinalizers(o, "ours/a", "ours/b")
	p.Meta.RemoveFinalizers(o, "ours/b")
	m := render(t, p)["metadata"].(map[string]any)
	if m["resourceVersion"] != "7" {
		t.Errorf("resourceVersion = %v, want the read copy's", m["resourceVersion"])
	}
	got := m["finalizers"].([]any)
	if len(got) != 2 || got[0] != "other.io/f" || got[1] != "ours/a" {
		t.Errorf("finalizers = %v, want [other.io/f ours/a]", got)
	}
}

func TestNothingToChangeIsNoWrite(t *testing.T) {
	o := obj("7", "ours/a")
	p := &Patch{}
	p.Meta.AddFinalizers(o, "ours/a")
	p.Meta.RemoveFinalizers(o, "absent")
	p.Meta.SetAnnotation(o, "keep", "1")
	p.Meta.RemoveAnnotation(o, "absent")
	if !p.Empty() {
		t.Fatalf("patch not empty: %s", must(p.JSON()))
	}
}

func TestRemovingTheLastFinalizerSendsAnEmptyList(t *testing.T) {
	o := obj("3", "ours/a")
	p := &Patch{}
	p.Meta.RemoveFinalizers(o, "ours/a")
	m := render(t, p)["metadata"].(map[string]any)
	if f, ok := m["finalizers"].([]any); !ok || len(f) != 0 {
		t.Fatalf("finalizers = %#v, want []", m["finalizers"])
	}
}

func TestAnnotationsMergeByKeyWithoutPrecondition(t *testing.T) {
	o := obj("9")
	p := &Patch{}
	p.Meta.SetAnnotation(o, "new", "v").RemoveAnnotation(o, "keep")
	m := render(t, p)["metadata"].(map[string]any)
	if _, ok := m["resourceVersion"]; ok {
		t.Error("annotation-only patch must not be conditional")
	}
	ann := m["annotations"].(map[string]any)
	if ann["new"] != "v" || ann["keep"] != nil {
		t.Errorf("annotations = %v", ann)
	}
}

func must(b []byte, _ error) string { return string(b) }
