package chart

import (
	"bytes"
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// certModes are the values that select each certificate mode, with what
// each needs.
var certModes = map[string][]string{
	"certManager":    {"--set", "certificates.mode=certManager"},
	"selfManaged":    {"--set", "certificates.mode=selfManaged"},
	"existingSecret": {"--set", "certificates.mode=existingSecret", "--set", "certificates.existingSecret.name=my-tls", "--set", "certificates.existingSecret.caBundle=" + base64.StdEncoding.EncodeToString([]byte("-----BEGIN CERTIFICATE-----\n"))},
}

func TestLintAndTemplateInEveryCertificateModeRenderTheSameBytesTwice(t *testing.T) {
	h := framework.NewHelm(t, "")
	for mode, args := range certModes {
		t.Run(mode, func(t *testing.T) {
			for _, kv := range []string{kubeOld, kubeNew} {
				lint := append([]string{"lint", framework.ChartDir(), "--strict", "--kube-version", kv}, args...)
				h.Must(t, lint...)
				first := h.Template(t, kv, args...)
				second := h.Template(t, kv, args...)
				if !bytes.Equal(first, second) {
					t.Fatalf("kube %s: two renders differ:\n%s", kv, cmp.Diff(string(first), string(second)))
				}
			}
			r := parseManifest(t, h.Template(t, kubeNew, args...))
			kinds := r.kinds()
			want := map[string]int{
				"CustomResourceDefinition": 7, "Deployment": 2, "PodDisruptionBudget": 2,
				"ValidatingWebhookConfiguration": 1, "MutatingWebhookConfiguration": 1,
				"ServiceAccount": 2, "ClusterRole": 3, "ClusterRoleBinding": 3,
			}
			for k, n := range want {
				if kinds[k] != n {
					t.Errorf("%d %s rendered, want %d", kinds[k], k, n)
				}
			}
			if kinds["Secret"] != 0 {
				t.Error("the chart renders a Secret: key material in a chart changes on every render")
			}
			// Both configurations trust the serving certificate the same way.
			for _, kind := range []string{"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"} {
				cfg := r.get(t, kind, "snapkeeper-webhook")
				webhooks, _, _ := unstructured.NestedSlice(cfg.Object, "webhooks")
				for _, wh := range webhooks {
					_, hasBundle, _ := unstructured.NestedString(wh.(map[string]any), "clientConfig", "caBundle")
					if hasBundle != (mode == "existingSecret") {
						t.Errorf("%s: caBundle rendered: %v, want it only in existingSecret mode", kind, hasBundle)
					}
				}
				inject := cfg.GetAnnotations()["cert-manager.io/inject-ca-from"]
				if (inject != "") != (mode == "certManager") || (inject != "" && inject != "snapkeeper/snapkeeper-webhook") {
					t.Errorf("%s: cert-manager.io/inject-ca-from = %q in mode %s", kind, inject, mode)
				}
			}
			var dep appsv1.Deployment
			r.into(t, "Deployment", "snapkeeper-webhook", &dep)
			args := strings.Join(dep.Spec.Template.Spec.Containers[0].Args, " ")
			if strings.Contains(args, "--self-managed-certs=true") != (mode == "selfManaged") {
				t.Errorf("webhook args %q in mode %s", args, mode)
			}
			vol := dep.Spec.Template.Spec.Volumes[0]
			switch mode {
			case "selfManaged":
				if vol.EmptyDir == nil {
					t.Errorf("selfManaged: tls volume %+v, want an emptyDir the webhook writes", vol)
				}
				if r.find("Role", "snapkeeper-webhook-certs") == nil {
					t.Error("selfManaged: no Role for the certificate Secret")
				}
			case "certManager":
				if vol.Secret == nil || vol.Secret.SecretName != "snapkeeper-webhook-tls" {
					t.Errorf("certManager: tls volume %+v", vol)
				}
				cert := r.get(t, "Certificate", "snapkeeper-webhook")
				if name, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName"); name != "snapkeeper-webhook-tls" {
					t.Errorf("Certificate writes %q", name)
				}
				if kinds["Issuer"] != 2 || kinds["Certificate"] != 2 {
					t.Errorf("want the self-signed root, the CA and its Issuer: %v", kinds)
				}
			case "existingSecret":
				if vol.Secret == nil || vol.Secret.SecretName != "my-tls" {
					t.Errorf("existingSecret: tls volume %+v", vol)
				}
			}
		})
	}
}

