package framework

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	admregv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/pkg/apis/snapkeeper/v1alpha1"
)

// Webhook is a running snapkeeper-webhook, registered with the API server
// through a ValidatingWebhookConfiguration that trusts its CA.
type Webhook struct {
	Addr       string // 127.0.0.1:port (HTTPS)
	CertDir    string // tls.crt, tls.key, ca.crt
	CA         *CA
	ConfigName string
	Proc       *Process
}

// WebhookConfigName is the ValidatingWebhookConfiguration the framework
// registers.
const WebhookConfigName = "snapkeeper-e2e"

// StartWebhook builds and starts the webhook with a fresh CA and serving
// certificate, registers it for the four kinds it validates, and waits until
// the API server really calls it. t.Cleanup unregisters and stops it.
func (e *Env) StartWebhook(t T, args ...string) *Webhook {
	t.Helper()
	w, err := e.StartWebhookIn(e.TempDir(t, "webhook"), args...)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		e.UnregisterWebhook(ctx, w.ConfigName)
		w.Proc.Stop(5 * time.Second)
	})
	return w
}

// StartWebhookIn is StartWebhook for callers without a T (make run); the
// caller stops w.Proc.
func (e *Env) StartWebhookIn(dir string, args ...string) (*Webhook, error) {
	bin, err := OwnBinary("./cmd/webhook")
	if err != nil {
		return nil, err
	}
	ca, err := NewCA("snapkeeper-e2e-ca")
	if err != nil {
		return nil, err
	}
	w := &Webhook{CertDir: filepath.Join(dir, "certs"), CA: ca, ConfigName: WebhookConfigName}
	if err := ca.Serving(w.CertDir, "snapkeeper-webhook"); err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	w.Addr = "127.0.0.1:" + strconv.Itoa(port)
	full := append([]string{"--kubeconfig=" + e.Kubeconfig, "--bind-address=127.0.0.1", "--port=" + strconv.Itoa(port),
		"--tls-cert-file=" + filepath.Join(w.CertDir, "tls.crt"),
		"--tls-private-key-file=" + filepath.Join(w.CertDir, "tls.key"),
		"--tls-reload-interval=200ms", "-v=2"}, args...)
	if w.Proc, err = StartProcess(dir, "webhook", bin, full); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := w.waitReady(ctx); err != nil {
		w.Proc.Stop(5 * time.Second)
		return nil, err
	}
	if err := e.RegisterWebhook(ctx, w.ConfigName, "https://"+w.Addr, ca.CertPEM); err != nil {
		w.Proc.Stop(5 * time.Second)
		return nil, err
	}
	if err := e.waitWebhookCalled(ctx); err != nil {
		w.Proc.Stop(5 * time.Second)
		return nil, err
	}
	return w, nil
}

// Client is an HTTPS client that trusts the webhook's CA.
func (w *Webhook) Client() *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(w.CA.CertPEM)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
	}}
}

