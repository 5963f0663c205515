package chart

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// TestGroupConversionIsRegisteredPerCertificateMode: with
// crds.groupConversion.enabled the three group CRDs (and only they) name the
// webhook's /convert, trusted as the admission registration is in each
// certificate mode; without it no CRD converts.
func TestGroupConversionIsRegisteredPerCertificateMode(t *testing.T) {
	h := framework.NewHelm(t, "")
	groupCRDs := map[string]bool{}
	for _, n := range crdNames {
		groupCRDs[n] = strings.HasSuffix(n, ".groupsnapshot.storage.k8s.io")
	}
	for _, c := range []struct {
		mode string
		args []string
	}{
		{"existingSecret", []string{"--set", "certificates.existingSecret.name=tls", "--set", "certificates.existingSecret.caBundle=Y2E="}},
		{"certManager", nil},
		{"selfManaged", nil},
	} {
		args := append([]string{"--set", "crds.groupConversion.enabled=true", "--set", "certificates.mode=" + c.mode}, c.args...)
		r := parseManifest(t, h.Template(t, kubeNew, args...))
		for name, group := range groupCRDs {
			crd := r.get(t, "CustomResourceDefinition", name)
			conv, found, _ := unstructured.NestedMap(crd.Object, "spec", "conversion")
			if !group {
				if found {
					t.Errorf("%s: %s converts: %v", c.mode, name, conv)
				}
				continue
			}
			got, _ := json.Marshal(conv)
			want := `{"strategy":"Webhook","webhook":{"clientConfig":{` +
				map[bool]string{true: `"caBundle":"Y2E=",`, false: ""}[c.mode == "existingSecret"] +
				`"service":{"name":"snapkeeper-webhook","namespace":"snapkeeper","path":"/convert","port":443}},"conversionReviewVersions":["v1"]}}`
			if string(got) != want {
				t.Errorf("%s: %s conversion\n got %s\nwant %s", c.mode, name, got, want)
			}
			inject := crd.GetAnnotations()["cert-manager.io/inject-ca-from"]
			if (inject == "snapkeeper/snapkeeper-webhook") != (c.mode == "certManager") {
				t.Errorf("%s: %s inject-ca-from %q", c.mode, name, inject)
			}
		}
		args0 := webhookArgs(t, r)
		hasFlag := strings.Contains(args0, "--self-managed-conversion-crds=volumegroupsnapshots.groupsnapshot.storage.k8s.io,volumegroupsnapshotcontents.groupsnapshot.storage.k8s.io,volumegroupsnapshotclasses.groupsnapshot.storage.k8s.io")
		role, _ := json.Marshal(r.get(t, "ClusterRole", "snapkeeper-webhook").Object["rules"])
		hasRule := strings.Contains(string(role), `"customresourcedefinitions"`)
		if want := c.mode == "selfManaged"; hasFlag != want || hasRule != want {
			t.Errorf("%s: conversion CRDs flag %v, RBAC rule %v; want both %v\nargs %s\nrules %s", c.mode, hasFlag, hasRule, want, args0, role)
		}
	}
	r := parseManifest(t, h.Template(t, kubeNew))
	for name := range groupCRDs {
		if _, found, _ := unstructured.NestedMap(r.get(t, "CustomResourceDefinition", name).Object, "spec", "conversion"); found {
			t.Errorf("default values: %s converts", name)
		}
	}
	if _, err := h.Run(context.Background(), "template", "snapkeeper", framework.ChartDir(), "--set", "crds.groupConversion.enabled=true", "--set", "webhook.enabled=false"); err == nil ||
		!strings.Contains(err.Error(), "crds.groupConversion.enabled needs webhook.enabled") {
		t.Errorf("conversion without the webhook: %v", err)
	}
}

// webhookArgs joins the webhook container's arguments.
func webhookArgs(t *testing.T, r *rendered) string {
	t.Helper()
	containers, _, _ := unstructured.NestedSlice(r.get(t, "Deployment", "snapkeeper-webhook").Object, "spec", "template", "spec", "containers")
	var args []string
	for _, a := range containers[0].(map[string]any)["args"].([]any) {
		args = append(args, a.(string))
	}
	return strings.Join(args, " ")
}
