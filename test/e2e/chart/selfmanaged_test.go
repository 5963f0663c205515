package chart

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/snapkeeper/snapkeeper/pkg/selfcert"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

// restoreClaim is a claim restoring from a snapshot; labels decide what the
// stub webhook answers (framework.StubWebhook).
func restoreClaim(apiGroup *string, labels map[string]string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "restore-", Labels: labels},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			DataSource:  &corev1.TypedLocalObjectReference{APIGroup: apiGroup, Kind: "VolumeSnapshot", Name: "snap"},
		},
	}
}

// selfManagedFlags reads the --self-managed-* arguments the chart gives the
// webhook.
func selfManagedFlags(t *testing.T, env *framework.Env, ns, deployment string) *selfcert.Flags {
	t.Helper()
	dep, err := env.Kube.AppsV1().Deployments(ns).Get(context.Background(), deployment, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	for _, a := range dep.Spec.Template.Spec.Containers[0].Args {
		if strings.HasPrefix(a, "--self-managed-") {
			args = append(args, a)
		}
	}
	f := &selfcert.Flags{}
	fs := flag.NewFlagSet("webhook", flag.ContinueOnError)
	f.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("the chart's selfManaged arguments %v: %v", args, err)
	}
	if err := f.Validate(); err != nil {
		t.Fatalf("the chart's selfManaged arguments %v: %v", args, err)
	}
	return f
}

