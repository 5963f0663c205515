package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"

	"sigs.k8s.io/yaml"
)

// The release's RBAC manifests and the chart templates of the same
// component: the snapshot-controller against our binder, the csi-snapshotter
// against our CSI side.
var rbacComponents = []struct{ upstream, ours, template string }{
	{"snapshot-controller", "binder", "charts/snapkeeper/templates/controller-rbac.yaml"},
	{"csi-snapshotter", "CSI side", "charts/snapkeeper/templates/csi-side-rbac.yaml"},
}

var upstreamRBAC = map[string]string{
	"snapshot-controller": "deploy/kubernetes/snapshot-controller/rbac-snapshot-controller.yaml",
	"csi-snapshotter":     "deploy/kubernetes/csi-snapshotter/rbac-csi-snapshotter.yaml",
}

const (
	ourRBACRules = "charts/snapkeeper/templates/_rbac.tpl"
	chartValues  = "charts/snapkeeper/values.yaml"
)

type rule struct {
	APIGroups []string `json:"apiGroups"`
	Resources []string `json:"resources"`
	Verbs     []string `json:"verbs"`
}

// grants are the verbs granted per role kind ("ClusterRole", "Role") and
// resource ("group/resource", "core/..." for the core group).
type grants map[string]map[string]map[string]bool

func (g grants) add(kind string, rules []rule) {
	if g[kind] == nil {
		g[kind] = map[string]map[string]bool{}
	}
	for _, r := range rules {
		for _, group := range r.APIGroups {
			if group == "" {
				group = "core"
			}
			for _, res := range r.Resources {
				key := group + "/" + res
				if g[kind][key] == nil {
					g[kind][key] = map[string]bool{}
				}
				for _, v := range r.Verbs {
					g[kind][key][v] = true
				}
			}
		}
	}
}

// compareRBAC compares, per component and role kind, the (API group,
// resource, verb) triples the release grants with ours; each resource whose
// verbs differ either way is one difference. Namespaces and resourceNames
// are not compared: ours name the Lease where the release grants any, which
// only narrows. Our rules are the chart's, rendered with its default values.
func compareRBAC(cfg config) ([]diff, int, error) {
	n := 0
	var diffs []diff
	for _, c := range rbacComponents {
		theirs, err := readUpstreamRBAC(filepath.Join(cfg.Upstream, upstreamRBAC[c.upstream]))
		if err != nil {
			return nil, 0, err
		}
		ours, err := readChartRBAC(cfg.Repo, c.template)
		if err != nil {
			return nil, 0, err
		}
		for _, kind := range []string{"ClusterRole", "Role"} {
			resources := map[string]bool{}
			for r := range theirs[kind] {
				resources[r] = true
			}
			for r := range ours[kind] {
				resources[r] = true
			}
			n += len(theirs[kind])
			for _, r := range sortedKeys(resources) {
				t, o := verbs(theirs[kind][r]), verbs(ours[kind][r])
				if t != o {
					diffs = append(diffs, diff{
						What:     fmt.Sprintf("RBAC %s %s vs our %s: %s", c.upstream, kind, c.ours, r),
						Upstream: t, Ours: o, File: ourRBACRules,
					})
				}
			}
		}
	}
	return diffs, n, nil
}

func verbs(set map[string]bool) string {
	if len(set) == 0 {
		return "none"
	}
	return "[" + strings.Join(sortedKeys(set), " ") + "]"
}

var docSeparator = regexp.MustCompile(`(?m)^---\s*$`)

func readUpstreamRBAC(file string) (grants, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	g := grants{}
	for _, doc := range docSeparator.Split(string(b), -1) {
		var obj struct {
			Kind  string `json:"kind"`
			Rules []rule `json:"rules"`
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if obj.Kind == "ClusterRole" || obj.Kind == "Role" {
			g.add(obj.Kind, obj.Rules)
		}
	}
	if len(g) == 0 {
		return nil, fmt.Errorf("%s: no ClusterRole or Role", file)
	}
	return g, nil
}

// ownRoleName begins the name lines of the schedule component's ClusterRole
// and leader-election Role in controller-rbac.yaml: schedules are ours
// alone, so those roles have no community counterpart to drift from.
const ownRoleName = "  name: {{ $name }}-schedules"

// readChartRBAC reads the rules of each ClusterRole and Role of a chart
// template. A rules block is the indented text under `rules:`; it is
// rendered together with the named rule templates of _rbac.tpl by
// text/template with the few Helm functions they use, and the chart's
// default values. A block that needs more fails here, loudly.
func readChartRBAC(repo, tmpl string) (grants, error) {
	rulesTpl, err := os.ReadFile(filepath.Join(repo, ourRBACRules))
	if err != nil {
		return nil, err
	}
	valuesYAML, err := os.ReadFile(filepath.Join(repo, chartValues))
	if err != nil {
		return nil, err
	}
	var values map[string]any
	if err := yaml.Unmarshal(valuesYAML, &values); err != nil {
		return nil, fmt.Errorf("%s: %w", chartValues, err)
	}
	src, err := os.ReadFile(filepath.Join(repo, tmpl))
	if err != nil {
		return nil, err
	}
	g := grants{}
	for i, doc := range docSeparator.Split(string(src), -1) {
		lines := strings.Split(doc, "\n")
		kind := ""
		for _, l := range lines {
			if l == "kind: ClusterRole" || l == "kind: Role" {
				kind = strings.TrimPrefix(l, "kind: ")
			}
		}
		start := slices.Index(lines, "rules:")
		if kind == "" || start < 0 || slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, ownRoleName) }) {
			continue
		}
		var block []string
		for _, l := range lines[start+1:] {
			if l != "" && !strings.HasPrefix(l, " ") {
				break
			}
			block = append(block, l)
		}
		out, err := render(string(rulesTpl), strings.Join(block, "\n"), map[string]any{"Values": values})
		if err != nil {
			return nil, fmt.Errorf("%s, %s %d: %w", tmpl, kind, i, err)
		}
		var rules []rule
		if err := yaml.Unmarshal([]byte(out), &rules); err != nil {
			return nil, fmt.Errorf("%s, %s %d: %w\n%s", tmpl, kind, i, err, out)
		}
		g.add(kind, rules)
	}
	if len(g) == 0 {
		return nil, fmt.Errorf("%s: no ClusterRole or Role with rules", tmpl)
	}
	return g, nil
}

// render executes block with the named templates of defs defined.
func render(defs, block string, data any) (string, error) {
	var t *template.Template
	funcs := template.FuncMap{
		"include": func(name string, data any) (string, error) {
			var b strings.Builder
			err := t.ExecuteTemplate(&b, name, data)
			return b.String(), err
		},
		"quote": func(v any) string { return strconv.Quote(fmt.Sprint(v)) },
		"dict": func(kv ...any) map[string]any {
			m := map[string]any{}
			for i := 0; i+1 < len(kv); i += 2 {
				m[fmt.Sprint(kv[i])] = kv[i+1]
			}
			return m
		},
		"nindent": func(n int, s string) string {
			pad := strings.Repeat(" ", n)
			return "\n" + pad + strings.ReplaceAll(s, "\n", "\n"+pad)
		},
	}
	t = template.New("block").Funcs(funcs)
	if _, err := t.New("defs").Parse(defs); err != nil {
		return "", err
	}
	if _, err := t.Parse(block); err != nil {
		return "", err
	}
	var b strings.Builder
	err := t.Execute(&b, data)
	return b.String(), err
}
