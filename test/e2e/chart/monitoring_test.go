package chart

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// The Prometheus operator's CRDs are not on the test API server: the
// PodMonitor and the PrometheusRule are checked as rendered only.

var seriesName = regexp.MustCompile(`\b(snapkeeper_[a-z_]+|snapshot_controller_[a-z_]+|leader_election_master_status)\b`)

// documented fails the test for every series in text that docs/metrics.md
// does not name.
func documented(t *testing.T, what, text string) {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range seriesName.FindAllString(text, -1) {
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_count"), "_sum")
		if !strings.Contains(string(doc), "`"+base+"`") {
			t.Errorf("%s uses %s, which docs/metrics.md does not document", what, name)
		}
	}
}

func TestPrometheusRuleAlertsOnTheDocumentedGauges(t *testing.T) {
	h := framework.NewHelm(t, "")
	r := parseManifest(t, h.Template(t, kubeNew, "--set", "metrics.prometheusRule.enabled=true",
		"--set", "metrics.prometheusRule.pendingFor=20m", "--set", "metrics.prometheusRule.labels.release=prom",
		"--set-json", `metrics.prometheusRule.extraRules=[{"alert":"Mine","expr":"vector(1)"}]`))
	rule := r.get(t, "PrometheusRule", "snapkeeper")
	if rule.GetLabels()["release"] != "prom" {
		t.Errorf("labels %v", rule.GetLabels())
	}
	groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
	if len(groups) != 1 {
		t.Fatalf("%d groups", len(groups))
	}
	rules, _, _ := unstructured.NestedSlice(groups[0].(map[string]any), "rules")
	alerts := map[string]map[string]any{}
	for _, x := range rules {
		m := x.(map[string]any)
		alerts[m["alert"].(string)] = m
	}
	for _, name := range []string{"SnapkeeperSnapshotsPending", "SnapkeeperSnapshotsFailed", "SnapkeeperSnapshotsDeletingStuck",
		"SnapkeeperConflictingDefaultClasses", "SnapkeeperDriverWithoutCSISide", "SnapkeeperControllerDown", "Mine"} {
		a, ok := alerts[name]
		if !ok {
			t.Errorf("no alert %s", name)
			continue
		}
		expr, _ := a["expr"].(string)
		if name != "Mine" && !strings.Contains(expr, `namespace="snapkeeper"`) {
			t.Errorf("%s is not scoped to the release namespace: %s", name, expr)
		}
		documented(t, name, expr)
	}
	if got := alerts["SnapkeeperSnapshotsPending"]["for"]; got != "20m" {
		t.Errorf("pending for %v, want 20m", got)
	}
	if !strings.Contains(alerts["SnapkeeperSnapshotsPending"]["expr"].(string), `phase="pending"`) {
		t.Errorf("pending expr %v", alerts["SnapkeeperSnapshotsPending"]["expr"])
	}
	summary, _, _ := unstructured.NestedString(alerts["SnapkeeperDriverWithoutCSISide"], "annotations", "summary")
	if !strings.Contains(summary, "{{ $labels.driver }}") {
		t.Errorf("Prometheus templates are not passed through: %q", summary)
	}
	// Webhook-only: no binder, nothing to alert on.
	only := parseManifest(t, h.Template(t, kubeNew, "--set", "metrics.prometheusRule.enabled=true", "--set", "controller.enabled=false"))
	if only.kinds()["PrometheusRule"] != 0 {
		t.Error("a PrometheusRule is rendered without the controller")
	}
	if parseManifest(t, h.Template(t, kubeNew)).kinds()["PrometheusRule"] != 0 {
		t.Error("the PrometheusRule is on by default")
	}
}

func TestPodMonitorScrapesBothComponents(t *testing.T) {
	h := framework.NewHelm(t, "")
	r := parseManifest(t, h.Template(t, kubeNew, "--set", "metrics.podMonitor.enabled=true", "--set", "metrics.podMonitor.labels.release=prom"))
	pm := r.get(t, "PodMonitor", "snapkeeper")
	endpoints, _, _ := unstructured.NestedSlice(pm.Object, "spec", "podMetricsEndpoints")
	if len(endpoints) != 2 {
		t.Fatalf("%d endpoints, want the controller's and the webhook's", len(endpoints))
	}
	ports := []string{}
	for _, e := range endpoints {
		ports = append(ports, e.(map[string]any)["port"].(string))
	}
	// The port names must be those of the containers.
	if !slices.Equal(ports, []string{"http", "https"}) {
		t.Errorf("ports %v", ports)
	}
	ca, _, _ := unstructured.NestedString(endpoints[1].(map[string]any), "tlsConfig", "ca", "secret", "name")
	if ca != "snapkeeper-webhook-tls" {
		t.Errorf("webhook endpoint verified against %q", ca)
	}
	if _, err := h.Run(context.Background(), "template", "snapkeeper", framework.ChartDir(), "--kube-version", kubeNew,
		"--set", "metrics.podMonitor.enabled=true", "--set", "metrics.serviceMonitor.enabled=true"); err == nil {
		t.Error("a PodMonitor and a ServiceMonitor together were accepted")
	}
	only := parseManifest(t, h.Template(t, kubeNew, "--set", "metrics.podMonitor.enabled=true", "--set", "controller.enabled=false"))
	endpoints, _, _ = unstructured.NestedSlice(only.get(t, "PodMonitor", "snapkeeper").Object, "spec", "podMetricsEndpoints")
	if len(endpoints) != 1 {
		t.Errorf("webhook-only: %d endpoints", len(endpoints))
	}
}

func TestGrafanaDashboardConfigMap(t *testing.T) {
	h := framework.NewHelm(t, "")
	r := parseManifest(t, h.Template(t, kubeNew, "--set", "metrics.grafanaDashboard.enabled=true", "--set", "metrics.grafanaDashboard.namespace=monitoring"))
	var cm corev1.ConfigMap
	r.into(t, "ConfigMap", "snapkeeper-dashboard", &cm)
	if cm.Labels["grafana_dashboard"] != "1" || cm.Namespace != "monitoring" {
		t.Errorf("ConfigMap %s/%s labels %v", cm.Namespace, cm.Name, cm.Labels)
	}
	var dash struct {
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal([]byte(cm.Data["snapkeeper.json"]), &dash); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	if dash.UID == "" || len(dash.Panels) < 6 {
		t.Fatalf("dashboard %q with %d panels", dash.UID, len(dash.Panels))
	}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			documented(t, "panel "+p.Title, tg.Expr)
		}
	}
}
