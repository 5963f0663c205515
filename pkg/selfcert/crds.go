package selfcert

import (
	"context"
	"encoding/base64"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// crdResource is read through the dynamic client: apiextensions' typed
// client is not worth its module for two fields.
var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// conversionCRDs are the CRDs of Config.ConversionCRDs. Each has one entry
// while its conversion strategy is Webhook (the chart registered /convert)
// and none otherwise: a CRD without conversion needs no CA.
func (m *Manager) conversionCRDs() []webhookConfig {
	if m.cfg.Dynamic == nil {
		return nil
	}
	crds := m.cfg.Dynamic.Resource(crdResource)
	out := make([]webhookConfig, 0, len(m.cfg.ConversionCRDs))
	for _, name := range m.cfg.ConversionCRDs {
		out = append(out, webhookConfig{
			kind: "CustomResourceDefinition",
			name: name,
			get: func(ctx context.Context) (types.UID, []webhookEntry, error) {
				crd, err := crds.Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return "", nil, err
				}
				entry, err := conversionEntry(crd)
				if err != nil || entry == nil {
					return crd.GetUID(), nil, err
				}
				return crd.GetUID(), []webhookEntry{*entry}, nil
			},
			patch: func(ctx context.Context, body []byte) error {
				_, err := crds.Patch(ctx, name, types.JSONPatchType, body, metav1.PatchOptions{})
				return err
			},
		})
	}
	return out
}

// conversionEntry is the caBundle of a CRD's conversion webhook, nil when
// its strategy is not Webhook.
func conversionEntry(crd *unstructured.Unstructured) (*webhookEntry, error) {
	strategy, _, _ := unstructured.NestedString(crd.Object, "spec", "conversion", "strategy")
	if strategy != "Webhook" {
		return nil, nil
	}
	if _, found, _ := unstructured.NestedMap(crd.Object, "spec", "conversion", "webhook", "clientConfig"); !found {
		return nil, fmt.Errorf("CustomResourceDefinition %s: spec.conversion.strategy is Webhook without spec.conversion.webhook.clientConfig", crd.GetName())
	}
	encoded, _, _ := unstructured.NestedString(crd.Object, "spec", "conversion", "webhook", "clientConfig", "caBundle")
	bundle, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		bundle = nil // not a bundle: replace it
	}
	return &webhookEntry{caBundle: bundle, bundlePath: "/spec/conversion/webhook/clientConfig/caBundle",
		testPath: "/spec/conversion/strategy", testValue: "Webhook"}, nil
}
