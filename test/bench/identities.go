package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// Each controller process and the webhook run as a ServiceAccount of its
// own, bound to the RBAC it would get in a cluster: ours to the roles that
// charts/snapkeeper renders (the binder as the controller Deployment's
// account, the CSI side as a driver pod's account bound through
// csiSide.rbac), the community pair to the manifests of its own module
// (deploy/kubernetes in the Go module cache, applied as they are). Every
// ServiceAccount falls under API Priority and Fairness like a pod's would;
// the benchmark's own load generator stays admin (exempt).

// role names a process; accounts maps it to the ServiceAccount it runs as.
const (
	roleBinder             = "binder"
	roleCSISide            = "csi-side"
	roleSnapshotController = "snapshot-controller"
	roleCSISnapshotter     = "csi-snapshotter"
	roleWebhook            = "webhook"
)

// ourCSIAccount is the driver pod's ServiceAccount that csiSide.rbac binds.
const ourCSIAccount = "default/csi-driver"

var accounts = map[string]string{
	roleBinder:             "snapkeeper/snapkeeper-controller",
	roleCSISide:            ourCSIAccount,
	roleWebhook:            "snapkeeper/snapkeeper-webhook",
	roleSnapshotController: "kube-system/snapshot-controller",
	roleCSISnapshotter:     "default/csi-snapshotter",
}

// controllersAsAdmin (-admin-controllers) runs every controller with the
// admin kubeconfig (system:masters, exempt from APF), as earlier versions
// of this benchmark did.
var controllersAsAdmin bool

var (
	idMu    sync.Mutex
	idDone  = map[string]map[string]string{} // env.Dir -> role -> kubeconfig
	chartMu sync.Mutex
	chart   []byte
)

// kubeconfigFor returns the kubeconfig of role on env, applying its RBAC
// and minting its token on first use (once per control plane, so a restart
// in the steady-state run adds no writes).
func kubeconfigFor(env *framework.Env, role string) (string, error) {
	if controllersAsAdmin {
		return env.Kubeconfig, nil
	}
	idMu.Lock()
	defer idMu.Unlock()
	if kc, ok := idDone[env.Dir][role]; ok {
		return kc, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	manifest, ns, err := rbacManifest(ctx, role)
	if err != nil {
		return "", err
	}
	if _, err := env.ApplyRBAC(ctx, manifest, ns); err != nil {
		return "", fmt.Errorf("RBAC of %s: %w", role, err)
	}
	sans, sa, _ := strings.Cut(accounts[role], "/")
	if accounts[role] == ourCSIAccount {
		// The driver's own account: the chart binds it, a driver's chart makes it.
		_, err := env.Kube.CoreV1().ServiceAccounts(sans).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: sans}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return "", err
		}
	}
	kc := filepath.Join(env.Dir, "identities", role+".kubeconfig")
	if err := env.ServiceAccountKubeconfig(ctx, sans, sa, kc, 24*3600); err != nil {
		return "", err
	}
	if idDone[env.Dir] == nil {
		idDone[env.Dir] = map[string]string{}
	}
	idDone[env.Dir][role] = kc
	return kc, nil
}

// rbacManifest is the manifest that grants role its rights, and the
// namespace to move it to ("" keeps the manifest's own).
func rbacManifest(ctx context.Context, role string) ([]byte, string, error) {
	switch role {
	case roleBinder, roleCSISide, roleWebhook:
		b, err := renderedChart(ctx)
		return b, "", err
	}
	mod, err := framework.CommunityModuleDir()
	if err != nil {
		return nil, "", err
	}
	file := map[string]string{
		roleSnapshotController: "deploy/kubernetes/snapshot-controller/rbac-snapshot-controller.yaml",
		roleCSISnapshotter:     "deploy/kubernetes/csi-snapshotter/rbac-csi-snapshotter.yaml",
	}[role]
	if file == "" {
		return nil, "", fmt.Errorf("no RBAC for role %q", role)
	}
	b, err := os.ReadFile(filepath.Join(mod, file))
	return b, "", err
}

// renderedChart renders the chart once per process, with the CSI side's
// ClusterRole bound to the driver's account.
func renderedChart(ctx context.Context) ([]byte, error) {
	chartMu.Lock()
	defer chartMu.Unlock()
	if chart != nil {
		return chart, nil
	}
	ns, name, _ := strings.Cut(ourCSIAccount, "/")
	b, err := framework.RenderChart(ctx, "--set", "csiSide.rbac.create=true",
		"--set-json", fmt.Sprintf(`csiSide.rbac.serviceAccounts=[{"name":%q,"namespace":%q}]`, name, ns))
	if err != nil {
		return nil, err
	}
	chart = b
	return b, nil
}

// identityNote describes the identities for the report.
func identityNote() string {
	if controllersAsAdmin {
		return "**every controller and the webhook ran as admin (system:masters, exempt from API Priority and Fairness): `-admin-controllers`**"
	}
	return "each process with a ServiceAccount token of its own (TokenRequest API) bound to the RBAC it ships with: " +
		"snapkeeper's binder as `" + accounts[roleBinder] + "` and its CSI side as `" + accounts[roleCSISide] +
		"` with the ClusterRoles and Roles rendered from charts/snapkeeper (`csiSide.rbac`), the webhook as `" + accounts[roleWebhook] +
		"`; the community snapshot-controller as `" + accounts[roleSnapshotController] + "` and csi-snapshotter as `" + accounts[roleCSISnapshotter] +
		"` with the RBAC manifests of its module (deploy/kubernetes, applied unchanged). Under the default FlowSchemas a " +
		"ServiceAccount of kube-system is served at priority level workload-high, any other at workload-low; the benchmark's " +
		"own client is admin (exempt)"
}

// refusals are notes about the log lines in which the API server refused a
// controller something (RBAC): the figures of such a run are of a
// controller that could not do all its work.
func refusals(r *running) []string {
	var out []string
	for _, p := range r.procs {
		var n int
		var first string
		for _, line := range strings.Split(p.Tail(64<<20), "\n") {
			if strings.Contains(strings.ToLower(line), "forbidden") {
				if n++; first == "" {
					first = line
				}
			}
		}
		if n > 0 {
			if len(first) > 300 {
				first = first[:300] + "…"
			}
			out = append(out, fmt.Sprintf("%s logged %d refusals by the API server (forbidden) under its RBAC, the first: `%s`", p.Name, n, strings.ReplaceAll(first, "`", "'")))
		}
	}
	return out
}

// accountNamespace is the namespace of role's ServiceAccount, where a pod
// of it would keep its Leases.
func accountNamespace(role string) string {
	ns, _, _ := strings.Cut(accounts[role], "/")
	return ns
}

// withRefusals adds the refusals in the controllers' logs to a failure.
func withRefusals(r *running, err *error) {
	if *err == nil {
		return
	}
	if n := refusals(r); len(n) > 0 {
		*err = fmt.Errorf("%w; %s", *err, strings.Join(n, "; "))
	}
}
