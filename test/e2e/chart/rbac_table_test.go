package chart

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// grant is one row of the expected RBAC table: what one component may do,
// where, under which values, and the code that needs it. docs/security.md
// holds the same rows (TestSecurityDocHoldsTheRBACTable); the chart must
// grant exactly these (TestRBACGrantsEachComponentOnlyWhatItUses) and the
// API server must give each ServiceAccount exactly these
// (TestServiceAccountsMayDoExactlyWhatTheTableSays).
type grant struct {
	component string // binder, schedules, csi-side, webhook, helm-test
	when      string // always, selfManaged, distributedSnapshotting
	where     string // cluster, release namespace, driver namespace
	group     string
	resource  string
	verbs     []string
	names     []string // resourceNames; "{fullname}" is the release's full name
	usedBy    []string // repository files whose code makes these calls
}

const (
	always       = "always"
	selfManaged  = "selfManaged"
	distributed  = "distributedSnapshotting"
	cluster      = "cluster"
	releaseNS    = "release namespace"
	driverNS     = "driver namespace"
	snapGroup    = "snapshot.storage.k8s.io"
	groupGroup   = "groupsnapshot.storage.k8s.io"
	leaseGroup   = "coordination.k8s.io"
	webhookGroup = "admissionregistration.k8s.io"
)

func g(component, when, where, group, resource, verbs, names string, usedBy ...string) grant {
	gr := grant{component: component, when: when, where: where, group: group, resource: resource,
		verbs: strings.Fields(verbs), usedBy: usedBy}
	if names != "" {
		gr.names = strings.Fields(names)
	}
	return gr
}

