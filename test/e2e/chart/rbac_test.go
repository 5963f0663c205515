package chart

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// roleOwner is the component and place of a Role or ClusterRole the chart
// renders as release "snapkeeper" (fullname "snapkeeper").
type roleOwner struct{ component, where string }

var renderedRoles = map[string]roleOwner{
	"ClusterRole/snapkeeper-controller":                    {"binder", cluster},
	"Role/snapkeeper-controller-leader-election":           {"binder", releaseNS},
	"ClusterRole/snapkeeper-controller-schedules":          {"schedules", cluster},
	"Role/snapkeeper-controller-schedules-leader-election": {"schedules", releaseNS},
	"ClusterRole/snapkeeper-webhook":                       {"webhook", cluster},
	"Role/snapkeeper-webhook-certs":                        {"webhook", releaseNS},
	"ClusterRole/snapkeeper-csi-side":                      {"csi-side", cluster},
	"Role/snapkeeper-csi-side-leader-election":             {"csi-side", driverNS},
	"ClusterRole/snapkeeper-test":                          {"helm-test", cluster},
}

// Every rule of every Role and ClusterRole the chart renders is a row of
// rbacTable, and every row that applies to the values is rendered: an
// unneeded grant added to the chart fails here before any cluster runs.
func TestRBACGrantsEachComponentOnlyWhatItUses(t *testing.T) {
	h := framework.NewHelm(t, "")
	bindCSISide := []string{"--set", "csiSide.rbac.create=true",
		"--set", "csiSide.rbac.serviceAccounts[0].name=csi-driver", "--set", "csiSide.rbac.serviceAccounts[0].namespace=drivers"}
	cases := map[string]struct {
		args []string
		on   []string
	}{
		"selfManaged certificates and distributed snapshotting": {
			args: []string{"--set", "certificates.mode=selfManaged", "--set", "controller.enableDistributedSnapshotting=true"},
			on:   []string{selfManaged, distributed},
		},
		"certManager certificates":    {args: certModes["certManager"]},
		"existingSecret certificates": {args: certModes["existingSecret"]},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			r := parseManifest(t, h.Template(t, kubeNew, append(c.args, bindCSISide...)...))
			got := map[string]map[tuple]bool{}
			for _, o := range r.objs {
				if o.GetKind() != "Role" && o.GetKind() != "ClusterRole" {
					continue
				}
				owner, ok := renderedRoles[o.GetKind()+"/"+o.GetName()]
				if !ok {
					t.Errorf("%s %s is not in the RBAC table's roles", o.GetKind(), o.GetName())
					continue
				}
				wantNS := map[string]string{cluster: "", releaseNS: "snapkeeper", driverNS: "drivers"}[owner.where]
				if o.GetNamespace() != wantNS {
					t.Errorf("%s %s in namespace %q, want %q", o.GetKind(), o.GetName(), o.GetNamespace(), wantNS)
				}
				var role rbacv1.ClusterRole // a Role decodes the same
				r.into(t, o.GetKind(), o.GetName(), &role)
				if got[owner.component] == nil {
					got[owner.component] = map[tuple]bool{}
				}
				maps.Copy(got[owner.component], tuplesOf(owner.where, role.Rules))
			}
			for _, component := range []string{"binder", "schedules", "csi-side", "webhook", "helm-test"} {
				compareTuples(t, component, got[component], expected(component, "snapkeeper", c.on...))
			}
		})
	}
}

// The API server's own view: each ServiceAccount the chart binds, with a
// token of its own, asks for its rules (SelfSubjectRulesReview) in the
// release namespace, the driver's namespace and one nothing is bound in.
// What it may do beyond an unbound ServiceAccount is exactly the table,
// cluster-wide rules and each namespace's Role apart. Then `kubectl auth
// can-i` checks the grants an attacker would want first, one by one.
func TestServiceAccountsMayDoExactlyWhatTheTableSays(t *testing.T) {
	env, h := clusterHelm(t)
	ns, drvNS, other := env.Namespace(t), env.Namespace(t), env.Namespace(t)
	h.Must(t, append([]string{"install", "sk", framework.ChartDir(), "--namespace", ns,
		"--set", "certificates.mode=selfManaged", "--set", "controller.enableDistributedSnapshotting=true",
		"--set", "csiSide.rbac.create=true", "--set", "csiSide.rbac.serviceAccounts[0].name=csi-driver",
		"--set", "csiSide.rbac.serviceAccounts[0].namespace=" + drvNS}, installArgs...)...)
	uninstallOnCleanup(t, h, "sk", ns)
	createServiceAccount(t, env, drvNS, "csi-driver")
	createServiceAccount(t, env, ns, "unbound")

	places := map[string]string{cluster: other, releaseNS: ns, driverNS: drvNS}
	baseline, baselineURLs := map[string]map[tuple]bool{}, map[string]bool{}
	for where, n := range places {
		baseline[where], baselineURLs = rulesIn(t, env, ns, "unbound", n, where)
	}
	// The controller's pods run the binder and the schedule component
	// under one ServiceAccount.
	accounts := []struct {
		component, ns, sa string
		also              []string
	}{
		{"binder", ns, "sk-snapkeeper-controller", []string{"schedules"}},
		{"webhook", ns, "sk-snapkeeper-webhook", nil},
		{"csi-side", drvNS, "csi-driver", nil},
	}
	for _, a := range accounts {
		t.Run(a.component, func(t *testing.T) {
			clusterWide, urls := rulesIn(t, env, a.ns, a.sa, other, cluster)
			for u := range urls {
				if !baselineURLs[u] {
					t.Errorf("%s may %s: the chart grants no non-resource URL", a.sa, u)
				}
			}
			got := subtract(clusterWide, baseline[cluster])
			for _, where := range []string{releaseNS, driverNS} {
				here, _ := rulesIn(t, env, a.ns, a.sa, places[where], where)
				for tu := range subtract(here, baseline[where]) {
					if !clusterWide[tuple{cluster, tu.group, tu.resource, tu.verb, tu.name}] {
						got[tu] = true
					}
				}
			}
			want := expected(a.component, "sk-snapkeeper", selfManaged, distributed)
			for _, c := range a.also {
				maps.Copy(want, expected(c, "sk-snapkeeper", selfManaged, distributed))
			}
			compareTuples(t, a.sa, got, want)
			checkPermissions(t, env, a.ns, a.sa, forbiddenToAll(ns, other))
		})
	}
	// What the design needs, said once more through can-i: the CSI side
	// reads a secret in any namespace (a class names it), the webhook only
	// its own certificate Secret, the binder none.
	checkPermissions(t, env, drvNS, "csi-driver", []permission{{"get", "secrets", other, true}})
	checkPermissions(t, env, ns, "sk-snapkeeper-webhook", []permission{
		{"get", "secrets/sk-snapkeeper-webhook-tls", ns, true},
		{"get", "secrets", other, false},
		{"get", "secrets/another-secret", ns, false},
		{"patch", "validatingwebhookconfigurations/sk-snapkeeper-webhook", "", true},
		{"delete", "validatingwebhookconfigurations/sk-snapkeeper-webhook", "", false},
	})
	checkPermissions(t, env, ns, "sk-snapkeeper-controller", []permission{{"get", "secrets", other, false}, {"get", "secrets", ns, false}})
}

