package metrics

// Prometheus' own tools on what the chart ships and the binaries serve
// (docs/metrics.md, "Checking alerts, dashboard and metrics"):
//
//   - the rendered PrometheusRule passes `promtool check rules`, and the
//     unit tests of testdata/alerts_test.yaml pass `promtool test rules`,
//     with a firing and a silent case for every alert;
//   - real scrapes of the binder, the CSI side and the webhook pass
//     `promtool check metrics`, apart from the findings in lintExceptions;
//   - every PromQL expression of the rules and of the Grafana dashboard
//     parses (bin/promql-series, Prometheus' parser) and every series it
//     reads is in those scrapes, apart from outsideSeries.
//
// bin/promtool and bin/promql-series come from hack/tools/promtool (`make
// tools`).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/snapkeeper/snapkeeper/pkg/apis/snapkeeper/v1alpha1"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

const (
	// rulesFile is the name testdata/alerts_test.yaml loads the rendered
	// rule groups from, next to itself.
	rulesFile = "rendered-prometheusrule.yaml"
	// alertTests are the promtool unit tests of the chart's alerts.
	alertTests = "alerts_test.yaml"
	// The release the unit tests expect: name and namespace snapkeeper.
	release = "snapkeeper"
)

// lintFinding is one problem `promtool check metrics` reports: the metric
// family and promlint's text.
type lintFinding struct{ Metric, Problem string }

// lintExceptions are the findings of `promtool check metrics` that stay,
// each with the reason; docs/metrics.md lists the same ones (section
// "Findings of promtool check metrics"). Any other finding fails the test,
// and so does an exception that no longer occurs. Empty: promtool 3.16.0
// finds nothing in the three scrapes. An entry reads
//
//	{"metric_name", "promlint's text"}: "why the finding stays",
var lintExceptions = map[lintFinding]string{}

// outsideSeries are series the rules and the dashboard read that none of
// our binaries serves, with where they come from.
var outsideSeries = map[string]string{
	"up": "recorded by Prometheus itself for every scrape target (SnapkeeperControllerDown)",
}

func tool(t *testing.T, name string) string {
	t.Helper()
	p, err := framework.Tool(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// runTool runs bin/name with args in dir, stdin as its input; it returns
// the combined output and the exit code (-1 when it did not run to an end).
func runTool(t *testing.T, dir string, stdin []byte, name string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, tool(t, name), args...)
	cmd.Dir = dir
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &exit) && exit.Exited():
		return string(out), exit.ExitCode()
	default:
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		return "", -1
	}
}

// ruleGroups is a Prometheus rule file: what a PrometheusRule's spec holds.
type ruleGroups struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert  string `json:"alert,omitempty"`
			Record string `json:"record,omitempty"`
			Expr   string `json:"expr"`
		} `json:"rules"`
	} `json:"groups"`
}

// renderedRule renders the chart's PrometheusRule with the default values
// as release snapkeeper in namespace snapkeeper, and returns its spec as a
// Prometheus rule file, raw and parsed.
func renderedRule(t *testing.T) ([]byte, ruleGroups) {
	t.Helper()
	h := framework.NewHelm(t, "")
	out := h.Must(t, "template", release, filepath.Join(framework.RepoRoot(), "charts", "snapkeeper"),
		"--namespace", release, "--set", "metrics.prometheusRule.enabled=true",
		"--show-only", "templates/prometheusrule.yaml")
	var obj struct {
		Kind string          `json:"kind"`
		Spec json.RawMessage `json:"spec"`
	}
	if err := yaml.Unmarshal([]byte(out), &obj); err != nil {
		t.Fatalf("rendered PrometheusRule: %v\n%s", err, out)
	}
	if obj.Kind != "PrometheusRule" || len(obj.Spec) == 0 {
		t.Fatalf("rendered no PrometheusRule spec:\n%s", out)
	}
	raw, err := yaml.JSONToYAML(obj.Spec)
	if err != nil {
		t.Fatal(err)
	}
	var groups ruleGroups
	if err := yaml.Unmarshal(raw, &groups); err != nil {
		t.Fatal(err)
	}
	return raw, groups
}

func (g ruleGroups) alerts() []string {
	var names []string
	for _, grp := range g.Groups {
		for _, r := range grp.Rules {
			if r.Alert != "" {
				names = append(names, r.Alert)
			}
		}
	}
	return names
}

