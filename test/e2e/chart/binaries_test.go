package chart

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// podProcess runs one container of a Deployment stored on the API server as
// a local process, the way the kubelet would: the container's arguments with
// $(VAR) references expanded from its env, the ServiceAccount's token (from
// the TokenRequest API) as its identity, and the given rewrites for what
// differs on this machine (ports, paths of mounted volumes).
type podProcess struct {
	namespace, deployment, container string
	rewrite                          map[string]string // argument prefix -> replacement argument
	extra                            []string
}

func (p podProcess) start(t *testing.T, env *framework.Env, bin string) *framework.Process {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dep, err := env.Kube.AppsV1().Deployments(p.namespace).Get(ctx, p.deployment, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := findContainer(t, dep, p.container)
	vars := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			vars[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			vars[e.Name] = p.namespace
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			vars[e.Name] = p.deployment + "-0"
		}
	}
	ref := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	var args []string
	for _, a := range c.Args {
		a = ref.ReplaceAllStringFunc(a, func(m string) string {
			if v, ok := vars[m[2:len(m)-1]]; ok {
				return v
			}
			return m
		})
		for prefix, repl := range p.rewrite {
			if strings.HasPrefix(a, prefix) {
				a = repl
			}
		}
		args = append(args, a)
	}
	dir := env.TempDir(t, p.deployment+"-"+p.container)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	cfg := saConfig(t, env, p.namespace, dep.Spec.Template.Spec.ServiceAccountName)
	if err := framework.WriteKubeconfig(kubeconfig, cfg.Host, cfg.BearerToken); err != nil {
		t.Fatal(err)
	}
	args = append(append(args, "--kubeconfig="+kubeconfig), p.extra...)
	proc, err := framework.StartProcess(dir, p.container, bin, args, "POD_NAMESPACE="+p.namespace)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s/%s runs as %s with %v", p.deployment, p.container, dep.Spec.Template.Spec.ServiceAccountName, args)
	t.Cleanup(func() {
		proc.Stop(10 * time.Second)
		if t.Failed() {
			t.Logf("log of %s:\n%s", p.container, proc.Tail(4000))
		}
	})
	return proc
}

// expectClaimsJudged checks that the webhook judges claims through the
// chart's MutatingWebhookConfiguration: a restore whose data source has the
// wrong apiGroup is denied (the API server would drop that data source
// before validating admission, and provision the claim empty), a correct one
// is admitted. Both are dry runs. The entry's failurePolicy is Ignore, so
// until the API server's cache has the configuration as patched a wrong
// claim passes: the check is retried for a while.
func expectClaimsJudged(ctx context.Context, t *testing.T, env *framework.Env, ns string) {
	t.Helper()
	claims := env.Kube.CoreV1().PersistentVolumeClaims(ns)
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	framework.Eventually(t, 30*time.Second, "the webhook to deny restores from a data source of the wrong apiGroup", func() (bool, error) {
		for name, group := range map[string]*string{"no apiGroup": nil, "a foreign apiGroup": ptr("example.com")} {
			_, err := claims.Create(ctx, restoreClaim(group, nil), dryRun)
			if err == nil || !strings.Contains(err.Error(), "persistentvolumeclaims.validation.snapkeeper.io") ||
				!strings.Contains(err.Error(), "needs apiGroup") {
				return false, fmt.Errorf("restore with %s: got %v, want a denial by the webhook", name, err)
			}
		}
		return true, nil
	})
	if _, err := claims.Create(ctx, restoreClaim(ptr("snapshot.storage.k8s.io"), nil), dryRun); err != nil {
		t.Errorf("a restore with the right apiGroup: %v", err)
	}
}

func findContainer(t *testing.T, dep *appsv1.Deployment, name string) corev1.Container {
	t.Helper()
	for _, c := range dep.Spec.Template.Spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("Deployment %s has no container %s", dep.Name, name)
	return corev1.Container{}
}

func ownBinary(t *testing.T, pkg string) string {
	t.Helper()
	bin, err := framework.OwnBinary("./" + pkg)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

func waitHTTP(t *testing.T, proc *framework.Process, url string) {
	t.Helper()
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // readiness poll of a loopback test server
	}}
	framework.Eventually(t, time.Minute, url, func() (bool, error) {
		if proc.Exited() {
			t.Fatalf("%s exited:\n%s", proc.Name, proc.Tail(4000))
		}
		resp, err := client.Get(url)
		if err != nil {
			return false, err
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, fmt.Errorf("%s", resp.Status)
	})
}