func TestAutoModePicksCertManagerOnlyWhereItIsServed(t *testing.T) {
	h := framework.NewHelm(t, "")
	without := parseManifest(t, h.Template(t, kubeNew))
	if without.kinds()["Certificate"] != 0 {
		t.Error("auto mode rendered cert-manager objects for a cluster without cert-manager")
	}
	with := parseManifest(t, h.Template(t, kubeNew, "--api-versions", "cert-manager.io/v1/Certificate"))
	if with.kinds()["Certificate"] == 0 {
		t.Error("auto mode did not use cert-manager where it is served")
	}
	user := parseManifest(t, h.Template(t, kubeNew, "--set", "certificates.mode=certManager",
		"--set", "certificates.certManager.issuerRef.name=corp-ca", "--set", "certificates.certManager.issuerRef.kind=ClusterIssuer"))
	if user.kinds()["Issuer"] != 0 {
		t.Error("a user issuerRef still renders the chart's own issuers")
	}
	cert := user.get(t, "Certificate", "snapkeeper-webhook")
	if ref, _, _ := unstructured.NestedStringMap(cert.Object, "spec", "issuerRef"); ref["name"] != "corp-ca" || ref["kind"] != "ClusterIssuer" {
		t.Errorf("issuerRef = %v", ref)
	}
}

// webhookEntry is what the tests check of a validating or mutating entry.
type webhookEntry struct {
	kind string
	admissionregistrationv1.ValidatingWebhook
	reinvocation *admissionregistrationv1.ReinvocationPolicyType
}

// webhookEntries decodes both webhook configurations named name (strictly)
// into one list, validating entries first; a configuration that is not
// rendered contributes nothing.
func webhookEntries(t *testing.T, r *rendered, name string) []webhookEntry {
	t.Helper()
	var out []webhookEntry
	if r.find("ValidatingWebhookConfiguration", name) != nil {
		var vwc admissionregistrationv1.ValidatingWebhookConfiguration
		r.into(t, "ValidatingWebhookConfiguration", name, &vwc)
		for _, wh := range vwc.Webhooks {
			out = append(out, webhookEntry{kind: "ValidatingWebhookConfiguration", ValidatingWebhook: wh})
		}
	}
	if r.find("MutatingWebhookConfiguration", name) != nil {
		var mwc admissionregistrationv1.MutatingWebhookConfiguration
		r.into(t, "MutatingWebhookConfiguration", name, &mwc)
		for _, wh := range mwc.Webhooks {
			out = append(out, webhookEntry{kind: "MutatingWebhookConfiguration", reinvocation: wh.ReinvocationPolicy,
				ValidatingWebhook: admissionregistrationv1.ValidatingWebhook{
					Name: wh.Name, ClientConfig: wh.ClientConfig, Rules: wh.Rules, FailurePolicy: wh.FailurePolicy,
					MatchPolicy: wh.MatchPolicy, NamespaceSelector: wh.NamespaceSelector, ObjectSelector: wh.ObjectSelector,
					SideEffects: wh.SideEffects, TimeoutSeconds: wh.TimeoutSeconds,
					AdmissionReviewVersions: wh.AdmissionReviewVersions, MatchConditions: wh.MatchConditions,
				}})
		}
	}
	return out
}

