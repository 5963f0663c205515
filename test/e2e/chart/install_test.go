package chart

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// installArgs are the values every install on the shared API server uses:
// the CRDs there belong to the framework (TestCRDs... cover adoption).
var installArgs = []string{"--set", "crds.install=false"}

// existingTLSSecret creates a kubernetes.io/tls Secret with a serving
// certificate for the webhook Service (and 127.0.0.1) and returns the
// caBundle value for it.
func existingTLSSecret(t *testing.T, env *framework.Env, ns, name, serviceDNS string) (caBundle string, dir string) {
	t.Helper()
	ca, err := framework.NewCA("snapkeeper-test-ca")
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	if err := ca.Serving(dir, serviceDNS); err != nil {
		t.Fatal(err)
	}
	data := map[string][]byte{}
	for _, f := range []string{"tls.crt", "tls.key", "ca.crt"} {
		if data[f], err = os.ReadFile(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Type: corev1.SecretTypeTLS, Data: data}
	framework.MustCreate(t, env.Kube.CoreV1().Secrets(ns).Create, sec)
	return base64.StdEncoding.EncodeToString(ca.CertPEM), dir
}

// canI asks the API server whether the ServiceAccount may do verb on
// resource (in ns when not empty), through impersonation. resource is
// kubectl's TYPE[/NAME], with "#subresource" appended for a subresource
// (pods#exec).
func canI(t *testing.T, env *framework.Env, ns, sa, verb, resource, inNS string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args := []string{"auth", "can-i", verb, "--as=system:serviceaccount:" + ns + ":" + sa}
	if res, sub, ok := strings.Cut(resource, "#"); ok {
		args = append(args, res, "--subresource="+sub)
	} else {
		args = append(args, resource)
	}
	if inNS != "" {
		args = append(args, "--namespace", inNS)
	} else {
		args = append(args, "--all-namespaces")
	}
	out, stderr, err := env.Kubectl(ctx, nil, args...)
	answer := strings.TrimSpace(out)
	if answer != "yes" && answer != "no" {
		t.Fatalf("kubectl %s: %q %v %s", strings.Join(args, " "), out, err, stderr)
	}
	return answer == "yes"
}

// reviewAllows asks the authorizer with a SubjectAccessReview.
func reviewAllows(t *testing.T, env *framework.Env, ns, sa string, attrs authorizationv1.ResourceAttributes) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:               "system:serviceaccount:" + ns + ":" + sa,
		Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
		ResourceAttributes: &attrs,
	}}
	out, err := env.Kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out.Status.Allowed
}

type permission struct {
	verb, resource, ns string
	allowed            bool
}

func checkPermissions(t *testing.T, env *framework.Env, ns, sa string, perms []permission) {
	t.Helper()
	for _, p := range perms {
		if got := canI(t, env, ns, sa, p.verb, p.resource, p.ns); got != p.allowed {
			t.Errorf("%s may %s %s in %q: %v, want %v", sa, p.verb, p.resource, p.ns, got, p.allowed)
		}
	}
}

// podSecurityAdmits creates each Deployment's pod template as a Pod, in
// dry-run, in a namespace that enforces the restricted Pod Security
// Standard: the API server's PodSecurity admission is the judge.
func podSecurityAdmits(t *testing.T, env *framework.Env, ns string, deployments ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	restricted := env.Namespace(t)
	nsObj, err := env.Kube.CoreV1().Namespaces().Get(ctx, restricted, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nsObj.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	nsObj.Labels["pod-security.kubernetes.io/enforce-version"] = "latest"
	if _, err := env.Kube.CoreV1().Namespaces().Update(ctx, nsObj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range deployments {
		dep, err := env.Kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: name + "-", Labels: dep.Spec.Template.Labels}, Spec: dep.Spec.Template.Spec}
		if _, err := env.Kube.CoreV1().Pods(restricted).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Errorf("the restricted profile rejects the pod of %s: %v", name, err)
		}
	}
}