func testdata(name string) string {
	return filepath.Join(framework.RepoRoot(), "test", "e2e", "metrics", "testdata", name)
}

// The rendered rule is valid for Prometheus (`promtool check rules`, every
// lint fatal) and its alerts behave as testdata/alerts_test.yaml expects
// (`promtool test rules`).
func TestPrometheusRulePassesPromtool(t *testing.T) {
	raw, _ := renderedRule(t)
	tests, err := os.ReadFile(testdata(alertTests))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, rulesFile), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, alertTests), tests, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code := runTool(t, dir, nil, "promtool", "check", "rules", "--lint=all", "--lint-fatal", rulesFile); code != 0 {
		t.Errorf("promtool check rules (exit %d):\n%s\nrules:\n%s", code, out, raw)
	}
	if out, code := runTool(t, dir, nil, "promtool", "test", "rules", alertTests); code != 0 {
		t.Errorf("promtool test rules %s (exit %d):\n%s", testdata(alertTests), code, out)
	}
}

// alertCases reads testdata/alerts_test.yaml: its rule files, and per
// alert name the number of cases expecting it to fire and to stay silent.
func alertCases(t *testing.T) (ruleFiles []string, firing, silent map[string]int) {
	t.Helper()
	b, err := os.ReadFile(testdata(alertTests))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		RuleFiles []string `json:"rule_files"`
		Tests     []struct {
			Name          string `json:"name"`
			AlertRuleTest []struct {
				AlertName string `json:"alertname"`
				ExpAlerts []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", testdata(alertTests), err)
	}
	firing, silent = map[string]int{}, map[string]int{}
	for _, tc := range f.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				firing[a.AlertName]++
			} else {
				silent[a.AlertName]++
			}
		}
	}
	return f.RuleFiles, firing, silent
}

// Every alert of the rendered rule has a case in testdata/alerts_test.yaml
// where it fires and one where it stays silent, and the file tests no
// alert the chart does not render.
func TestEveryAlertHasAFiringAndASilentCase(t *testing.T) {
	_, groups := renderedRule(t)
	files, firing, silent := alertCases(t)
	if !slices.Equal(files, []string{rulesFile}) {
		t.Errorf("%s loads %v, want [%s] (the file the test writes the rendered groups to)", alertTests, files, rulesFile)
	}
	alerts := groups.alerts()
	if len(alerts) == 0 {
		t.Fatal("the rendered PrometheusRule has no alert")
	}
	for _, a := range alerts {
		if firing[a] == 0 {
			t.Errorf("alert %s has no case in testdata/%s where it fires", a, alertTests)
		}
		if silent[a] == 0 {
			t.Errorf("alert %s has no case in testdata/%s where it stays silent", a, alertTests)
		}
	}
	for a := range mapsUnion(firing, silent) {
		if !slices.Contains(alerts, a) {
			t.Errorf("testdata/%s tests alert %s, which the chart does not render", alertTests, a)
		}
	}
}

func mapsUnion(ms ...map[string]int) map[string]bool {
	out := map[string]bool{}
	for _, m := range ms {
		for k := range m {
			out[k] = true
		}
	}
	return out
}

// scrape is one /metrics body in the text format.
type scrape struct {
	component string
	body      []byte
}