func TestWebhookEntriesHaveTheirOwnPolicyAndMatchConditionsFollowTheKubeVersion(t *testing.T) {
	h := framework.NewHelm(t, "")
	type want struct {
		kind, group, scope, policy string
		ops                        []admissionregistrationv1.OperationType
	}
	cu := []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}
	const validating, mutating = "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"
	// Claims are judged at the mutating stage: the API server drops a data
	// source of the wrong group before validating admission would see it.
	wants := map[string]want{
		"volumesnapshots":             {validating, "snapshot.storage.k8s.io", "Namespaced", "Fail", cu},
		"volumesnapshotcontents":      {validating, "snapshot.storage.k8s.io", "Cluster", "Fail", cu},
		"volumesnapshotclasses":       {validating, "snapshot.storage.k8s.io", "Cluster", "Fail", cu},
		"volumegroupsnapshots":        {validating, "groupsnapshot.storage.k8s.io", "Namespaced", "Fail", cu},
		"volumegroupsnapshotcontents": {validating, "groupsnapshot.storage.k8s.io", "Cluster", "Fail", cu},
		"volumegroupsnapshotclasses":  {validating, "groupsnapshot.storage.k8s.io", "Cluster", "Fail", cu},
		"snapshotschedules":           {validating, "snapkeeper.io", "Namespaced", "Fail", cu},
		"persistentvolumeclaims":      {mutating, "", "Namespaced", "Ignore", []admissionregistrationv1.OperationType{admissionregistrationv1.Create}},
	}
	for _, kv := range []string{kubeOld, kubeNew} {
		t.Run(kv, func(t *testing.T) {
			entries := webhookEntries(t, parseManifest(t, h.Template(t, kv)), "snapkeeper-webhook")
			if len(entries) != len(wants) {
				t.Fatalf("%d webhook entries, want one per resource (%d)", len(entries), len(wants))
			}
			for _, wh := range entries {
				res := strings.TrimSuffix(wh.Name, ".validation.snapkeeper.io")
				w, ok := wants[res]
				if !ok {
					t.Errorf("unexpected entry %s", wh.Name)
					continue
				}
				if wh.kind != w.kind {
					t.Errorf("%s is in a %s, want a %s", wh.Name, wh.kind, w.kind)
				}
				if (wh.kind == mutating) != (wh.reinvocation != nil && *wh.reinvocation == admissionregistrationv1.NeverReinvocationPolicy) {
					t.Errorf("%s: reinvocationPolicy %v, want Never on the mutating entry (it never patches)", wh.Name, wh.reinvocation)
				}
				if len(wh.Rules) != 1 {
					t.Fatalf("%s: %d rules", wh.Name, len(wh.Rules))
				}
				rule := wh.Rules[0]
				version := "v1"
				if res == "snapshotschedules" {
					version = "v1alpha1" // our own kind's only version
				}
				if !slices.Equal(rule.Resources, []string{res}) || !slices.Equal(rule.APIGroups, []string{w.group}) ||
					!slices.Equal(rule.APIVersions, []string{version}) || string(*rule.Scope) != w.scope || !slices.Equal(rule.Operations, w.ops) {
					t.Errorf("%s: rule %+v", wh.Name, rule)
				}
				if string(*wh.FailurePolicy) != w.policy {
					t.Errorf("%s: failurePolicy %s, want %s", wh.Name, *wh.FailurePolicy, w.policy)
				}
				if *wh.SideEffects != admissionregistrationv1.SideEffectClassNone || !slices.Equal(wh.AdmissionReviewVersions, []string{"v1"}) || *wh.TimeoutSeconds != 5 {
					t.Errorf("%s: sideEffects %v, reviews %v, timeout %d", wh.Name, *wh.SideEffects, wh.AdmissionReviewVersions, *wh.TimeoutSeconds)
				}
				if wh.ClientConfig.Service == nil || wh.ClientConfig.Service.Path == nil || *wh.ClientConfig.Service.Path != "/validate/"+res {
					t.Errorf("%s: clientConfig %+v", wh.Name, wh.ClientConfig)
				}
				excluded := wh.NamespaceSelector.MatchExpressions
				if len(excluded) != 1 || excluded[0].Key != "kubernetes.io/metadata.name" || !slices.Equal(excluded[0].Values, []string{"kube-system", "snapkeeper"}) {
					t.Errorf("%s: namespaceSelector %+v, want kube-system and the release namespace excluded", wh.Name, wh.NamespaceSelector)
				}
				conds := map[string]string{}
				for _, c := range wh.MatchConditions {
					conds[c.Name] = c.Expression
				}
				if kv == kubeOld {
					if len(conds) != 0 {
						t.Errorf("%s: matchConditions rendered for %s, which rejects them", wh.Name, kv)
					}
					continue
				}
				if !strings.Contains(conds["not-snapkeeper-controller"], `"system:serviceaccount:snapkeeper:snapkeeper-controller"`) {
					t.Errorf("%s: the controller's requests are not skipped: %v", wh.Name, conds)
				}
				if _, ok := conds["has-data-source"]; ok != (res == "persistentvolumeclaims") {
					t.Errorf("%s: has-data-source condition present: %v", wh.Name, ok)
				}
			}
		})
	}

	t.Run("values change one entry only", func(t *testing.T) {
		entries := webhookEntries(t, parseManifest(t, h.Template(t, kubeNew,
			"--set", "webhook.admission.rules.persistentvolumeclaims.failurePolicy=Fail",
			"--set", "webhook.admission.rules.volumesnapshotcontents.enabled=false",
			"--set", "webhook.admission.timeoutSeconds=10",
			"--set", "webhook.admission.matchConditions=false")), "snapkeeper-webhook")
		if len(entries) != 7 {
			t.Fatalf("%d entries, want 7", len(entries))
		}
		for _, wh := range entries {
			if *wh.FailurePolicy != admissionregistrationv1.Fail || *wh.TimeoutSeconds != 10 || len(wh.MatchConditions) != 0 {
				t.Errorf("%s: policy %s, timeout %d, conditions %d", wh.Name, *wh.FailurePolicy, *wh.TimeoutSeconds, len(wh.MatchConditions))
			}
		}
	})

	t.Run("a configuration without entries is not rendered", func(t *testing.T) {
		noClaims := parseManifest(t, h.Template(t, kubeNew, "--set", "webhook.admission.rules.persistentvolumeclaims.enabled=false")).kinds()
		if noClaims["MutatingWebhookConfiguration"] != 0 || noClaims["ValidatingWebhookConfiguration"] != 1 {
			t.Errorf("claims disabled: %v", noClaims)
		}
		claimsOnly := parseManifest(t, h.Template(t, kubeNew,
			"--set", "webhook.admission.rules.volumesnapshots.enabled=false",
			"--set", "webhook.admission.rules.volumesnapshotcontents.enabled=false",
			"--set", "webhook.admission.rules.volumesnapshotclasses.enabled=false",
			"--set", "webhook.admission.rules.volumegroupsnapshots.enabled=false",
			"--set", "webhook.admission.rules.volumegroupsnapshotcontents.enabled=false",
			"--set", "webhook.admission.rules.volumegroupsnapshotclasses.enabled=false",
			"--set", "webhook.admission.rules.snapshotschedules.enabled=false")).kinds()
		if claimsOnly["MutatingWebhookConfiguration"] != 1 || claimsOnly["ValidatingWebhookConfiguration"] != 0 {
			t.Errorf("snapshot kinds disabled: %v", claimsOnly)
		}
	})
}