// rbacTable is every permission the chart grants. list and watch feed an
// informer, get is a live read past the informer; every snapshot-kind write
// is a merge patch through pkg/writer.
var rbacTable = []grant{
	g("binder", always, cluster, snapGroup, "volumesnapshotclasses", "list watch", "", "pkg/sync/binder/controller.go"),
	g("binder", always, cluster, snapGroup, "volumesnapshots", "get list watch patch create delete", "",
		"pkg/sync/binder/controller.go", "pkg/sync/binder/snapshot.go", "pkg/sync/binder/group_members.go", "pkg/sync/binder/group.go"),
	g("binder", always, cluster, snapGroup, "volumesnapshots/status", "patch", "", "pkg/sync/binder/status.go"),
	g("binder", always, cluster, snapGroup, "volumesnapshotcontents", "get list watch create patch delete", "",
		"pkg/sync/binder/controller.go", "pkg/sync/binder/snapshot.go", "pkg/sync/binder/content.go", "pkg/sync/binder/delete.go"),
	g("binder", always, cluster, snapGroup, "volumesnapshotcontents/status", "patch", "", "pkg/sync/binder/group_members.go"),
	g("binder", always, cluster, groupGroup, "volumegroupsnapshotclasses", "list watch", "", "pkg/sync/binder/controller.go"),
	g("binder", always, cluster, groupGroup, "volumegroupsnapshots", "get list watch patch", "", "pkg/sync/binder/controller.go", "pkg/sync/binder/group.go"),
	g("binder", always, cluster, groupGroup, "volumegroupsnapshots/status", "patch", "", "pkg/sync/binder/group.go"),
	g("binder", always, cluster, groupGroup, "volumegroupsnapshotcontents", "list watch create patch delete", "",
		"pkg/sync/binder/controller.go", "pkg/sync/binder/group.go", "pkg/sync/binder/delete.go"),
	g("binder", always, cluster, "", "persistentvolumeclaims", "list watch update", "", "pkg/sync/binder/controller.go", "pkg/sync/binder/pvc.go", "pkg/writer/writer.go"),
	g("binder", always, cluster, "", "persistentvolumes", "list watch", "", "pkg/sync/binder/controller.go"),
	g("binder", always, cluster, leaseGroup, "leases", "list watch", "", "cmd/controller/presence.go", "pkg/sync/binder/csipresence.go"),
	g("binder", distributed, cluster, "", "nodes", "list watch", "", "pkg/sync/binder/plan.go"),
	g("binder", always, cluster, "", "events", "create patch", "", "cmd/controller/run.go"),
	g("binder", always, releaseNS, leaseGroup, "leases", "create", "", "cmd/controller/leader.go"),
	g("binder", always, releaseNS, leaseGroup, "leases", "get update", "snapshot-controller-leader", "cmd/controller/leader.go"),

	g("schedules", always, cluster, "snapkeeper.io", "snapshotschedules", "list watch", "", "pkg/schedclient/client.go"),
	g("schedules", always, cluster, "snapkeeper.io", "snapshotschedules/status", "patch", "", "pkg/writer/schedules.go"),
	g("schedules", always, cluster, snapGroup, "volumesnapshots", "list watch create delete", "",
		"pkg/sync/scheduler/controller.go", "pkg/sync/scheduler/sync.go", "pkg/sync/scheduler/prune.go"),
	g("schedules", always, cluster, groupGroup, "volumegroupsnapshots", "list watch create delete", "",
		"pkg/sync/scheduler/controller.go", "pkg/sync/scheduler/sync.go", "pkg/sync/scheduler/prune.go"),
	g("schedules", always, cluster, "", "persistentvolumeclaims", "list watch", "", "pkg/sync/scheduler/controller.go"),
	g("schedules", always, cluster, "", "events", "create patch", "", "cmd/controller/run.go"),
	g("schedules", always, releaseNS, leaseGroup, "leases", "create", "", "cmd/controller/leader.go"),
	g("schedules", always, releaseNS, leaseGroup, "leases", "get update", "snapkeeper-schedules-leader", "cmd/controller/leader.go"),

	g("csi-side", always, cluster, snapGroup, "volumesnapshotclasses", "list watch", "", "cmd/controller/csi.go"),
	g("csi-side", always, cluster, snapGroup, "volumesnapshotcontents", "get list watch patch", "",
		"cmd/controller/csi.go", "pkg/sync/csiside/content_item.go"),
	g("csi-side", always, cluster, snapGroup, "volumesnapshotcontents/status", "patch", "", "pkg/sync/csiside/content_item.go"),
	g("csi-side", always, cluster, groupGroup, "volumegroupsnapshotclasses", "list watch", "", "cmd/controller/csi.go"),
	g("csi-side", always, cluster, groupGroup, "volumegroupsnapshotcontents", "get list watch patch", "",
		"cmd/controller/csi.go", "pkg/sync/csiside/controller.go", "pkg/sync/csiside/group_content_item.go"),
	g("csi-side", always, cluster, groupGroup, "volumegroupsnapshotcontents/status", "patch", "", "pkg/sync/csiside/group_content_item.go"),
	g("csi-side", always, cluster, "", "secrets", "get", "", "pkg/sync/csiside/request.go"),
	g("csi-side", always, cluster, "", "events", "create patch", "", "cmd/controller/run.go"),
	g("csi-side", always, driverNS, leaseGroup, "leases", "create get update", "", "cmd/controller/leader.go", "pkg/sync/csiside/heartbeat.go"),
	g("csi-side", always, driverNS, leaseGroup, "leases", "delete", "", "pkg/sync/csiside/heartbeat.go"),

	g("webhook", always, cluster, snapGroup, "volumesnapshotclasses", "get list watch", "", "pkg/admission/clusterlookup/lookup.go"),
	g("webhook", always, cluster, snapGroup, "volumesnapshots", "list watch", "", "pkg/admission/clusterlookup/lookup.go"),
	g("webhook", always, cluster, snapGroup, "volumesnapshotcontents", "list watch", "", "pkg/admission/clusterlookup/lookup.go"),
	g("webhook", always, cluster, groupGroup, "volumegroupsnapshotclasses", "get list watch", "", "pkg/admission/clusterlookup/grouplookup.go"),
	g("webhook", always, cluster, "", "persistentvolumeclaims", "list watch", "", "pkg/admission/clusterlookup/lookup.go", "pkg/admission/clusterlookup/livelookup.go"),
	g("webhook", always, cluster, "", "persistentvolumes", "get list watch", "", "pkg/admission/clusterlookup/lookup.go", "pkg/admission/clusterlookup/livelookup.go"),
	g("webhook", always, cluster, "populator.storage.k8s.io", "volumepopulators", "list", "", "pkg/admission/clusterlookup/lookup.go"),
	g("webhook", selfManaged, cluster, webhookGroup, "validatingwebhookconfigurations", "get list watch patch", "{fullname}-webhook", "pkg/selfcert/publish.go", "pkg/selfcert/run.go"),
	g("webhook", selfManaged, cluster, webhookGroup, "mutatingwebhookconfigurations", "get list watch patch", "{fullname}-webhook", "pkg/selfcert/publish.go", "pkg/selfcert/run.go"),
	g("webhook", selfManaged, releaseNS, "", "secrets", "create", "", "pkg/selfcert/selfcert.go"),
	g("webhook", selfManaged, releaseNS, "", "secrets", "get list watch update", "{fullname}-webhook-tls", "pkg/selfcert/selfcert.go", "pkg/selfcert/run.go"),

	g("helm-test", always, cluster, snapGroup, "volumesnapshotclasses", "create", "", "charts/snapkeeper/templates/tests/webhook-test.yaml"),
}