// realScrapes runs the chart's shape of the product on the test plane (the
// binder with leader election and group snapshots on, as the chart starts
// it; a CSI side next to the mock driver; the webhook registered with the
// API server), takes a snapshot through all three (created, ready,
// deleted), with a default snapshot class and a default group snapshot
// class of the driver, and scrapes each process's /metrics. Families that
// only appear on other paths are not in it (docs/metrics.md lists them).
func realScrapes(t *testing.T) []scrape {
	t.Helper()
	s := framework.NewScenario(t, framework.ScenarioOptions{NoController: true, DefaultClass: true})
	wh := s.Env.StartWebhook(t)
	groups := s.Env.Snap.GroupsnapshotV1().VolumeGroupSnapshotClasses()
	groupClass := framework.MustCreate(t, groups.Create, framework.GroupSnapshotClass("group-class-"+s.NS, s.Drv.Name, "Delete", true))
	t.Cleanup(func() { groups.Delete(context.Background(), groupClass.Name, metav1.DeleteOptions{}) })
	lease := []string{"--leader-election=true", "--leader-election-namespace=" + s.NS}
	binder := s.StartController(t, append([]string{"--components=binder,schedules", "--feature-gates=CSIVolumeGroupSnapshot=true"}, lease...)...)
	csi := s.StartController(t, append([]string{"--components=csi", "--csi-address=" + s.Drv.Socket}, lease...)...)

	s.PVC(t, "data")
	// A schedule, for the schedule component's series (it cuts nothing
	// before next year).
	yearly := framework.EveryMinute(s.NS, "yearly", "data", v1alpha1.RetentionPolicy{KeepLast: ptr.To[int32](1)})
	yearly.Spec.Schedule = "@yearly"
	if _, err := s.Env.Schedules(t).Schedules(s.NS).Create(context.Background(), yearly, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.Snapshot(t, "snap", "data", nil)
	s.WaitReady(t, "snap", 60*time.Second)
	s.DeleteSnapshot(t, "snap")
	s.WaitSnapshotGone(t, "snap")

	drv := `driver="` + s.Drv.Name + `"`
	waitMetric(t, binder, 1, "snapkeeper_snapshot_time_to_ready_seconds_count", drv)
	waitMetric(t, binder, 1, "snapkeeper_driver_default_group_classes", drv)
	waitMetric(t, binder, 0, "snapkeeper_driver_without_csi_side", drv)
	waitMetric(t, binder, 0, "snapkeeper_schedule_missed_runs_total", `schedule="yearly"`)
	waitMetric(t, binder, 0, "snapkeeper_schedule_claims_failing", `schedule="yearly"`)
	waitMetric(t, binder, 1, "leader_election_master_status", `name="snapshot-controller-leader"`)
	// The content is gone when the snapshot is released: the driver is the class's.
	waitMetric(t, binder, 1, "snapshot_controller_operation_total_seconds_count", `operation_name="DeleteSnapshot"`, `driver_name="`+s.Drv.Name+`"`)
	waitSeries(t, csi, "csi_sidecar_operations_seconds_count", `method_name="/csi.v1.Controller/DeleteSnapshot"`)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []scrape
	for _, c := range []struct {
		name, url string
		client    *http.Client
	}{
		{"binder", "http://" + binder.HTTPAddr + "/metrics", http.DefaultClient},
		{"csi", "http://" + csi.HTTPAddr + "/metrics", http.DefaultClient},
		{"webhook", "https://" + wh.Addr + "/metrics", wh.Client()},
	} {
		b, err := framework.ScrapeBody(ctx, c.client, c.url)
		if err != nil {
			t.Fatalf("scrape %s: %v", c.name, err)
		}
		out = append(out, scrape{component: c.name, body: b})
	}
	return out
}

// waitSeries waits until the component serves a sample of name with
// every label fragment and a value above 0.
func waitSeries(t *testing.T, c *framework.Component, name string, labels ...string) {
	t.Helper()
	err := framework.Poll(30*time.Second, fmt.Sprintf("%s%v > 0", name, labels), func() (bool, error) {
		v, err := c.Metric(context.Background(), name, labels...)
		return err == nil && v > 0, err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// lint runs `promtool check metrics` on one scrape and returns its
// findings.
func lint(t *testing.T, sc scrape) []lintFinding {
	t.Helper()
	out, code := runTool(t, t.TempDir(), sc.body, "promtool", "check", "metrics")
	var found []lintFinding
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		metric, problem, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "error") {
			t.Fatalf("promtool check metrics on the %s scrape (exit %d):\n%s", sc.component, code, out)
		}
		found = append(found, lintFinding{metric, problem})
	}
	// Exit 3 means lint findings, 0 none; anything else is a failure.
	if (code == 0) != (len(found) == 0) || (code != 0 && code != 3) {
		t.Fatalf("promtool check metrics on the %s scrape: exit %d with:\n%s", sc.component, code, out)
	}
	return found
}

// lint reads promtool's findings as the scrape test needs them: on an
// exposition with known problems, exactly those.
func TestPromtoolLintFindingsAreRead(t *testing.T) {
	body := "# HELP demo_requests Requests.\n# TYPE demo_requests counter\ndemo_requests 1\n" +
		"# TYPE demo_latency_milliseconds gauge\ndemo_latency_milliseconds 3\n" +
		"# HELP demo_ok_total Fine.\n# TYPE demo_ok_total counter\ndemo_ok_total 1\n"
	got := lint(t, scrape{component: "demo", body: []byte(body)})
	want := map[lintFinding]bool{
		{"demo_requests", `counter metrics should have "_total" suffix`}:                   true,
		{"demo_latency_milliseconds", "no help text"}:                                      true,
		{"demo_latency_milliseconds", `use base unit "seconds" instead of "milliseconds"`}: true,
	}
	for _, f := range got {
		if !want[f] {
			t.Errorf("unexpected finding %q %q", f.Metric, f.Problem)
		}
		delete(want, f)
	}
	for f := range want {
		t.Errorf("finding %q %q not read", f.Metric, f.Problem)
	}
	if got := lint(t, scrape{component: "clean", body: []byte("# HELP demo_ok_total Fine.\n# TYPE demo_ok_total counter\ndemo_ok_total 1\n")}); len(got) != 0 {
		t.Errorf("findings on a clean exposition: %v", got)
	}
}

// sampleNames are the metric names of every sample of a scrape.
func sampleNames(body []byte) map[string]bool {
	names := map[string]bool{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			names[line[:i]] = true
		}
	}
	return names
}

// dashboardExprs are the PromQL expressions of the chart's Grafana
// dashboard: every panel target's expr (rows' panels included) and the
// metric selectors of label_values() template variables. Grafana's range
// variables become 5m so that Prometheus' parser takes them; variables in
// label values are plain strings to it.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "charts", "snapkeeper", "files", "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash any
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("grafana-dashboard.json: %v", err)
	}
	ranges := strings.NewReplacer("$__rate_interval", "5m", "${__rate_interval}", "5m",
		"$__interval", "5m", "${__interval}", "5m", "$__range", "5m", "${__range}", "5m")
	labelValues := regexp.MustCompile(`^\s*label_values\((.*),\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)\s*$`)
	var exprs []string
	var walk func(key string, v any)
	walk = func(key string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				walk(k, x)
			}
		case []any:
			for _, x := range v {
				walk(key, x)
			}
		case string:
			switch {
			case key == "expr":
				exprs = append(exprs, ranges.Replace(v))
			case key == "query" && strings.HasPrefix(strings.TrimSpace(v), "label_values("):
				m := labelValues.FindStringSubmatch(v)
				if m == nil {
					t.Errorf("dashboard variable query %q: not label_values(selector, label)", v)
					return
				}
				exprs = append(exprs, m[1])
			}
		}
	}
	walk("", dash)
	sort.Strings(exprs)
	return slices.Compact(exprs)
}