func TestCRDsAreTheGeneratedOnesWithTheKeepPolicyAndNoConversion(t *testing.T) {
	h := framework.NewHelm(t, "")
	r := parseManifest(t, h.Template(t, kubeNew, "--set", "crds.labels.team=storage"))
	files, err := filepath.Glob(filepath.Join(framework.CRDDir(), "*.yaml"))
	if err != nil || len(files) != 7 {
		t.Fatalf("want 7 generated CRDs (6 snapshot kinds and SnapshotSchedule), got %d (%v)", len(files), err)
	}
	for _, f := range files {
		want := &unstructured.Unstructured{}
		if err := framework.ReadYAML(f, &want.Object); err != nil {
			t.Fatal(err)
		}
		got := r.get(t, "CustomResourceDefinition", want.GetName())
		if got.GetAnnotations()["helm.sh/resource-policy"] != "keep" {
			t.Errorf("%s: no helm.sh/resource-policy: keep", got.GetName())
		}
		if got.GetLabels()["team"] != "storage" {
			t.Errorf("%s: crds.labels not applied", got.GetName())
		}
		if _, found, _ := unstructured.NestedFieldNoCopy(got.Object, "spec", "conversion"); found {
			t.Errorf("%s: conversion stanza rendered", got.GetName())
		}
		if diff := cmp.Diff(want.Object["spec"], got.Object["spec"]); diff != "" {
			t.Errorf("%s: rendered spec differs from %s:\n%s", got.GetName(), filepath.Base(f), diff)
		}
		for k, v := range want.GetAnnotations() {
			if got.GetAnnotations()[k] != v {
				t.Errorf("%s: annotation %s lost", got.GetName(), k)
			}
		}
	}
	if n := parseManifest(t, h.Template(t, kubeNew, "--set", "crds.install=false")).kinds()["CustomResourceDefinition"]; n != 0 {
		t.Errorf("crds.install=false still renders %d CRDs", n)
	}
}

