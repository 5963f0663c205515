package chart

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// chartComponents are the webhook, the binder and the CSI side started from
// the Deployments of an installed release and of the example driver chart,
// with their ServiceAccounts' tokens and securityContexts.
type chartComponents struct {
	ns, drvNS                string
	drv                      *framework.CSIDriver
	webhook, binder, csiSide *framework.Process
}

func startChartComponents(t *testing.T, env *framework.Env, h *framework.Helm) *chartComponents {
	t.Helper()
	controllerBin, webhookBin := ownBinary(t, "cmd/controller"), ownBinary(t, "cmd/webhook")
	cc := &chartComponents{ns: env.Namespace(t), drvNS: env.Namespace(t)}
	caBundle, certDir := existingTLSSecret(t, env, cc.ns, "byo-tls", "sk-snapkeeper-webhook."+cc.ns+".svc")
	h.Must(t, append([]string{"install", "sk", framework.ChartDir(), "--namespace", cc.ns, "--set", "certificates.mode=existingSecret",
		"--set", "certificates.existingSecret.name=byo-tls", "--set", "certificates.existingSecret.caBundle=" + caBundle}, installArgs...)...)
	uninstallOnCleanup(t, h, "sk", cc.ns)
	h.Must(t, "install", "drv", driverChart(t), "--namespace", cc.drvNS, "--set", "driver.name="+framework.MockDriverName)
	uninstallOnCleanup(t, h, "drv", cc.drvNS)

	// The webhook, on loopback, with the Secret's files where the volume
	// would be mounted.
	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	webhook, err := framework.PodProcess{Namespace: cc.ns, Deployment: "sk-snapkeeper-webhook", Container: "webhook", Confine: true}.
		LoopbackWebhook(context.Background(), env, port, certDir)
	if err != nil {
		t.Fatal(err)
	}
	cc.webhook = webhook.Start(t, env, webhookBin)
	cc.webhook.WaitOK(t, fmt.Sprintf("https://127.0.0.1:%d/readyz", port), time.Minute)
	framework.MustPointWebhooksAt(t, env, "sk-snapkeeper-webhook", fmt.Sprintf("127.0.0.1:%d", port))

	httpAddr, err := framework.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	cc.binder = framework.PodProcess{Namespace: cc.ns, Deployment: "sk-snapkeeper-controller", Container: "controller", Confine: true,
		Rewrite: map[string]string{"--http-endpoint=": "--http-endpoint=" + httpAddr}}.Start(t, env, controllerBin)
	cc.binder.WaitOK(t, "http://"+httpAddr+"/healthz", time.Minute)

	cc.drv = env.StartCSIDriver(t, framework.CSIDriverOptions{})
	csiAddr, err := framework.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	cc.csiSide = framework.PodProcess{Namespace: cc.drvNS, Deployment: "drv-controller", Container: "snapkeeper-csi-side", Confine: true,
		Rewrite: map[string]string{
			"--csi-address=":   "--csi-address=" + cc.drv.Socket,
			"--http-endpoint=": "--http-endpoint=" + csiAddr,
		}}.Start(t, env, controllerBin)
	cc.csiSide.WaitOK(t, "http://"+csiAddr+"/healthz", time.Minute)
	return cc
}