// seriesOf parses exprs with bin/promql-series and returns the series each
// reads; an expression that does not parse fails the test.
func seriesOf(t *testing.T, exprs []string) map[string][]string {
	t.Helper()
	in, err := json.Marshal(exprs)
	if err != nil {
		t.Fatal(err)
	}
	out, code := runTool(t, t.TempDir(), in, "promql-series", "-json")
	var results []struct {
		Expr   string   `json:"expr"`
		Series []string `json:"series"`
		Error  string   `json:"error"`
	}
	if err := json.Unmarshal([]byte(out), &results); err != nil || len(results) != len(exprs) {
		t.Fatalf("promql-series (exit %d, %v):\n%s", code, err, out)
	}
	series := map[string][]string{}
	for _, r := range results {
		if r.Error != "" {
			t.Errorf("PromQL does not parse: %s\n  %s", r.Error, r.Expr)
			continue
		}
		series[r.Expr] = r.Series
	}
	return series
}

// The binaries' real scrapes pass `promtool check metrics` (apart from
// lintExceptions), and every series the chart's alerts and dashboard read
// is in them (apart from outsideSeries).
func TestRealScrapesPassPromtoolAndServeEverySeries(t *testing.T) {
	// Before the plane: a missing tool fails at once.
	tool(t, "promtool")
	tool(t, "promql-series")
	scrapes := realScrapes(t)

	t.Run("check metrics", func(t *testing.T) {
		seen := map[lintFinding]bool{}
		for _, sc := range scrapes {
			for _, f := range lint(t, sc) {
				seen[f] = true
				if _, ok := lintExceptions[f]; !ok {
					t.Errorf("promtool check metrics, %s scrape: %s %s (fix it without renaming the metric, or add it to lintExceptions and docs/metrics.md with the reason)",
						sc.component, f.Metric, f.Problem)
				}
			}
		}
		for f := range lintExceptions {
			if !seen[f] {
				t.Errorf("lintExceptions lists %s %q, which promtool no longer reports: remove it here and in docs/metrics.md", f.Metric, f.Problem)
			}
		}
	})

	t.Run("series of alerts and dashboard", func(t *testing.T) {
		served := map[string]string{}
		for _, sc := range scrapes {
			for n := range sampleNames(sc.body) {
				if served[n] == "" {
					served[n] = sc.component
				}
			}
		}
		_, groups := renderedRule(t)
		var exprs []string
		from := map[string]string{}
		for _, g := range groups.Groups {
			for _, r := range g.Rules {
				exprs = append(exprs, r.Expr)
				from[r.Expr] = "alert " + r.Alert + r.Record
			}
		}
		for _, e := range dashboardExprs(t) {
			exprs = append(exprs, e)
			if from[e] == "" {
				from[e] = "dashboard"
			}
		}
		missing := map[string][]string{}
		used := map[string]bool{}
		for expr, names := range seriesOf(t, exprs) {
			if len(names) == 0 {
				t.Errorf("%s reads no series: %s", from[expr], expr)
			}
			for _, n := range names {
				used[n] = true
				if served[n] == "" && outsideSeries[n] == "" {
					missing[n] = append(missing[n], from[expr])
				}
			}
		}
		for n := range outsideSeries {
			if !used[n] {
				t.Errorf("outsideSeries lists %s, which no alert or panel reads any more", n)
			}
			if c := served[n]; c != "" {
				t.Errorf("outsideSeries lists %s, but the %s serves it", n, c)
			}
		}
		if len(missing) > 0 {
			names := slices.Sorted(maps.Keys(missing))
			var b strings.Builder
			for _, n := range names {
				users := missing[n]
				sort.Strings(users)
				fmt.Fprintf(&b, "\n  %s (read by %s)", n, strings.Join(slices.Compact(users), ", "))
			}
			t.Errorf("series the alerts or the dashboard read that no scrape of the binder, the CSI side or the webhook has:%s", b.String())
		}
	})
}

