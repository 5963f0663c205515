package node

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// release and namespace are docs/quickstart.md's.
const release, namespace = "snapkeeper", "snapkeeper"

var imageOnce struct {
	sync.Once
	tag string
	err error
}

// ourImage imports `make image`'s image into the node and returns its tag.
func ourImage(t *testing.T) string {
	t.Helper()
	imageOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		imageOnce.tag, imageOnce.err = importImage(ctx, "snapkeeper")
	})
	if imageOnce.err != nil {
		t.Fatalf("our image: %v", imageOnce.err)
	}
	return imageOnce.tag
}

// importImage imports node-images/<name>.tar (`make node-images`) into
// the node and returns the tag node-images/<name>.ref names.
func importImage(ctx context.Context, name string) (string, error) {
	if err := node.ImportImage(ctx, name+".tar"); err != nil {
		return "", err
	}
	ref, err := framework.Tool("node-images/" + name + ".ref")
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(ref)
	return strings.TrimSpace(string(b)), err
}

// TestChartOnNode installs the chart as docs/quickstart.md says, with the
// image's tag as the only value, in each certificate mode: auto without
// cert-manager (so selfManaged), a Secret the user brings, and auto with
// cert-manager running (so certManager: cert-manager's own controllers
// issue the certificate and its CA injector fills the caBundles). Each
// install must bring every pod to Ready by its own probes under Pod
// Security "restricted", elect a leader, and have kube-apiserver reach the
// webhook through its Service: the invalid examples are rejected with our
// messages.
func TestChartOnNode(t *testing.T) {
	tag := ourImage(t)
	h := framework.NewHelm(t, env.Kubeconfig)
	restrictedNamespace(t)
	for _, mode := range []string{"auto", "existingSecret", "certManager"} {
		t.Run(mode, func(t *testing.T) {
			args := []string{"install", release, framework.ChartDir(), "--namespace", namespace, "--set", "image.tag=" + tag, "--wait", "--timeout", "5m"}
			var certManager *framework.Process
			if mode == "certManager" {
				// auto, as users install it, picks certManager once the
				// cluster serves cert-manager.io/v1.
				certManager = startCertManager(t)
			}
			if mode == "existingSecret" {
				bundle := tlsSecret(t, "byo-tls", release+"-webhook."+namespace+".svc")
				args = append(args, "--set", "certificates.mode=existingSecret", "--set", "certificates.existingSecret.name=byo-tls",
					"--set", "certificates.existingSecret.caBundle="+bundle)
			}
			start := time.Now()
			out, err := h.Run(context.Background(), args...)
			if err != nil {
				report := podReport(t)
				if certManager != nil {
					report += "\ncert-manager's log:\n" + certManager.Tail(30)
				}
				t.Fatalf("helm install: %v\n%s\n%s", err, out, report)
			}
			t.Logf("helm install --wait: %v", time.Since(start).Round(time.Millisecond))
			t.Cleanup(func() {
				if out, err := h.Run(context.Background(), "uninstall", release, "--namespace", namespace, "--wait"); err != nil {
					t.Errorf("helm uninstall: %v\n%s", err, out)
				}
			})
			podsReady(t)
			if mode == "certManager" {
				caInjected(t)
			}
			leaderElected(t, time.Minute)
			invalidExamplesRejected(t)
		})
	}
}

// restrictedNamespace creates the release namespace with Pod Security
// "restricted" enforced, as a platform team labels it.
func restrictedNamespace(t *testing.T) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
		"pod-security.kubernetes.io/warn":    "restricted",
	}}}
	_, err := env.Kube.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// tlsSecret stores a kubernetes.io/tls Secret for host signed by a new CA
// and returns the CA as a base64 caBundle.
func tlsSecret(t *testing.T, name, host string) string {
	t.Helper()
	ca, err := framework.NewCA("byo-ca")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := ca.Serving(dir, host); err != nil {
		t.Fatal(err)
	}
	data := map[string][]byte{}
	for _, f := range []string{"tls.crt", "tls.key"} {
		if data[f], err = os.ReadFile(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Type: corev1.SecretTypeTLS, Data: data}
	if _, err := env.Kube.CoreV1().Secrets(namespace).Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Kube.CoreV1().Secrets(namespace).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return base64.StdEncoding.EncodeToString(ca.CertPEM)
}

// podsReady waits until every pod of the release runs on the node, Ready
// by a readiness probe of each container (helm's --wait is content with
// one replica of two), and checks that none restarted.
func podsReady(t *testing.T) {
	t.Helper()
	var pods *corev1.PodList
	err := framework.Poll(2*time.Minute, "every pod of the release Ready", func() (bool, error) {
		var err error
		pods, err = env.Kube.CoreV1().Pods(namespace).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + release})
		if err != nil || len(pods.Items) == 0 {
			return false, err
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName != framework.NodeName || !ready(&p) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, podReport(t))
	}
	for _, p := range pods.Items {
		for _, c := range p.Spec.Containers {
			if c.ReadinessProbe == nil {
				t.Errorf("pod %s container %s has no readiness probe", p.Name, c.Name)
			}
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.RestartCount > 0 {
				t.Errorf("pod %s container %s restarted %d times", p.Name, cs.Name, cs.RestartCount)
			}
		}
	}
	t.Logf("%d pods Ready on %s", len(pods.Items), framework.NodeName)
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// leaderElected waits until the binder's Lease names one of the release's
// running pods.
func leaderElected(t *testing.T, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	name, err := leaderPod(ctx, timeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("leader: %s", name)
}

// invalidExamplesRejected applies examples/ (a valid default class) and
// then examples/invalid/ with kubectl: every invalid object is denied by
// our webhook, which kube-apiserver reached through its Service.
func invalidExamplesRejected(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root := framework.RepoRoot()
	// Ready pods are not yet reachable through the Service until kube-proxy
	// has their endpoints: the first call may be refused for a moment.
	var stderr string
	var err error
	_ = framework.Poll(30*time.Second, "examples/00-class.yaml applied", func() (bool, error) {
		_, stderr, err = env.Kubectl(ctx, nil, "apply", "-f", filepath.Join(root, "examples", "00-class.yaml"))
		return err == nil || !strings.Contains(stderr, "connection refused"), nil
	})
	if err != nil {
		t.Fatalf("kubectl apply examples/00-class.yaml: %v\n%s", err, stderr)
	}
	t.Cleanup(func() {
		_, _, _ = env.Kubectl(context.Background(), nil, "delete", "-f", filepath.Join(root, "examples", "00-class.yaml"))
	})
	dir := filepath.Join(root, "examples", "invalid")
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples in %s: %v", dir, err)
	}
	_, stderr, err = env.Kubectl(ctx, nil, "apply", "-f", dir)
	if err == nil {
		t.Fatalf("kubectl apply -f examples/invalid/ succeeded")
	}
	denials := strings.Count(stderr, "denied the request")
	if denials != len(files) {
		t.Errorf("%d of %d invalid examples denied by a webhook:\n%s", denials, len(files), stderr)
	}
	t.Logf("kubectl apply -f examples/invalid/:\n%s", stderr)
}

// podReport lists the release namespace's pods with their conditions and
// recent events, for failure messages.
func podReport(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, _, _ := env.Kubectl(ctx, nil, "get", "pods,events", "-n", namespace, "-o", "wide")
	return out
}