// Our binaries, started with exactly the arguments the chart renders and
// with the identity of the chart's ServiceAccounts: a snapshot goes ready
// and a bad manifest is rejected, so the chart's RBAC is sufficient.
func TestBinariesRunWithTheChartsArgumentsAndServiceAccounts(t *testing.T) {
	controllerBin := ownBinary(t, "cmd/controller")
	webhookBin := ownBinary(t, "cmd/webhook")
	env, h := clusterHelm(t)
	ns, drvNS, apps := env.Namespace(t), env.Namespace(t), env.Namespace(t)

	caBundle, certDir := existingTLSSecret(t, env, ns, "byo-tls", "sk-snapkeeper-webhook."+ns+".svc")
	h.must(t, append([]string{"install", "sk", chartDir(), "--namespace", ns, "--set", "certificates.mode=existingSecret",
		"--set", "certificates.existingSecret.name=byo-tls", "--set", "certificates.existingSecret.caBundle=" + caBundle}, installArgs...)...)
	uninstallOnCleanup(t, h, "sk", ns)
	h.must(t, "install", "drv", driverChart(t), "--namespace", drvNS, "--set", "driver.name="+framework.MockDriverName)
	uninstallOnCleanup(t, h, "drv", drvNS)

	// The webhook, on loopback, with the Secret's files where the volume
	// would be mounted.
	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	webhook := podProcess{namespace: ns, deployment: "sk-snapkeeper-webhook", container: "webhook",
		rewrite: map[string]string{
			"--port=":                 fmt.Sprintf("--port=%d", port),
			"--tls-cert-file=":        "--tls-cert-file=" + filepath.Join(certDir, "tls.crt"),
			"--tls-private-key-file=": "--tls-private-key-file=" + filepath.Join(certDir, "tls.key"),
		},
		extra: []string{"--bind-address=127.0.0.1"},
	}.start(t, env, webhookBin)
	waitHTTP(t, webhook, fmt.Sprintf("https://127.0.0.1:%d/readyz", port))
	pointAtLoopback(t, env, "sk-snapkeeper-webhook", fmt.Sprintf("127.0.0.1:%d", port))

	httpAddr, err := framework.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	binder := podProcess{namespace: ns, deployment: "sk-snapkeeper-controller", container: "controller",
		rewrite: map[string]string{"--http-endpoint=": "--http-endpoint=" + httpAddr}}.start(t, env, controllerBin)
	waitHTTP(t, binder, "http://"+httpAddr+"/healthz")

	drv := env.StartCSIDriver(t, framework.CSIDriverOptions{})
	csiAddr, err := framework.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	csiSide := podProcess{namespace: drvNS, deployment: "drv-controller", container: "snapkeeper-csi-side",
		rewrite: map[string]string{
			"--csi-address=":   "--csi-address=" + drv.Socket,
			"--http-endpoint=": "--http-endpoint=" + csiAddr,
		}}.start(t, env, controllerBin)
	waitHTTP(t, csiSide, "http://"+csiAddr+"/healthz")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// A bad manifest is rejected by the webhook: a secret name without its namespace.
	bad := &snapv1.VolumeSnapshotClass{
		ObjectMeta: metav1.ObjectMeta{Name: "bad-" + apps}, Driver: framework.MockDriverName,
		DeletionPolicy: snapv1.VolumeSnapshotContentDelete,
		Parameters:     map[string]string{"csi.storage.k8s.io/snapshotter-secret-name": "only-the-name"},
	}
	if _, err := env.Snap.SnapshotV1().VolumeSnapshotClasses().Create(ctx, bad, metav1.CreateOptions{}); err == nil ||
		!strings.Contains(err.Error(), "volumesnapshotclasses.validation.snapkeeper.io") {
		t.Fatalf("bad class: got %v, want a denial by the webhook", err)
	}
	runHelmTestScript(t, env, h, ns)
	expectClaimsJudged(ctx, t, env, apps)

	class := env.CreateSnapshotClass(t, framework.SnapshotClass("chart-"+apps, framework.MockDriverName, snapv1.VolumeSnapshotContentDelete, false))
	env.CreateBoundPVC(t, apps, "data", framework.PVCOptions{Driver: drv.Name})
	vs := env.CreateSnapshot(t, framework.DynamicSnapshot(apps, "through-the-chart", "data", &class.Name))
	env.WaitSnapshotReady(t, apps, vs.Name, 90*time.Second)
	readyGroupThroughTheChart(ctx, t, env, apps)
	// Every call the chart's RBAC refused shows up in the logs (events,
	// leases, finalizer patches), even where the component carries on.
	for _, proc := range []*framework.Process{webhook, binder, csiSide} {
		for _, line := range strings.Split(proc.Tail(1<<20), "\n") {
			if strings.Contains(line, "forbidden") {
				t.Errorf("%s was refused something: %s", proc.Name, line)
			}
		}
	}
	for _, lease := range []struct{ ns, name string }{
		{ns, "snapshot-controller-leader"},
		{drvNS, "external-snapshotter-leader-" + strings.NewReplacer(".", "-").Replace(framework.MockDriverName)},
	} {
		l, err := env.Kube.CoordinationV1().Leases(lease.ns).Get(ctx, lease.name, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			t.Errorf("Lease %s/%s: %v %+v", lease.ns, lease.name, err, l)
		}
	}
}