func TestInstallEveryCertificateModeOnTheAPIServer(t *testing.T) {
	env, h := clusterHelm(t)
	installCertManagerCRDs(t, env)

	for _, mode := range []string{"certManager", "selfManaged", "existingSecret"} {
		t.Run(mode, func(t *testing.T) {
			ns := env.Namespace(t)
			release := "sk"
			args := append([]string{"install", release, framework.ChartDir(), "--namespace", ns, "--set", "certificates.mode=" + mode}, installArgs...)
			var caBundle string
			if mode == "existingSecret" {
				caBundle, _ = existingTLSSecret(t, env, ns, "byo-tls", "sk-snapkeeper-webhook."+ns+".svc")
				args = append(args, "--set", "certificates.existingSecret.name=byo-tls", "--set", "certificates.existingSecret.caBundle="+caBundle)
			}
			out := h.Must(t, args...)
			uninstallOnCleanup(t, h, release, ns)
			if !strings.Contains(out, "STATUS: deployed") || !strings.Contains(out, "Check the install") {
				t.Errorf("install output lacks the status or the notes:\n%s", out)
			}

			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			reg := env.Kube.AdmissionregistrationV1()
			vwc, err := reg.ValidatingWebhookConfigurations().Get(ctx, "sk-snapkeeper-webhook", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			mwc, err := reg.MutatingWebhookConfigurations().Get(ctx, "sk-snapkeeper-webhook", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			// The snapshot, group and schedule kinds are validated, claims judged
			// at the mutating stage, and the API server kept the matchConditions
			// (its version is past 1.30).
			if len(vwc.Webhooks) != 7 || len(vwc.Webhooks[0].MatchConditions) != 1 {
				t.Errorf("validating configuration as stored: %d entries, %d conditions on the first", len(vwc.Webhooks), len(vwc.Webhooks[0].MatchConditions))
			}
			if len(mwc.Webhooks) != 1 || mwc.Webhooks[0].Name != "persistentvolumeclaims.validation.snapkeeper.io" || len(mwc.Webhooks[0].MatchConditions) != 2 ||
				mwc.Webhooks[0].ReinvocationPolicy == nil || *mwc.Webhooks[0].ReinvocationPolicy != admissionregistrationv1.NeverReinvocationPolicy {
				t.Errorf("mutating configuration as stored: %+v", mwc.Webhooks)
			}
			bundles := map[string][]byte{}
			for _, wh := range vwc.Webhooks {
				bundles["validating "+wh.Name] = wh.ClientConfig.CABundle
			}
			for _, wh := range mwc.Webhooks {
				bundles["mutating "+wh.Name] = wh.ClientConfig.CABundle
			}
			for name, b := range bundles {
				if got := base64.StdEncoding.EncodeToString(b); (mode == "existingSecret") != (got == caBundle && got != "") {
					t.Errorf("%s: caBundle %q", name, got)
				}
			}
			if mode == "certManager" {
				out, stderr, err := env.Kubectl(ctx, nil, "get", "issuers.cert-manager.io,certificates.cert-manager.io", "-n", ns, "-o", "name")
				if err != nil {
					t.Fatalf("%v: %s", err, stderr)
				}
				for _, want := range []string{"issuer.cert-manager.io/sk-snapkeeper-webhook-ca", "certificate.cert-manager.io/sk-snapkeeper-webhook"} {
					if !strings.Contains(out, want) {
						t.Errorf("%s not stored:\n%s", want, out)
					}
				}
			}

			podSecurityAdmits(t, env, ns, "sk-snapkeeper-controller", "sk-snapkeeper-webhook")

			other := env.Namespace(t)
			checkPermissions(t, env, ns, "sk-snapkeeper-webhook", []permission{
				{"list", "volumesnapshots.snapshot.storage.k8s.io", "", true},
				{"watch", "volumesnapshotcontents.snapshot.storage.k8s.io", "", true},
				{"create", "volumesnapshots.snapshot.storage.k8s.io", other, false},
				{"patch", "volumesnapshots.snapshot.storage.k8s.io", other, false},
				{"update", "volumesnapshotcontents.snapshot.storage.k8s.io", "", false},
				{"delete", "volumesnapshotclasses.snapshot.storage.k8s.io", "", false},
				{"patch", "persistentvolumeclaims", other, false},
				{"get", "secrets/anything", ns, false},
				{"get", "secrets/anything", other, false},
				{"patch", "validatingwebhookconfigurations/some-other-webhook", "", false},
				{"patch", "mutatingwebhookconfigurations/some-other-webhook", "", false},
				{"get", "secrets/sk-snapkeeper-webhook-tls", ns, mode == "selfManaged"},
				{"update", "secrets/sk-snapkeeper-webhook-tls", ns, mode == "selfManaged"},
				{"patch", "validatingwebhookconfigurations/sk-snapkeeper-webhook", "", mode == "selfManaged"},
				{"patch", "mutatingwebhookconfigurations/sk-snapkeeper-webhook", "", mode == "selfManaged"},
				{"update", "mutatingwebhookconfigurations/sk-snapkeeper-webhook", "", false},
			})
			// No CRD serves volumepopulators here, so kubectl cannot map the
			// name; ask the authorizer directly.
			for verb, want := range map[string]bool{"list": true, "watch": false, "get": false} {
				if got := reviewAllows(t, env, ns, "sk-snapkeeper-webhook", authorizationv1.ResourceAttributes{
					Verb: verb, Group: "populator.storage.k8s.io", Resource: "volumepopulators"}); got != want {
					t.Errorf("the webhook may %s volumepopulators: %v, want %v (it lists them on demand)", verb, got, want)
				}
			}
			checkPermissions(t, env, ns, "sk-snapkeeper-controller", []permission{
				{"get", "secrets", other, false},
				{"list", "secrets", "", false},
				{"create", "volumesnapshotcontents.snapshot.storage.k8s.io", "", true},
				{"delete", "volumesnapshotcontents.snapshot.storage.k8s.io", "", true},
				{"patch", "volumesnapshots.snapshot.storage.k8s.io/status", other, true},
				{"update", "persistentvolumeclaims", other, true},
				{"patch", "persistentvolumeclaims", other, false},
				{"delete", "persistentvolumeclaims", other, false},
				{"update", "persistentvolumes", "", false},
				{"create", "events", other, true},
				{"update", "leases.coordination.k8s.io/snapshot-controller-leader", ns, true},
				{"update", "leases.coordination.k8s.io/another-lease", ns, false},
				{"create", "leases.coordination.k8s.io", other, false},
			})
		})
	}
}