// forbiddenToAll are the permissions no component has: secrets listed or
// watched anywhere, exec into pods, deleting claims or volumes, writing
// CRDs or webhook configurations (other than the webhook's own, by name),
// RBAC escalation, impersonation, tokens.
func forbiddenToAll(ns, other string) []permission {
	var out []permission
	for _, p := range []struct{ verb, resource, ns string }{
		{"list", "secrets", ""}, {"watch", "secrets", ""}, {"list", "secrets", ns}, {"watch", "secrets", other},
		{"create", "pods#exec", other}, {"get", "pods#exec", other}, {"create", "pods", other}, {"get", "nodes#proxy", ""},
		{"delete", "persistentvolumeclaims", other}, {"deletecollection", "persistentvolumeclaims", other},
		{"delete", "persistentvolumes", ""}, {"update", "persistentvolumes", ""}, {"patch", "persistentvolumeclaims", other},
		{"create", "customresourcedefinitions.apiextensions.k8s.io", ""}, {"update", "customresourcedefinitions.apiextensions.k8s.io", ""},
		{"patch", "customresourcedefinitions.apiextensions.k8s.io", ""}, {"delete", "customresourcedefinitions.apiextensions.k8s.io", ""},
		{"create", "validatingwebhookconfigurations", ""}, {"patch", "validatingwebhookconfigurations/another-webhook", ""},
		{"delete", "mutatingwebhookconfigurations/another-webhook", ""}, {"update", "mutatingwebhookconfigurations/another-webhook", ""},
		{"escalate", "clusterroles.rbac.authorization.k8s.io", ""}, {"bind", "clusterroles.rbac.authorization.k8s.io", ""},
		{"escalate", "roles.rbac.authorization.k8s.io", ns}, {"bind", "roles.rbac.authorization.k8s.io", ns},
		{"create", "clusterrolebindings.rbac.authorization.k8s.io", ""}, {"create", "rolebindings.rbac.authorization.k8s.io", ns},
		{"impersonate", "users", ""}, {"impersonate", "groups", ""}, {"impersonate", "serviceaccounts", other},
		{"create", "serviceaccounts#token", other}, {"create", "certificatesigningrequests.certificates.k8s.io", ""},
		{"*", "*", ""}, {"delete", "volumesnapshotclasses.snapshot.storage.k8s.io", ""},
	} {
		out = append(out, permission{p.verb, p.resource, p.ns, false})
	}
	return out
}

// rulesIn asks the API server, with a token of ns/sa, for its rules in
// namespace n: resource rules as tuples placed at where, and non-resource
// rules as "verb URL".
func rulesIn(t *testing.T, env *framework.Env, ns, sa, n, where string) (map[tuple]bool, map[string]bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg, err := env.ServiceAccountConfig(ctx, ns, sa)
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	review, err := client.AuthorizationV1().SelfSubjectRulesReviews().Create(ctx,
		&authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: n}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("rules of %s/%s in %s: %v", ns, sa, n, err)
	}
	if review.Status.Incomplete {
		t.Fatalf("rules of %s/%s in %s are incomplete: %s", ns, sa, n, review.Status.EvaluationError)
	}
	var rules []rbacv1.PolicyRule
	for _, r := range review.Status.ResourceRules {
		rules = append(rules, rbacv1.PolicyRule{Verbs: r.Verbs, APIGroups: r.APIGroups, Resources: r.Resources, ResourceNames: r.ResourceNames})
	}
	urls := map[string]bool{}
	for _, r := range review.Status.NonResourceRules {
		for _, u := range r.NonResourceURLs {
			for _, v := range r.Verbs {
				urls[v+" "+u] = true
			}
		}
	}
	return tuplesOf(where, rules), urls
}

func subtract(a, b map[tuple]bool) map[tuple]bool {
	out := map[tuple]bool{}
	for tu := range a {
		if !b[tu] {
			out[tu] = true
		}
	}
	return out
}

func createServiceAccount(t *testing.T, env *framework.Env, ns, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if _, err := env.Kube.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(fmt.Errorf("service account %s/%s: %w", ns, name, err))
	}
}