// The webhook binary in selfManaged mode, with the chart's arguments and
// ServiceAccount: it creates its certificate, fills caBundle, and the API
// server then sends it reviews it can answer.
func TestSelfManagedWebhookBinaryFillsItsCABundle(t *testing.T) {
	webhookBin := ownBinary(t, "cmd/webhook")
	env, h := clusterHelm(t)
	ns, apps := env.Namespace(t), env.Namespace(t)
	h.must(t, append([]string{"install", "sk", chartDir(), "--namespace", ns, "--set", "certificates.mode=selfManaged"}, installArgs...)...)
	uninstallOnCleanup(t, h, "sk", ns)

	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	pointAtLoopback(t, env, "sk-snapkeeper-webhook", fmt.Sprintf("127.0.0.1:%d", port))
	dir := t.TempDir()
	dep, err := env.Kube.AppsV1().Deployments(ns).Get(context.Background(), "sk-snapkeeper-webhook", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var dnsNames string
	for _, a := range findContainer(t, dep, "webhook").Args {
		if v, ok := strings.CutPrefix(a, "--self-managed-dns-names="); ok {
			dnsNames = v
		}
	}
	webhook := podProcess{namespace: ns, deployment: "sk-snapkeeper-webhook", container: "webhook",
		rewrite: map[string]string{
			"--port=":                   fmt.Sprintf("--port=%d", port),
			"--tls-cert-file=":          "--tls-cert-file=" + filepath.Join(dir, "tls.crt"),
			"--tls-private-key-file=":   "--tls-private-key-file=" + filepath.Join(dir, "tls.key"),
			"--self-managed-cert-dir=":  "--self-managed-cert-dir=" + dir,
			"--self-managed-dns-names=": "--self-managed-dns-names=" + dnsNames + ",127.0.0.1",
		},
		extra: []string{"--bind-address=127.0.0.1"},
	}.start(t, env, webhookBin)
	waitHTTP(t, webhook, fmt.Sprintf("https://127.0.0.1:%d/readyz", port))

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	framework.Eventually(t, 30*time.Second, "caBundle filled by the webhook in both configurations", func() (bool, error) {
		bundles, err := caBundles(ctx, env, "sk-snapkeeper-webhook")
		if err != nil {
			return false, err
		}
		for _, b := range bundles {
			if len(b) == 0 {
				return false, nil
			}
		}
		return len(bundles) == 7, nil // six validating entries, one mutating
	})
	bad := &snapv1.VolumeSnapshotClass{
		ObjectMeta: metav1.ObjectMeta{Name: "bad-" + apps}, Driver: framework.MockDriverName,
		DeletionPolicy: snapv1.VolumeSnapshotContentDelete,
		Parameters:     map[string]string{"csi.storage.k8s.io/snapshotter-secret-name": "only-the-name"},
	}
	framework.Eventually(t, 30*time.Second, "the webhook to deny a bad class", func() (bool, error) {
		_, err := env.Snap.SnapshotV1().VolumeSnapshotClasses().Create(ctx, bad, metav1.CreateOptions{})
		if err == nil {
			t.Fatal("a bad class was admitted")
		}
		return strings.Contains(err.Error(), "denied the request"), err
	})
	runHelmTestScript(t, env, h, ns)
	expectClaimsJudged(ctx, t, env, apps)
	// The chart's RBAC covers the certificate Manager: the Secret, and get,
	// list, watch and patch of both configurations.
	for _, line := range strings.Split(webhook.Tail(1<<20), "\n") {
		if strings.Contains(line, "forbidden") {
			t.Errorf("the webhook was refused something: %s", line)
		}
	}
}

// readyGroupThroughTheChart: a volume group snapshot of two claims becomes
// ready under the chart's RBAC (the binder creates the member snapshots and
// contents and writes the members' status).
func readyGroupThroughTheChart(ctx context.Context, t *testing.T, env *framework.Env, ns string) {
	t.Helper()
	class := &groupv1.VolumeGroupSnapshotClass{
		ObjectMeta: metav1.ObjectMeta{Name: "chart-group-" + ns, Annotations: map[string]string{"groupsnapshot.storage.kubernetes.io/is-default-class": "true"}},
		Driver:     framework.MockDriverName, DeletionPolicy: snapv1.VolumeSnapshotContentDelete,
	}
	if _, err := env.Snap.GroupsnapshotV1().VolumeGroupSnapshotClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Snap.GroupsnapshotV1().VolumeGroupSnapshotClasses().Delete(context.Background(), class.Name, metav1.DeleteOptions{})
	})
	for _, name := range []string{"db-0", "db-1"} {
		pvc := env.CreateBoundPVC(t, ns, name, framework.PVCOptions{Driver: framework.MockDriverName})
		pvc.Labels = map[string]string{"app": "db"}
		if _, err := env.Kube.CoreV1().PersistentVolumeClaims(ns).Update(ctx, pvc, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	g := &groupv1.VolumeGroupSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns},
		Spec: groupv1.VolumeGroupSnapshotSpec{Source: groupv1.VolumeGroupSnapshotSource{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}},
	}
	if _, err := env.Snap.GroupsnapshotV1().VolumeGroupSnapshots(ns).Create(ctx, g, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitGroupReady(t, ns, "db", 90*time.Second)
}
