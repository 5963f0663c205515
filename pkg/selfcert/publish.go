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

// webhookConfig is one kind of webhook configuration named
// Config.WebhookConfiguration. The chart registers the snapshot kinds in a
// ValidatingWebhookConfiguration and claims in a MutatingWebhookConfiguration
// of the same name (the API server drops a wrong claim data source before
// validating admission), and both must trust the serving certificate.
type webhookConfig struct {
	kind string
	name string
	// get returns the object's UID and its entries that carry a caBundle.
	get   func(ctx context.Context) (types.UID, []webhookEntry, error)
	patch func(ctx context.Context, body []byte) error
}

// webhookEntry is one caBundle of an object: at bundlePath, written only
// while testPath still holds testValue (so that a concurrent change of the
// object fails the patch instead of writing the wrong place).
type webhookEntry struct {
	caBundle   []byte
	bundlePath string
	testPath   string
	testValue  any
}

// admissionEntry is entry i of a webhook configuration, named name.
func admissionEntry(i int, name string, caBundle []byte) webhookEntry {
	return webhookEntry{caBundle: caBundle, bundlePath: fmt.Sprintf("/webhooks/%d/clientConfig/caBundle", i),
		testPath: fmt.Sprintf("/webhooks/%d/name", i), testValue: name}
}

// webhookConfigs are the configurations whose caBundle the Manager keeps,
// validating first; none without a name.
func (m *Manager) webhookConfigs() []webhookConfig {
	name := m.cfg.WebhookConfiguration
	if name == "" {
		return nil
	}
	reg := m.cfg.Client.AdmissionregistrationV1()
	return []webhookConfig{{
		kind: "ValidatingWebhookConfiguration",
		name: name,
		get: func(ctx context.Context) (types.UID, []webhookEntry, error) {
			o, err := reg.ValidatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return "", nil, err
			}
			entries := make([]webhookEntry, len(o.Webhooks))
			for i, wh := range o.Webhooks {
				entries[i] = admissionEntry(i, wh.Name, wh.ClientConfig.CABundle)
			}
			return o.UID, entries, nil
		},
		patch: func(ctx context.Context, body []byte) error {
			_, err := reg.ValidatingWebhookConfigurations().Patch(ctx, name, types.JSONPatchType, body, metav1.PatchOptions{})
			return err
		},
	}, {
		kind: "MutatingWebhookConfiguration",
		name: name,
		get: func(ctx context.Context) (types.UID, []webhookEntry, error) {
			o, err := reg.MutatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return "", nil, err
			}
			entries := make([]webhookEntry, len(o.Webhooks))
			for i, wh := range o.Webhooks {
				entries[i] = admissionEntry(i, wh.Name, wh.ClientConfig.CABundle)
			}
			return o.UID, entries, nil
		},
		patch: func(ctx context.Context, body []byte) error {
			_, err := reg.MutatingWebhookConfigurations().Patch(ctx, name, types.JSONPatchType, body, metav1.PatchOptions{})
			return err
		},
	}}
}

// caTargets are the objects whose caBundle the Manager keeps: the webhook
// configurations, then the CRDs whose conversion webhook is this one.
func (m *Manager) caTargets() []webhookConfig {
	return append(m.webhookConfigs(), m.conversionCRDs()...)
}

// publish makes every entry of the webhook configurations (validating and
// mutating, whichever exist) and of the conversion CRDs trust bundle. It reports since when the API
// server may be assumed to trust the current CA (the first of bundle): the
// time this Manager first saw every configuration carry it, or zero when
// there is no configuration to carry it.
func (m *Manager) publish(ctx context.Context, bundle []byte) (trustedSince time.Time, err error) {
	now := m.cfg.Now()
	log := klog.FromContext(ctx)
	found, patched := false, false
	for _, c := range m.caTargets() {
		_, entries, err := c.get(ctx)
		if apierrors.IsNotFound(err) {
			// Nothing calls the webhook through it (yet); it is patched as
			// soon as it appears (Run watches it).
			log.V(2).Info("Webhook configuration not found", "kind", c.kind, "name", c.name)
			continue
		}
		if err != nil {
			return time.Time{}, fmt.Errorf("read %s %s: %w", c.kind, c.name, err)
		}
		found = true
		// A JSON patch that replaces only caBundle, guarded by the entry's
		// name (or the CRD's conversion strategy) so that a concurrent
		// change fails the patch instead of writing the wrong place.
		var ops []jsonPatchOp
		for _, e := range entries {
			if bytes.Equal(e.caBundle, bundle) {
				continue
			}
			ops = append(ops,
				jsonPatchOp{Op: "test", Path: e.testPath, Value: e.testValue},
				jsonPatchOp{Op: "add", Path: e.bundlePath, Value: bundle})
		}
		if len(ops) == 0 {
			continue
		}
		body, err := json.Marshal(ops)
		if err != nil {
			return time.Time{}, err
		}
		if err := c.patch(ctx, body); err != nil {
			return time.Time{}, fmt.Errorf("patch caBundle of %s %s: %w", c.kind, c.name, err)
		}
		log.Info("Updated caBundle", "kind", c.kind, "name", c.name, "entries", len(ops)/2)
		patched = true
	}
	if !found {
		return time.Time{}, nil
	}
	key := sha256.Sum256(bundle)
	if patched {
		m.trusted = map[[32]byte]time.Time{key: now}
		return now, nil
	}
	if _, seen := m.trusted[key]; !seen {
		m.trusted[key] = now
	}
	return m.trusted[key], nil
}

// setOwner makes the webhook configurations that exist the owners of the
// Secret, so that the garbage collector removes the CA key with them (helm
// uninstall; the Secret goes once every owner is gone). Best effort:
// without it the Secret merely stays behind.
func (m *Manager) setOwner(ctx context.Context, s *corev1.Secret) {
	configs := m.webhookConfigs()
	if len(configs) == 0 {
		return
	}
	apiVersion := admissionregistrationv1.SchemeGroupVersion.String()
	var owners []metav1.OwnerReference
	for _, c := range configs {
		uid, _, err := c.get(ctx)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return // keep what is there
		}
		owners = append(owners, metav1.OwnerReference{APIVersion: apiVersion, Kind: c.kind, Name: m.cfg.WebhookConfiguration, UID: uid})
	}
	if len(owners) == 0 {
		return
	}
	refs := make([]metav1.OwnerReference, 0, len(s.OwnerReferences)+len(owners))
	for _, r := range s.OwnerReferences {
		mine := false
		for _, c := range configs {
			mine = mine || (r.Kind == c.kind && r.APIVersion == apiVersion)
		}
		if !mine {
			refs = append(refs, r)
		}
	}
	s.OwnerReferences = append(refs, owners...)
}