func (w *Webhook) waitReady(ctx context.Context) error {
	hc := w.Client()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+w.Addr+"/readyz", nil)
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if w.Proc.Exited() || ctx.Err() != nil {
			return fmt.Errorf("webhook not ready (%v):\n%s", err, w.Proc.Tail(3000))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// RegisterWebhook (re)creates the webhook configurations named name, as the
// chart does: the snapshot, group snapshot and schedule kinds in a ValidatingWebhookConfiguration
// (CREATE, UPDATE), and claims with a data source in a
// MutatingWebhookConfiguration (CREATE) that never patches. Claims are judged
// at the mutating stage because the API server silently drops a dataSource
// of the wrong group before validating admission runs.
func (e *Env) RegisterWebhook(ctx context.Context, name, baseURL string, caBundle []byte) error {
	none := admregv1.SideEffectClassNone
	fail := admregv1.Fail
	equivalent := admregv1.Equivalent
	never := admregv1.NeverReinvocationPolicy
	timeout := int32(10)
	clientConfig := func(res string) admregv1.WebhookClientConfig {
		url := baseURL + "/validate/" + res
		return admregv1.WebhookClientConfig{URL: &url, CABundle: caBundle}
	}
	var validating []admregv1.ValidatingWebhook
	for _, res := range []struct{ group, version, name string }{
		{snapv1.GroupName, "v1", "volumesnapshotclasses"}, {snapv1.GroupName, "v1", "volumesnapshots"},
		{snapv1.GroupName, "v1", "volumesnapshotcontents"},
		{groupv1.GroupName, "v1", "volumegroupsnapshotclasses"}, {groupv1.GroupName, "v1", "volumegroupsnapshots"},
		{groupv1.GroupName, "v1", "volumegroupsnapshotcontents"},
		{v1alpha1.GroupName, v1alpha1.SchemeGroupVersion.Version, "snapshotschedules"},
	} {
		validating = append(validating, admregv1.ValidatingWebhook{
			Name:         res.name + ".validation.snapkeeper.io",
			ClientConfig: clientConfig(res.name),
			Rules: []admregv1.RuleWithOperations{{
				Operations: []admregv1.OperationType{admregv1.Create, admregv1.Update},
				Rule:       admregv1.Rule{APIGroups: []string{res.group}, APIVersions: []string{res.version}, Resources: []string{res.name}},
			}},
			SideEffects: &none, FailurePolicy: &fail, MatchPolicy: &equivalent, TimeoutSeconds: &timeout,
			AdmissionReviewVersions: []string{"v1", "v1beta1"},
		})
	}
	mutating := []admregv1.MutatingWebhook{{
		Name:         "persistentvolumeclaims.validation.snapkeeper.io",
		ClientConfig: clientConfig("persistentvolumeclaims"),
		Rules: []admregv1.RuleWithOperations{{
			Operations: []admregv1.OperationType{admregv1.Create},
			Rule:       admregv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"persistentvolumeclaims"}},
		}},
		MatchConditions: []admregv1.MatchCondition{{
			Name: "has-data-source", Expression: "has(object.spec.dataSource) || has(object.spec.dataSourceRef)",
		}},
		SideEffects: &none, FailurePolicy: &fail, MatchPolicy: &equivalent, TimeoutSeconds: &timeout,
		ReinvocationPolicy: &never, AdmissionReviewVersions: []string{"v1", "v1beta1"},
	}}
	reg := e.Kube.AdmissionregistrationV1()
	_ = reg.ValidatingWebhookConfigurations().Delete(ctx, name, metav1.DeleteOptions{})
	_ = reg.MutatingWebhookConfigurations().Delete(ctx, name, metav1.DeleteOptions{})
	if _, err := reg.ValidatingWebhookConfigurations().Create(ctx, &admregv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Webhooks: validating}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("register validating webhook: %w", err)
	}
	if _, err := reg.MutatingWebhookConfigurations().Create(ctx, &admregv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Webhooks: mutating}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("register mutating webhook: %w", err)
	}
	return nil
}

// UnregisterWebhook deletes both configurations named name.
func (e *Env) UnregisterWebhook(ctx context.Context, name string) {
	reg := e.Kube.AdmissionregistrationV1()
	_ = reg.ValidatingWebhookConfigurations().Delete(ctx, name, metav1.DeleteOptions{})
	_ = reg.MutatingWebhookConfigurations().Delete(ctx, name, metav1.DeleteOptions{})
}

// waitWebhookCalled waits until the API server sends requests to the
// webhook: a dry-run class with an unknown reserved parameter is denied by
// the webhook alone (the CRD has no such rule).
func (e *Env) waitWebhookCalled(ctx context.Context) error {
	probe := []byte(`{"apiVersion":"snapshot.storage.k8s.io/v1","kind":"VolumeSnapshotClass",` +
		`"metadata":{"name":"snapkeeper-webhook-probe"},"driver":"probe.example.com","deletionPolicy":"Delete",` +
		`"parameters":{"csi.storage.k8s.io/not-a-known-key":"x"}}`)
	for {
		_, stderr, err := e.Kubectl(ctx, bytes.NewReader(probe), "create", "--dry-run=server", "-f", "-")
		if err != nil && strings.Contains(stderr, "denied the request") {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("the API server never called the webhook (last: %v %s)", err, stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