// The webhook's selfManaged certificate logic, with the chart's arguments
// and the chart's ServiceAccount, fills caBundle; the real API server then
// trusts the webhook, and a forced CA rotation under load fails no request.
func TestSelfManagedCertificatesAreTrustedAndRotateWithoutAFailedRequest(t *testing.T) {
	env, h := clusterHelm(t)
	ns, apps := env.Namespace(t), env.Namespace(t)
	h.Must(t, append([]string{"install", "sk", framework.ChartDir(), "--namespace", ns, "--set", "certificates.mode=selfManaged"}, installArgs...)...)
	uninstallOnCleanup(t, h, "sk", ns)

	f := selfManagedFlags(t, env, ns, "sk-snapkeeper-webhook")
	f.DNSNames += ",127.0.0.1" // the test webhook listens on loopback
	f.CertDir = t.TempDir()
	cfg := f.Config(ns)
	cfg.PublishDelay = 2 * time.Second
	webhookIdentity, err := env.ServiceAccountConfig(context.Background(), ns, "sk-snapkeeper-webhook")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Client = kubernetes.NewForConfigOrDie(webhookIdentity)
	m, err := selfcert.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := m.Reconcile(ctx); err != nil {
		t.Fatalf("first reconcile as the chart's webhook ServiceAccount: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	wh := framework.StartStubWebhook(t, f.CertDir)
	framework.MustPointWebhooksAt(t, env, f.WebhookConfiguration, wh.Addr)
	framework.Eventually(t, 30*time.Second, "caBundle set by the Manager", func() (bool, error) {
		return bundleMatchesSecret(ctx, env, ns, f)
	})

	snaps := env.Snap.SnapshotV1().VolumeSnapshots(apps)
	create := func(deny bool) error {
		vs := &snapv1.VolumeSnapshot{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "rot-", Labels: map[string]string{"deny": fmt.Sprint(deny)}},
			Spec:       snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{PersistentVolumeClaimName: ptr("data")}},
		}
		_, err := snaps.Create(ctx, vs, metav1.CreateOptions{})
		return err
	}
	expectDenied := func(stage string) {
		t.Helper()
		if err := create(true); err == nil || !strings.Contains(err.Error(), framework.StubWebhookDenial) {
			t.Fatalf("%s: a denied object got %v: the API server did not call the webhook over trusted TLS", stage, err)
		}
		if err := create(false); err != nil {
			t.Fatalf("%s: an allowed object: %v", stage, err)
		}
		// Claims go through the mutating configuration (failurePolicy
		// Ignore: only a call over trusted TLS can deny).
		claim := restoreClaim(ptr("snapshot.storage.k8s.io"), map[string]string{"deny": "true"})
		if _, err := env.Kube.CoreV1().PersistentVolumeClaims(apps).Create(ctx, claim, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err == nil ||
			!strings.Contains(err.Error(), framework.StubWebhookDenial) {
			t.Fatalf("%s: a denied claim got %v: the API server did not call the mutating webhook over trusted TLS", stage, err)
		}
	}
	expectDenied("before the rotation")

	// Load through the API server and through a client that trusts exactly
	// the caBundle of the configuration, while a rotation is forced.
	var failures []string
	var mu sync.Mutex
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		failures = append(failures, fmt.Sprintf(format, args...))
	}
	stop := framework.Repeat(50*time.Millisecond, func(i int) {
		if err := create(false); err != nil {
			fail("API server request %d: %v", i, err)
		}
	}, func(i int) {
		if err := callTrustingBundle(ctx, env, f.WebhookConfiguration, wh.Addr); err != nil {
			fail("direct TLS request %d: %v", i, err)
		}
	})

	before := secretData(ctx, t, env, ns, f.SecretName)
	sec, err := env.Kube.CoreV1().Secrets(ns).Get(ctx, f.SecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sec.Annotations[selfcert.AnnotationRotateCA] = "now"
	if _, err := env.Kube.CoreV1().Secrets(ns).Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	servedBefore := wh.Reviews()
	framework.Eventually(t, time.Minute, "the webhook to serve a certificate of the new CA", func() (bool, error) {
		after := secretData(ctx, t, env, ns, f.SecretName)
		if string(after["ca.key"]) == string(before["ca.key"]) {
			return false, nil
		}
		onDisk, err := os.ReadFile(filepath.Join(f.CertDir, "tls.crt"))
		if err != nil {
			return false, err
		}
		return string(onDisk) == string(after["tls.crt"]) && string(after["tls.crt"]) != string(before["tls.crt"]), nil
	})
	time.Sleep(time.Second) // the reloader picks the new files up; keep the load on
	stop()
	for _, f := range failures {
		t.Error(f)
	}
	if n := wh.Reviews() - servedBefore; n < 10 {
		t.Errorf("only %d reviews answered during the rotation", n)
	}
	after := secretData(ctx, t, env, ns, f.SecretName)
	if cas, _ := parsePEMCerts(after["ca.crt"]); len(cas) != 2 {
		t.Errorf("bundle after the rotation holds %d CAs, want the new and the old one", len(cas))
	}
	expectDenied("after the rotation")
}

func secretData(ctx context.Context, t *testing.T, env *framework.Env, ns, name string) map[string][]byte {
	t.Helper()
	s, err := env.Kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s.Data
}

func bundleMatchesSecret(ctx context.Context, env *framework.Env, ns string, f *selfcert.Flags) (bool, error) {
	s, err := env.Kube.CoreV1().Secrets(ns).Get(ctx, f.SecretName, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	bundles, err := framework.WebhookCABundles(ctx, env, f.WebhookConfiguration)
	if err != nil {
		return false, err
	}
	for _, b := range bundles {
		if string(b) != string(s.Data["ca.crt"]) {
			return false, nil
		}
	}
	return len(bundles) == 8, nil // seven validating entries, one mutating
}

// callTrustingBundle reads the caBundle of every entry of both
// configurations and makes one TLS request to the webhook trusting exactly
// each bundle, as the API server does.
func callTrustingBundle(ctx context.Context, env *framework.Env, name, addr string) error {
	bundles, err := framework.WebhookCABundles(ctx, env, name)
	if err != nil {
		return err
	}
	for entry, bundle := range bundles {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(bundle) {
			return fmt.Errorf("%s: caBundle holds no certificate", entry)
		}
		client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12},
			DisableKeepAlives: true,
		}}
		resp, err := client.Post("https://"+addr+"/validate/volumesnapshots", "application/json", strings.NewReader("{}"))
		if err != nil {
			return fmt.Errorf("trusting the bundle of %s: %w", entry, err)
		}
		resp.Body.Close()
	}
	return nil
}

func parsePEMCerts(b []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		if block, b = pem.Decode(b); block == nil {
			return out, nil
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return out, err
		}
		out = append(out, c)
	}
}