// docTable returns the rows of the table under heading in
// docs/metrics.md whose first cell is code: that cell and the second one.
func docTable(t *testing.T, heading string) [][2]string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("docs/metrics.md has no section %q", heading)
	}
	if i := strings.Index(section, "\n#"); i >= 0 {
		section = section[:i]
	}
	row := regexp.MustCompile("(?m)^\\|\\s*`([^`]+)`\\s*\\|\\s*([^|]+?)\\s*\\|")
	var rows [][2]string
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		rows = append(rows, [2]string{m[1], m[2]})
	}
	return rows
}

const (
	lintHeading    = "### Findings of `promtool check metrics`"
	outsideHeading = "### Series read from outside our binaries"
)

// docs/metrics.md lists exactly lintExceptions and outsideSeries.
func TestPromtoolExceptionsAreDocumented(t *testing.T) {
	documented := map[lintFinding]bool{}
	for _, r := range docTable(t, lintHeading) {
		documented[lintFinding{r[0], r[1]}] = true
	}
	for f := range lintExceptions {
		if !documented[f] {
			t.Errorf("docs/metrics.md (%s) does not list the exception %s | %s", lintHeading, f.Metric, f.Problem)
		}
	}
	for f := range documented {
		if _, ok := lintExceptions[f]; !ok {
			t.Errorf("docs/metrics.md (%s) lists %s | %s, which lintExceptions does not", lintHeading, f.Metric, f.Problem)
		}
	}
	series := map[string]bool{}
	for _, r := range docTable(t, outsideHeading) {
		series[r[0]] = true
		if outsideSeries[r[0]] == "" {
			t.Errorf("docs/metrics.md (%s) lists %s, which outsideSeries does not", outsideHeading, r[0])
		}
	}
	for n := range outsideSeries {
		if !series[n] {
			t.Errorf("docs/metrics.md (%s) does not list %s", outsideHeading, n)
		}
	}
}