// Our binaries, started with exactly the arguments the chart renders, the
// identity of the chart's ServiceAccounts and the chart's securityContext
// (read-only root filesystem, UID 65532 for the chart's pods, no
// capabilities): a bad manifest is rejected, a snapshot whose class names a
// secret in another namespace and a group become ready, both are deleted
// with their backend snapshots, both controllers record events, both
// Leases are held, and no log says "forbidden": the chart's RBAC is
// sufficient for every kind of call each component makes. The webhook and
// the binder set Go's memory limit from the chart's.
func TestBinariesRunWithTheChartsArgumentsAndServiceAccounts(t *testing.T) {
	env, h := clusterHelm(t)
	cc := startChartComponents(t, env, h)
	apps, secrets := env.Namespace(t), env.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
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
	runHelmTestPod(t, env, h, cc.ns)
	expectClaimsJudged(ctx, t, env, apps)

	// The CSI side reads the class's secret (get, in any namespace) and
	// records the Warning of a failed first cut (events).
	cred := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "snap-creds", Namespace: secrets}, StringData: map[string]string{"user": "u"}}
	framework.MustCreate(t, env.Kube.CoreV1().Secrets(secrets).Create, cred)
	cc.drv.SetFaults(t, framework.Faults{Rules: []framework.FaultRule{{Method: "CreateSnapshot", Times: 1, Code: "Unavailable"}}})
	class := framework.SnapshotClass("chart-"+apps, framework.MockDriverName, snapv1.VolumeSnapshotContentDelete, false)
	class.Parameters = map[string]string{
		"csi.storage.k8s.io/snapshotter-secret-name": "snap-creds", "csi.storage.k8s.io/snapshotter-secret-namespace": secrets}
	env.CreateSnapshotClass(t, class)
	env.CreateBoundPVC(t, apps, "data", framework.PVCOptions{Driver: cc.drv.Name})
	vs := env.CreateSnapshot(t, framework.DynamicSnapshot(apps, "through-the-chart", "data", &class.Name))
	env.WaitSnapshotReady(t, apps, vs.Name, 90*time.Second)
	expectSecretPassed(t, cc.drv, "CreateSnapshot")
	readyGroupThroughTheChart(ctx, t, env, apps)

	// Deletion: the binder marks and deletes, the CSI side calls
	// DeleteSnapshot (with the secret) and drops its finalizers.
	if err := env.Snap.SnapshotV1().VolumeSnapshots(apps).Delete(ctx, vs.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := env.Snap.GroupsnapshotV1().VolumeGroupSnapshots(apps).Delete(ctx, "db", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitSnapshotGone(t, apps, vs.Name, 90*time.Second)
	env.WaitGroupGone(t, apps, "db", 90*time.Second)
	// This driver instance cut one snapshot and one group of two for this
	// test: nothing may be left of them.
	framework.Eventually(t, time.Minute, "the backend snapshots deleted", func() (bool, error) {
		snaps, err := cc.drv.GetCreated(ctx)
		if err != nil {
			return false, err
		}
		groups, err := cc.drv.GetGroups(ctx)
		return len(snaps) == 0 && len(groups) == 0, fmt.Errorf("%d snapshots and %d groups left (%v)", len(snaps), len(groups), err)
	})
	expectSecretPassed(t, cc.drv, "DeleteSnapshot")
	expectEventsFrom(ctx, t, env, "snapshot-controller", "csi-snapshotter "+cc.drv.Name)

	// Every call the chart's RBAC refused shows up in the logs (events,
	// leases, finalizer patches), even where the component carries on.
	for _, proc := range []*framework.Process{cc.webhook, cc.binder, cc.csiSide} {
		for _, line := range strings.Split(proc.Tail(1<<20), "\n") {
			if strings.Contains(line, "forbidden") {
				t.Errorf("%s was refused something: %s", proc.Name, line)
			}
		}
	}
	// The chart's pods learn their memory limit (downward API) and keep
	// Go's heap under it (pkg/memlimit).
	for _, proc := range []*framework.Process{cc.webhook, cc.binder} {
		if !strings.Contains(proc.Tail(1<<20), "Go soft memory limit set below the container's") {
			t.Errorf("%s did not set Go's soft memory limit from the chart's limits.memory", proc.Name)
		}
	}
	for _, lease := range []struct{ ns, name string }{
		{cc.ns, "snapshot-controller-leader"},
		{cc.drvNS, "external-snapshotter-leader-" + strings.NewReplacer(".", "-").Replace(framework.MockDriverName)},
	} {
		l, err := env.Kube.CoordinationV1().Leases(lease.ns).Get(ctx, lease.name, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			t.Errorf("Lease %s/%s: %v %+v", lease.ns, lease.name, err, l)
		}
	}
}

// expectSecretPassed: a successful call of method carried the class's
// secret to the driver (the call log shows its keys, never its values).
func expectSecretPassed(t *testing.T, drv *framework.CSIDriver, method string) {
	t.Helper()
	for _, e := range drv.CallLog(t, 0).Entries {
		if e.Method == method && e.Code == "OK" && slices.Equal(e.SecretKeys, []string{"user"}) {
			return
		}
	}
	t.Errorf("no successful %s carried the class's secret", method)
}

// expectEventsFrom waits for at least one event recorded by each source
// component, in any namespace (a cluster-scoped content's go to default).
func expectEventsFrom(ctx context.Context, t *testing.T, env *framework.Env, components ...string) {
	t.Helper()
	framework.Eventually(t, 30*time.Second, fmt.Sprintf("events from %q", components), func() (bool, error) {
		events, err := env.Kube.CoreV1().Events("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		seen := map[string]bool{}
		for _, e := range events.Items {
			seen[e.Source.Component] = true
		}
		for _, c := range components {
			if !seen[c] {
				return false, fmt.Errorf("none from %q yet", c)
			}
		}
		return true, nil
	})
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
	framework.MustCreate(t, env.Snap.GroupsnapshotV1().VolumeGroupSnapshotClasses().Create, class)
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
	framework.MustCreate(t, env.Snap.GroupsnapshotV1().VolumeGroupSnapshots(ns).Create, g)
	env.WaitGroupReady(t, ns, "db", 90*time.Second)
}
