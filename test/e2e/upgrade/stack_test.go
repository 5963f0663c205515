package upgrade

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// The releases as the charts name them: release "sk" of the snapkeeper
// chart, release "drv" of the example driver chart (its CSI side).
const (
	webhookDeployment = "sk-snapkeeper-webhook"
	binderDeployment  = "sk-snapkeeper-controller"
	csiDeployment     = "drv-controller"
	binderLease       = "snapshot-controller-leader"
)

// csiLease is the CSI side's Lease for the mock driver.
var csiLease = "external-snapshotter-leader-" + strings.ReplaceAll(framework.MockDriverName, ".", "-")

// cluster is the test's own control plane with both releases, the mock
// driver (the storage backend: it runs on through the upgrade) and the
// webhook Service stand-in.
type cluster struct {
	env              *framework.Env
	helm             *framework.Helm
	ns, drvNS, apps  string
	drv              *framework.CSIDriver
	svc              *framework.Service
	installArgs      []string // the snapkeeper release's values, given again on upgrade
	driverChartValue []string
}

// ownControlPlane starts etcd and kube-apiserver without the snapshot CRDs:
// the previous release's chart installs them and the upgrade updates them,
// as on a cluster. The directory stays when the test fails.
func ownControlPlane(t *testing.T) *framework.Env {
	t.Helper()
	dir, err := os.MkdirTemp("", "snapkeeper-upgrade-")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cp, err := framework.StartControlPlane(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cp.Stop()
		if t.Failed() || os.Getenv("SNAPKEEPER_KEEP_TMP") != "" {
			t.Logf("logs kept in %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	env, err := framework.NewEnv(cp)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// install installs both releases of b and waits until the CRDs it brought
// are served.
func (c *cluster) install(t *testing.T, b *build) {
	t.Helper()
	c.helm.Must(t, append([]string{"install", "sk", b.Chart, "--namespace", c.ns}, c.installArgs...)...)
	c.helm.Must(t, append([]string{"install", "drv", b.DriverChart, "--namespace", c.drvNS}, c.driverChartValue...)...)
	framework.Eventually(t, time.Minute, "the chart's CRDs to be served", func() (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := c.env.Snap.SnapshotV1().VolumeSnapshots(c.apps).List(ctx, metav1.ListOptions{}); err != nil {
			return false, err
		}
		_, err := c.env.Snap.GroupsnapshotV1().VolumeGroupSnapshots(c.apps).List(ctx, metav1.ListOptions{})
		return err == nil, err
	})
}

// upgrade runs `helm upgrade` of both releases to b with the values given
// at install, as an operator would. The webhook configurations get their
// Service back for it (as in a cluster; helm would otherwise add it next
// to the loopback URL), and the caBundle the selfManaged webhook filled
// must survive: a three-way merge leaves alone what neither chart renders.
// A lost caBundle would be an outage until a webhook filled it again.
func (c *cluster) upgrade(t *testing.T, b *build) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	before := c.caBundles(ctx, t)
	svc := admissionregistrationv1.ServiceReference{Namespace: c.ns, Name: webhookDeployment, Port: ptr(int32(443))}
	if err := framework.PointWebhooksAtService(ctx, c.env, webhookDeployment, svc); err != nil {
		t.Fatal(err)
	}
	c.helm.Must(t, append([]string{"upgrade", "sk", b.Chart, "--namespace", c.ns}, c.installArgs...)...)
	c.helm.Must(t, append([]string{"upgrade", "drv", b.DriverChart, "--namespace", c.drvNS}, c.driverChartValue...)...)
	// Entries the new chart adds (a new kind) are filled by the new
	// webhook; every entry that was there keeps its caBundle.
	after := c.caBundles(ctx, t)
	var changed, added []string
	for k, v := range before {
		if !bytes.Equal(v, after[k]) {
			changed = append(changed, k)
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			added = append(added, k)
		}
	}
	if len(changed) > 0 {
		t.Errorf("helm upgrade changed the caBundle of webhook entries %v (before %d entries, after %d; empty ones: %v)", changed, len(before), len(after), emptyBundles(after))
	}
	if len(added) > 0 {
		t.Logf("helm upgrade added webhook entries %v", added)
	}
	c.routeWebhook(t, c.svc.Endpoints()[0])
}

// caBundles is the caBundle of every entry of both webhook configurations.
func (c *cluster) caBundles(ctx context.Context, t *testing.T) map[string][]byte {
	t.Helper()
	out, err := framework.WebhookCABundles(ctx, c.env, webhookDeployment)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func emptyBundles(b map[string][]byte) []string {
	var out []string
	for k, v := range b {
		if len(v) == 0 {
			out = append(out, k)
		}
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// startWebhook runs b's webhook as pod pod of the webhook Deployment as it
// stands now (selfManaged certificates in a directory of its own, on a
// loopback port), and waits until it is ready.
func (c *cluster) startWebhook(t *testing.T, b *build, pod string) (*framework.Process, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	p, err := framework.PodProcess{Namespace: c.ns, Deployment: webhookDeployment, Container: "webhook", Pod: pod}.
		LoopbackWebhook(ctx, c.env, port, c.env.TempDir(t, pod+"-tls"))
	if err != nil {
		t.Fatal(err)
	}
	proc := p.Start(t, c.env, b.Webhook)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	proc.WaitOK(t, "https://"+addr+"/readyz", time.Minute)
	return proc, addr
}

// startController runs b's snapkeeper-controller as pod pod of the
// binder's or the CSI side's Deployment (container) as it stands now, and
// waits until it serves /healthz: a replica that waits for the Lease is
// alive, it turns ready once it leads.
func (c *cluster) startController(t *testing.T, b *build, ns, deployment, container, pod string) *framework.Component {
	t.Helper()
	addr, err := framework.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	rewrite := map[string]string{"--http-endpoint=": "--http-endpoint=" + addr}
	if container != "controller" {
		rewrite["--csi-address="] = "--csi-address=" + c.drv.Socket
	}
	p := framework.PodProcess{Namespace: ns, Deployment: deployment, Container: container, Pod: pod, Rewrite: rewrite}
	proc := p.Start(t, c.env, b.Controller)
	proc.WaitOK(t, "http://"+addr+"/healthz", time.Minute)
	return &framework.Component{Name: proc.Name, HTTPAddr: addr, Proc: proc}
}

// stack is one version's three processes.
type stack struct {
	version     string
	webhook     *framework.Process
	webhookAddr string
	binder, csi *framework.Component
}

func (c *cluster) startStack(t *testing.T, b *build, suffix string) *stack {
	t.Helper()
	s := &stack{version: b.Version}
	s.webhook, s.webhookAddr = c.startWebhook(t, b, webhookDeployment+"-"+suffix)
	s.binder = c.startController(t, b, c.ns, binderDeployment, "controller", binderDeployment+"-"+suffix)
	s.csi = c.startController(t, b, c.drvNS, csiDeployment, "snapkeeper-csi-side", csiDeployment+"-"+suffix)
	for _, comp := range []*framework.Component{s.binder, s.csi} {
		if err := comp.WaitReady(time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// leaseHolder is the holderIdentity of a Lease ("" when there is none).
func (c *cluster) leaseHolder(ctx context.Context, ns, name string) string {
	l, err := c.env.Kube.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}
