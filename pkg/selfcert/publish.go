package selfcert

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// publish makes every entry of the webhook configuration trust bundle. It
// reports whether the API server may be assumed to trust the current CA
// (the first of bundle) by now: true once the configuration has carried it
// for PublishDelay as far as this Manager has seen, or when there is no
// configuration to carry it.
func (m *Manager) publish(ctx context.Context, bundle []byte) (trustedSince time.Time, err error) {
	now := m.cfg.Now()
	if m.cfg.WebhookConfiguration == "" {
		return time.Time{}, nil
	}
	vwcs := m.cfg.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	vwc, err := vwcs.Get(ctx, m.cfg.WebhookConfiguration, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		// Nothing calls the webhook yet; the configuration is patched as soon
		// as it appears (Run watches it).
		klog.FromContext(ctx).V(2).Info("Webhook configuration not found yet", "name", m.cfg.WebhookConfiguration)
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("read ValidatingWebhookConfiguration %s: %w", m.cfg.WebhookConfiguration, err)
	}
	// A JSON patch that replaces only caBundle, guarded by the entry's name
	// so that a concurrent reorder of the entries fails the patch instead of
	// writing the wrong one.
	var ops []jsonPatchOp
	for i, wh := range vwc.Webhooks {
		if bytes.Equal(wh.ClientConfig.CABundle, bundle) {
			continue
		}
		ops = append(ops,
			jsonPatchOp{Op: "test", Path: fmt.Sprintf("/webhooks/%d/name", i), Value: wh.Name},
			jsonPatchOp{Op: "add", Path: fmt.Sprintf("/webhooks/%d/clientConfig/caBundle", i), Value: bundle})
	}
	key := sha256.Sum256(bundle)
	if len(ops) == 0 {
		if _, seen := m.trusted[key]; !seen {
			m.trusted[key] = now
		}
		return m.trusted[key], nil
	}
	body, err := json.Marshal(ops)
	if err != nil {
		return time.Time{}, err
	}
	if _, err := vwcs.Patch(ctx, vwc.Name, types.JSONPatchType, body, metav1.PatchOptions{}); err != nil {
		return time.Time{}, fmt.Errorf("patch caBundle of ValidatingWebhookConfiguration %s: %w", vwc.Name, err)
	}
	klog.FromContext(ctx).Info("Updated caBundle of the webhook configuration", "name", vwc.Name, "webhooks", len(ops)/2)
	m.trusted = map[[32]byte]time.Time{key: now}
	return now, nil
}

// setOwner makes the webhook configuration the owner of the Secret, so that
// the garbage collector removes the CA key with the configuration (helm
// uninstall). Best effort: without it the Secret merely stays behind.
func (m *Manager) setOwner(ctx context.Context, s *corev1.Secret) {
	if m.cfg.WebhookConfiguration == "" {
		return
	}
	vwc, err := m.cfg.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, m.cfg.WebhookConfiguration, metav1.GetOptions{})
	if err != nil {
		return
	}
	gvk := admissionregistrationv1.SchemeGroupVersion.WithKind("ValidatingWebhookConfiguration")
	refs := make([]metav1.OwnerReference, 0, len(s.OwnerReferences)+1)
	for _, r := range s.OwnerReferences {
		if r.Kind == gvk.Kind && r.APIVersion == gvk.GroupVersion().String() {
			continue
		}
		refs = append(refs, r)
	}
	s.OwnerReferences = append(refs, metav1.OwnerReference{
		APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: vwc.Name, UID: vwc.UID,
	})
}