func TestSchemaRejectsMistakes(t *testing.T) {
	h := framework.NewHelm(t, "")
	bad := map[string][]string{
		"a misspelt top-level key":      {"--set", "controler.replicas=1"},
		"an unknown failure policy":     {"--set", "webhook.admission.rules.volumesnapshots.failurePolicy=Warn"},
		"an unknown certificate mode":   {"--set", "certificates.mode=letsencrypt"},
		"a timeout the API server caps": {"--set", "webhook.admission.timeoutSeconds=31"},
		"existingSecret without a name": {"--set", "certificates.mode=existingSecret", "--set", "certificates.existingSecret.caBundle=Zm9v"},
		"existingSecret without a CA":   {"--set", "certificates.mode=existingSecret", "--set", "certificates.existingSecret.name=x"},
	}
	for name, args := range bad {
		t.Run(name, func(t *testing.T) {
			all := append([]string{"template", "snapkeeper", framework.ChartDir(), "--kube-version", kubeNew}, args...)
			if _, err := h.Run(context.Background(), all...); err == nil {
				t.Error("helm template accepted it")
			}
		})
	}
}

// The example driver chart shows how a CSI driver runs our CSI side through
// the named templates; it must render with them.
func TestTheDriverChartExampleRendersTheCSISide(t *testing.T) {
	dir := driverChart(t)
	h := framework.NewHelm(t, "")
	h.Must(t, "lint", dir, "--kube-version", kubeNew)
	r := parseManifest(t, []byte(h.Must(t, "template", "drv", dir, "--namespace", "drivers", "--kube-version", kubeNew)))
	var dep appsv1.Deployment
	r.into(t, "Deployment", "drv-controller", &dep)
	var side *corev1.Container
	for i, c := range dep.Spec.Template.Spec.Containers {
		if c.Name == "snapkeeper-csi-side" {
			side = &dep.Spec.Template.Spec.Containers[i]
		}
	}
	if side == nil {
		t.Fatal("no snapkeeper-csi-side container")
	}
	for _, a := range []string{"--components=csi", "--csi-address=/csi/csi.sock", "--leader-election=true"} {
		if !slices.Contains(side.Args, a) {
			t.Errorf("CSI side args %v lack %s", side.Args, a)
		}
	}
	if len(side.VolumeMounts) != 1 || side.VolumeMounts[0].Name != "socket-dir" {
		t.Errorf("CSI side mounts %+v", side.VolumeMounts)
	}
	// Root only for the driver's root-owned socket (no runAsUser unless the
	// driver chart passes one), and nothing else of root's.
	if sc := side.SecurityContext; !restrictedContainer(sc, false) || sc.RunAsUser != nil {
		t.Errorf("CSI side securityContext %+v", sc)
	}
	if k := r.kinds(); k["CustomResourceDefinition"] != 0 || k["ValidatingWebhookConfiguration"] != 0 || k["MutatingWebhookConfiguration"] != 0 {
		t.Errorf("the subchart rendered more than templates: %v", k)
	}
	var role rbacv1.ClusterRole
	r.into(t, "ClusterRole", "drv-snapshotter", &role)
	if !slices.ContainsFunc(role.Rules, func(p rbacv1.PolicyRule) bool { return slices.Contains(p.Resources, "secrets") }) {
		t.Error("the CSI side rules lack secrets (snapshotter secrets of the class)")
	}
}

