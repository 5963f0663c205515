package selfcert

import (
	"context"
	"encoding/base64"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
)

func newCRD(name, strategy string) *unstructured.Unstructured {
	conv := map[string]any{"strategy": strategy}
	if strategy == "Webhook" {
		conv["webhook"] = map[string]any{"conversionReviewVersions": []any{"v1"},
			"clientConfig": map[string]any{"service": map[string]any{"name": "w", "namespace": ns, "path": "/convert"}}}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": name}, "spec": map[string]any{"conversion": conv},
	}}
}

func crdBundle(t *testing.T, dyn *dynamicfake.FakeDynamicClient, name string) (string, bool) {
	t.Helper()
	crd, err := dyn.Resource(crdResource).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, found, _ := unstructured.NestedString(crd.Object, "spec", "conversion", "webhook", "clientConfig", "caBundle")
	return b, found
}

func TestConversionCRDsTrustTheCAWhileTheirStrategyIsWebhook(t *testing.T) {
	f := newFixture(newVWC())
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{crdResource: "CustomResourceDefinitionList"},
		newCRD("groups.example", "Webhook"), newCRD("contents.example", "None"))
	m := f.manager(t, func(c *Config) {
		c.Dynamic = dyn
		c.ConversionCRDs = []string{"groups.example", "contents.example", "missing.example"}
	})
	f.reconcile(t, m)
	got, found := crdBundle(t, dyn, "groups.example")
	if !found {
		t.Fatal("caBundle of the Webhook CRD not set")
	}
	bundle, err := base64.StdEncoding.DecodeString(got)
	if err != nil || string(bundle) != string(f.bundles(t)["validating/volumesnapshots.validation.snapkeeper.io"]) {
		t.Errorf("CRD caBundle %q (%v) differs from the webhook configuration's", got, err)
	}
	if _, found := crdBundle(t, dyn, "contents.example"); found {
		t.Error("a CRD without conversion got a caBundle")
	}
	// A reset bundle (GitOps, helm) is put back; nothing else is written.
	crd := newCRD("groups.example", "Webhook")
	if _, err := dyn.Resource(crdResource).Update(context.Background(), crd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	dyn.ClearActions()
	f.reconcile(t, m)
	var patched []string
	for _, a := range dyn.Actions() {
		if a.GetVerb() == "patch" {
			patched = append(patched, a.GetResource().Resource)
		}
	}
	if len(patched) != 1 {
		t.Errorf("patches %v, want one of the reset CRD", patched)
	}
	if again, _ := crdBundle(t, dyn, "groups.example"); again != got {
		t.Errorf("repaired caBundle %q, want %q", again, got)
	}
}

func TestConversionCRDsNeedADynamicClient(t *testing.T) {
	_, err := New(Config{Client: newFixture().client, Namespace: ns, SecretName: secName, Hosts: []string{host}, ConversionCRDs: []string{"x"}})
	if err == nil {
		t.Fatal("New accepted conversion CRDs without a dynamic client")
	}
}
