package framework

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"
)

// PointWebhooksAt sends every entry of the Validating- and
// MutatingWebhookConfiguration named name to https://addr with the entry's
// own path: the test API server has no Service routing, so a chart's
// Service reference is replaced by a URL on loopback. caBundle and every
// other field stay as they are. It can be called again, to move to another
// address or after PointWebhooksAtService.
func PointWebhooksAt(ctx context.Context, e *Env, name, addr string) error {
	return routeWebhooks(ctx, e, name, func(c *admissionregistrationv1.WebhookClientConfig, path string) {
		u := "https://" + addr + path
		c.Service, c.URL = nil, &u
	})
}

// MustPointWebhooksAt is PointWebhooksAt within 30 s that fails the test.
func MustPointWebhooksAt(t T, e *Env, name, addr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := PointWebhooksAt(ctx, e, name, addr); err != nil {
		t.Fatalf("%v", err)
	}
}

// PointWebhooksAtService puts the Service reference back (svc with each
// entry's own path) where PointWebhooksAt put a URL, keeping caBundle:
// the configurations then look as the chart rendered them, which `helm
// upgrade` needs (its three-way merge re-adds the Service next to the URL
// otherwise, and the API server refuses an entry with both).
func PointWebhooksAtService(ctx context.Context, e *Env, name string, svc admissionregistrationv1.ServiceReference) error {
	return routeWebhooks(ctx, e, name, func(c *admissionregistrationv1.WebhookClientConfig, path string) {
		ref := svc
		ref.Path = &path
		c.Service, c.URL = &ref, nil
	})
}

// routeWebhooks rewrites the clientConfig of every entry of both
// configurations named name with set, given the entry's current path; an
// update that raced with another writer (a webhook filling its caBundle) is
// retried on the new object.
func routeWebhooks(ctx context.Context, e *Env, name string, set func(c *admissionregistrationv1.WebhookClientConfig, path string)) error {
	for _, kind := range []string{"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"} {
		gvr := admissionregistrationv1.SchemeGroupVersion.WithResource(strings.ToLower(kind) + "s")
		client := e.Dynamic.Resource(gvr)
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			obj, err := client.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			hooks, _, err := unstructured.NestedSlice(obj.Object, "webhooks")
			if err != nil {
				return fmt.Errorf("%s %s: %w", kind, name, err)
			}
			for i := range hooks {
				if err := routeEntry(hooks[i], set); err != nil {
					return fmt.Errorf("%s %s, webhooks[%d]: %w", kind, name, i, err)
				}
			}
			if err := unstructured.SetNestedSlice(obj.Object, hooks, "webhooks"); err != nil {
				return err
			}
			_, err = client.Update(ctx, obj, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// routeEntry rewrites the clientConfig of one webhook entry, as the
// dynamic client holds it, with set.
func routeEntry(entry any, set func(c *admissionregistrationv1.WebhookClientConfig, path string)) error {
	hook, ok := entry.(map[string]any)
	if !ok {
		return fmt.Errorf("an entry of type %T", entry)
	}
	raw, _ := hook["clientConfig"].(map[string]any)
	var cc admissionregistrationv1.WebhookClientConfig
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &cc); err != nil {
		return err
	}
	path, err := entryPath(cc)
	if err != nil {
		return err
	}
	set(&cc, path)
	out, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&cc)
	hook["clientConfig"] = out
	return err
}

// entryPath is the path an entry calls: its Service's, or its URL's.
func entryPath(c admissionregistrationv1.WebhookClientConfig) (string, error) {
	switch {
	case c.Service != nil && c.Service.Path != nil:
		return *c.Service.Path, nil
	case c.URL != nil:
		u, err := url.Parse(*c.URL)
		if err != nil {
			return "", fmt.Errorf("clientConfig.url: %w", err)
		}
		return u.Path, nil
	}
	return "", nil
}

// WebhookCABundles is the caBundle of every entry of both configurations
// named name, by "validating <entry>" and "mutating <entry>".
func WebhookCABundles(ctx context.Context, e *Env, name string) (map[string][]byte, error) {
	reg := e.Kube.AdmissionregistrationV1()
	vwc, err := reg.ValidatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	mwc, err := reg.MutatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, wh := range vwc.Webhooks {
		out["validating "+wh.Name] = wh.ClientConfig.CABundle
	}
	for _, wh := range mwc.Webhooks {
		out["mutating "+wh.Name] = wh.ClientConfig.CABundle
	}
	return out, nil
}
