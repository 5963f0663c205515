package node

import (
	"bytes"
	"context"
	"encoding/base64"
	"sort"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

var (
	crdGVR         = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	certificateGVR = schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "certificates"}
)

// startCertManager installs cert-manager's CRDs and runs its controllers
// and CA injector (bin/cert-manager) until the test ends; then it removes
// the CRDs and the Secrets cert-manager wrote (they carry no owner), so
// that later installs see a cluster without cert-manager again. Register
// it before the helm install, so the uninstall runs first. The process is
// returned for its log.
func startCertManager(t *testing.T) *framework.Process {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := framework.InstallCertManagerCRDs(ctx, env.Dynamic); err != nil {
		t.Fatal(err)
	}
	p, err := env.StartCertManager(env.Dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop(10 * time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		for _, s := range []string{release + "-webhook-tls", release + "-webhook-ca"} {
			if err := env.Kube.CoreV1().Secrets(namespace).Delete(ctx, s, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete Secret %s: %v", s, err)
			}
		}
		crds, err := env.Dynamic.Resource(crdGVR).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Error(err)
			return
		}
		for _, c := range crds.Items {
			if strings.HasSuffix(c.GetName(), "cert-manager.io") {
				if err := env.Dynamic.Resource(crdGVR).Delete(ctx, c.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					t.Errorf("delete CRD %s: %v", c.GetName(), err)
				}
			}
		}
		err = framework.Poll(time.Minute, "cert-manager.io/v1 no longer served", func() (bool, error) {
			_, err := env.Kube.Discovery().ServerResourcesForGroupVersion("cert-manager.io/v1")
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			t.Error(err)
		}
	})
	return p
}

// caInjected checks what cert-manager did for the install: the webhook's
// Certificate is Ready (issued by the chart's CA Issuer), and the CA in its
// Secret is the caBundle of every webhook of our configurations and of
// every CRD conversion webhook that asks for it, as the injector copied it.
func caInjected(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := release + "-webhook"
	cert, err := env.Dynamic.Resource(certificateGVR).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	conds, _, _ := unstructured.NestedSlice(cert.Object, "status", "conditions")
	readyCert := false
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Ready" && m["status"] == "True" {
			readyCert = true
		}
	}
	if !readyCert {
		t.Fatalf("Certificate %s not Ready: %v", name, conds)
	}
	secret, err := env.Kube.CoreV1().Secrets(namespace).Get(ctx, name+"-tls", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ca := secret.Data["ca.crt"]
	if len(ca) == 0 || secret.Annotations["cert-manager.io/certificate-name"] != name {
		t.Fatalf("Secret %s-tls was not written by cert-manager for %s (annotations %v, %d bytes of ca.crt)", name, name, secret.Annotations, len(ca))
	}
	inject := namespace + "/" + name
	var checked []string
	err = framework.Poll(time.Minute, "caBundles injected", func() (bool, error) {
		checked = nil
		configs := map[string][]admissionregistrationv1.WebhookClientConfig{}
		add := func(kind string, c metav1.ObjectMeta, webhook string, cc admissionregistrationv1.WebhookClientConfig) {
			if c.Annotations["cert-manager.io/inject-ca-from"] == inject {
				configs[kind+"/"+webhook] = append(configs[kind+"/"+webhook], cc)
			}
		}
		vwcs, err := env.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range vwcs.Items {
			for _, w := range c.Webhooks {
				add("validating", c.ObjectMeta, w.Name, w.ClientConfig)
			}
		}
		mwcs, err := env.Kube.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range mwcs.Items {
			for _, w := range c.Webhooks {
				add("mutating", c.ObjectMeta, w.Name, w.ClientConfig)
			}
		}
		for name, ccs := range configs {
			for _, cc := range ccs {
				if !bytes.Equal(cc.CABundle, ca) {
					return false, nil
				}
			}
			checked = append(checked, name)
		}
		crds, err := env.Dynamic.Resource(crdGVR).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range crds.Items {
			if c.GetAnnotations()["cert-manager.io/inject-ca-from"] != inject {
				continue
			}
			bundle, _, _ := unstructured.NestedString(c.Object, "spec", "conversion", "webhook", "clientConfig", "caBundle")
			if b, err := base64.StdEncoding.DecodeString(bundle); err != nil || !bytes.Equal(b, ca) {
				return false, nil
			}
			checked = append(checked, "crd/"+c.GetName())
		}
		return len(checked) > 0, nil
	})
	if err != nil {
		t.Fatalf("%v (checked so far: %v)", err, checked)
	}
	sort.Strings(checked)
	t.Logf("Certificate %s Ready; CA injected into %d webhooks and CRDs: %s", name, len(checked), strings.Join(checked, ", "))
}