// tuple is one verb on one resource (and name) in one place: the unit in
// which rules are compared, whatever way they are grouped into rules.
type tuple struct{ where, group, resource, verb, name string }

func (t tuple) String() string {
	s := fmt.Sprintf("%s %s.%s in %s", t.verb, t.resource, t.group, t.where)
	if t.name != "" {
		s += " named " + t.name
	}
	return s
}

// expected is the set of tuples the table gives component when the values
// turn on the conditions in on, with {fullname} replaced.
func expected(component, fullname string, on ...string) map[tuple]bool {
	out := map[tuple]bool{}
	for _, gr := range rbacTable {
		if gr.component != component || (gr.when != always && !slices.Contains(on, gr.when)) {
			continue
		}
		names := gr.names
		if len(names) == 0 {
			names = []string{""}
		}
		for _, v := range gr.verbs {
			for _, n := range names {
				out[tuple{gr.where, gr.group, gr.resource, v, strings.ReplaceAll(n, "{fullname}", fullname)}] = true
			}
		}
	}
	return out
}

// tuplesOf expands RBAC rules granted in where.
func tuplesOf(where string, rules []rbacv1.PolicyRule) map[tuple]bool {
	out := map[tuple]bool{}
	for _, r := range rules {
		names := r.ResourceNames
		if len(names) == 0 {
			names = []string{""}
		}
		for _, gr := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					for _, n := range names {
						out[tuple{where, gr, res, v, n}] = true
					}
				}
			}
		}
	}
	return out
}

// compareTuples reports every tuple granted but not in the table, and every
// tuple in the table not granted.
func compareTuples(t *testing.T, who string, got, want map[tuple]bool) {
	t.Helper()
	for tu := range got {
		if !want[tu] {
			t.Errorf("%s may %s: not in the RBAC table (docs/security.md); remove the grant or add the row with the code that needs it", who, tu)
		}
	}
	for tu := range want {
		if !got[tu] {
			t.Errorf("%s may not %s, which the RBAC table says it needs", who, tu)
		}
	}
}

// markdownRow is a grant as a row of the table in docs/security.md.
func (gr grant) markdownRow() string {
	code := func(s []string) string {
		if len(s) == 0 {
			return ""
		}
		return "`" + strings.Join(s, "`, `") + "`"
	}
	group := gr.group
	if group == "" {
		group = "core"
	}
	names := strings.ReplaceAll(code(gr.names), "{fullname}", "<fullname>")
	if names == "" {
		names = "any"
	}
	return fmt.Sprintf("| %s | %s | %s | %s | `%s` | %s | %s | %s |",
		gr.component, gr.when, gr.where, group, gr.resource, strings.Join(gr.verbs, ", "), names, code(gr.usedBy))
}

const rbacTableHeader = "| component | when | where | API group | resource | verbs | names | used by |"

// The table in docs/security.md is the table of this test, row for row, and
// every file it names as the user of a grant exists.
func TestSecurityDocHoldsTheRBACTable(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "docs", "security.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	start := slices.Index(lines, rbacTableHeader)
	if start < 0 {
		t.Fatalf("docs/security.md has no line %q", rbacTableHeader)
	}
	var doc []string
	for _, l := range lines[start+2:] {
		if !strings.HasPrefix(l, "|") {
			break
		}
		doc = append(doc, l)
	}
	var want []string
	for _, gr := range rbacTable {
		want = append(want, gr.markdownRow())
		for _, f := range gr.usedBy {
			if _, err := os.Stat(filepath.Join(framework.RepoRoot(), f)); err != nil {
				t.Errorf("%s %s: the code it names is gone: %v", gr.component, gr.resource, err)
			}
		}
	}
	if !slices.Equal(doc, want) {
		t.Errorf("the RBAC table of docs/security.md differs from rbacTable; it should read:\n%s\n%s\n%s",
			rbacTableHeader, "|---|---|---|---|---|---|---|---|", strings.Join(want, "\n"))
	}
}