// driverChart copies the example driver chart with this chart as its
// unpacked dependency.
func driverChart(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "driver-chart")
	copyDir(t, filepath.Join(framework.ChartDir(), "examples", "driver-chart"), dir)
	copyDir(t, framework.ChartDir(), filepath.Join(dir, "charts", "snapkeeper"))
	if err := os.RemoveAll(filepath.Join(dir, "charts", "snapkeeper", "examples")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return os.WriteFile(out, b, info.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Every value of values.yaml has a row in README.md.
func TestREADMEDocumentsEveryValue(t *testing.T) {
	var values map[string]any
	if err := framework.ReadYAML(filepath.Join(framework.ChartDir(), "values.yaml"), &values); err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(framework.ChartDir(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	// Free-form Kubernetes structures are documented as one value.
	opaque := []string{"resources", "podSecurityContext", "containerSecurityContext", "updateStrategy", "livenessProbe", "readinessProbe"}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			key := prefix + k
			if sub, ok := v.(map[string]any); ok && len(sub) > 0 && !slices.Contains(opaque, k) {
				walk(key+".", sub)
				continue
			}
			if !strings.Contains(string(readme), "| `"+key+"` |") {
				t.Errorf("README.md has no row for %s", key)
			}
		}
	}
	walk("", values)
}

func TestOptionalObjectsRenderValidObjects(t *testing.T) {
	h := framework.NewHelm(t, "")
	r := parseManifest(t, h.Template(t, kubeNew,
		"--set", "networkPolicy.enabled=true",
		"--set", "metrics.serviceMonitor.enabled=true",
		"--set", "csiSide.rbac.create=true",
		"--set", "csiSide.rbac.serviceAccounts[0].name=ebs-csi-controller",
		"--set", "csiSide.rbac.serviceAccounts[0].namespace=kube-system",
		"--set", "csiSide.rbac.serviceAccounts[1].name=other-driver",
		"--set", "csiSide.rbac.serviceAccounts[1].namespace=kube-system"))
	for _, name := range []string{"snapkeeper-controller", "snapkeeper-webhook"} {
		var np networkingv1.NetworkPolicy
		r.into(t, "NetworkPolicy", name, &np)
		if len(np.Spec.Ingress) != 1 || len(np.Spec.PolicyTypes) != 1 {
			t.Errorf("%s: NetworkPolicy %+v", name, np.Spec)
		}
	}
	for _, name := range []string{"snapkeeper-controller-metrics", "snapkeeper-webhook-metrics"} {
		var svc corev1.Service
		r.into(t, "Service", name, &svc)
	}
	sm := r.get(t, "ServiceMonitor", "snapkeeper")
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(endpoints) != 2 {
		t.Errorf("ServiceMonitor has %d endpoints, want the controller's and the webhook's", len(endpoints))
	}
	var binding rbacv1.ClusterRoleBinding
	r.into(t, "ClusterRoleBinding", "snapkeeper-csi-side", &binding)
	if len(binding.Subjects) != 2 {
		t.Errorf("CSI side binding subjects %+v", binding.Subjects)
	}
	var role rbacv1.Role
	r.into(t, "Role", "snapkeeper-csi-side-leader-election", &role)
	if role.Namespace != "kube-system" {
		t.Errorf("Lease Role in %q", role.Namespace)
	}
	for _, wh := range webhookEntries(t, r, "snapkeeper-webhook") {
		if !strings.Contains(wh.MatchConditions[0].Expression, "system:serviceaccount:kube-system:ebs-csi-controller") {
			t.Errorf("%s: the CSI side's requests are not skipped: %s", wh.Name, wh.MatchConditions[0].Expression)
		}
	}

	// Each component alone.
	only := parseManifest(t, h.Template(t, kubeNew, "--set", "webhook.enabled=false"))
	if k := only.kinds(); k["ValidatingWebhookConfiguration"] != 0 || k["MutatingWebhookConfiguration"] != 0 || k["Deployment"] != 1 {
		t.Errorf("webhook.enabled=false renders %v", k)
	}
	only = parseManifest(t, h.Template(t, kubeNew, "--set", "controller.enabled=false", "--set", "crds.install=false"))
	if k := only.kinds(); k["Deployment"] != 1 || k["ClusterRole"] != 1 {
		t.Errorf("controller.enabled=false renders %v", k)
	}
}

// Both binaries learn their container's memory limit through the downward
// API and keep Go's heap under it (pkg/memlimit); a user's GOMEMLIMIT in
// extraEnv comes after it and wins.
func TestContainersGetTheirMemoryLimit(t *testing.T) {
	h := framework.NewHelm(t, "")
	r := parseManifest(t, h.Template(t, kubeNew, "--set", "webhook.extraEnv[0].name=GOMEMLIMIT", "--set", "webhook.extraEnv[0].value=100MiB"))
	for _, name := range []string{"snapkeeper-controller", "snapkeeper-webhook"} {
		var dep appsv1.Deployment
		r.into(t, "Deployment", name, &dep)
		c := dep.Spec.Template.Spec.Containers[0]
		if _, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok {
			t.Errorf("%s: no memory limit", name)
		}
		var found bool
		for _, ev := range c.Env {
			if ev.Name == "SNAPKEEPER_MEMORY_LIMIT" {
				found = ev.ValueFrom != nil && ev.ValueFrom.ResourceFieldRef != nil && ev.ValueFrom.ResourceFieldRef.Resource == "limits.memory"
			}
		}
		if !found {
			t.Errorf("%s: env %+v has no SNAPKEEPER_MEMORY_LIMIT from limits.memory", name, c.Env)
		}
		if name == "snapkeeper-webhook" && c.Env[len(c.Env)-1].Name != "GOMEMLIMIT" {
			t.Errorf("%s: extraEnv's GOMEMLIMIT is not in the env: %+v", name, c.Env)
		}
	}
}
