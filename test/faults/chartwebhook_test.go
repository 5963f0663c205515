package faults

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	admregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"

	manifests "github.com/snapkeeper/snapkeeper/pkg/manifest"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

// The identities the chart gives the controller (release "snapkeeper" in
// namespace "snapkeeper", as framework.RenderChart renders it) and the CSI
// side (a driver pod's account bound through csiSide.rbac).
const (
	chartControllerSA = "snapkeeper/snapkeeper-controller"
	chartCSISideSA    = "default/csi-driver"
)

// chartIdentities renders the chart with the CSI side bound to
// chartCSISideSA, applies its RBAC, and returns kubeconfigs for the
// binder and the CSI side, and the rendered manifest.
func chartIdentities(t *testing.T, env *framework.Env) (binder, csi string, manifest []byte) {
	t.Helper()
	ctx := context.Background()
	ns, name, _ := strings.Cut(chartCSISideSA, "/")
	manifest, err := framework.RenderChart(ctx, "--set", "csiSide.rbac.create=true",
		"--set-json", fmt.Sprintf(`csiSide.rbac.serviceAccounts=[{"name":%q,"namespace":%q}]`, name, ns))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.ApplyRBAC(ctx, manifest, ""); err != nil {
		t.Fatalf("chart RBAC: %v", err)
	}
	// The driver's account: the chart binds it, a driver's chart makes it.
	_, err = env.Kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	kc := func(account string) string {
		sans, sa, _ := strings.Cut(account, "/")
		path := filepath.Join(env.Dir, "identities", sa+".kubeconfig")
		if err := env.ServiceAccountKubeconfig(ctx, sans, sa, path, 3600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	return kc(chartControllerSA), kc(chartCSISideSA), manifest
}

// registerChartWebhook replaces the framework's registration of wh by the
// webhook configurations the chart renders (failurePolicy, timeoutSeconds,
// selectors, matchConditions), with each entry's service pointed at wh.
// It returns the validating configuration as registered.
func registerChartWebhook(t *testing.T, env *framework.Env, wh *framework.Webhook, manifest []byte) *admregv1.ValidatingWebhookConfiguration {
	t.Helper()
	ctx := context.Background()
	env.UnregisterWebhook(ctx, wh.ConfigName)
	point := func(cc *admregv1.WebhookClientConfig) {
		path := "/"
		if cc.Service != nil && cc.Service.Path != nil {
			path = *cc.Service.Path
		}
		url := "https://" + wh.Addr + path
		*cc = admregv1.WebhookClientConfig{URL: &url, CABundle: wh.CA.CertPEM}
	}
	var val *admregv1.ValidatingWebhookConfiguration
	docs, err := manifests.SplitDocuments(manifest)
	if err != nil {
		t.Fatal(err)
	}
	reg := env.Kube.AdmissionregistrationV1()
	for _, doc := range docs {
		if !bytes.Contains(doc, []byte("WebhookConfiguration")) {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			continue
		}
		switch o := obj.(type) {
		case *admregv1.ValidatingWebhookConfiguration:
			for i := range o.Webhooks {
				point(&o.Webhooks[i].ClientConfig)
			}
			if val, err = reg.ValidatingWebhookConfigurations().Create(ctx, o, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		case *admregv1.MutatingWebhookConfiguration:
			for i := range o.Webhooks {
				point(&o.Webhooks[i].ClientConfig)
			}
			framework.MustCreate(t, reg.MutatingWebhookConfigurations().Create, o)
		}
	}
	if val == nil {
		t.Fatal("the chart rendered no ValidatingWebhookConfiguration")
	}
	for _, u := range []string{chartControllerSA, chartCSISideSA} {
		user := "system:serviceaccount:" + strings.Replace(u, "/", ":", 1)
		for _, h := range val.Webhooks {
			if !strings.Contains(framework.JSON(h.MatchConditions), user) {
				t.Fatalf("webhook %s does not exclude %s: matchConditions %s", h.Name, user, framework.JSON(h.MatchConditions))
			}
		}
	}
	return val
}

// TestWebhookDownOrSlow registers the webhook as the chart does (its
// ValidatingWebhookConfiguration rendered by bin/helm, pointed at the
// framework's webhook): failurePolicy Fail, the chart's timeoutSeconds,
// and matchConditions that skip the controller's ServiceAccounts, which
// the binder and the CSI side run as. It measures what a user sees when
// creating a VolumeSnapshotClass while the webhook is frozen (SIGSTOP:
// connections open, no answer) and while it is stopped (connection
// refused), and checks that the controller's own writes never wait for
// the webhook: snapshots created while it was up are cut, become ready
// and are deleted while it is frozen, then while it is stopped.
func TestWebhookDownOrSlow(t *testing.T) {
	rng := newRand(t)
	n := shortOrFull(5, 50)
	s := privateScenario(t, nil)
	w := newWorld(s)
	binderKC, csiKC, manifest := chartIdentities(t, s.Env)
	wh := s.Env.StartWebhook(t)
	val := registerChartWebhook(t, s.Env, wh, manifest)
	timeout := time.Duration(*val.Webhooks[0].TimeoutSeconds) * time.Second
	t.Logf("chart registration: failurePolicy %s, timeoutSeconds %d, matchConditions %s",
		*val.Webhooks[0].FailurePolicy, *val.Webhooks[0].TimeoutSeconds, framework.JSON(val.Webhooks[0].MatchConditions))
	binderArgs := []string{"--components=binder", "--kubeconfig=" + binderKC, "--retry-interval-max=2s"}
	csi := s.StartController(t, "--components=csi", "--csi-address="+s.Drv.Socket, "--kubeconfig="+csiKC, "--retry-interval-max=2s")
	w.addController(csi)
	binder := s.StartController(t, binderArgs...)
	w.addController(binder)
	claims := (&workload{Claims: 3}).claims(t, s)
	webhookJudges(t, s, 30*time.Second)

	// phase cuts n snapshots while the webhook is in the state stop puts
	// it in, with a binder started after it, and deletes half of them.
	phase := func(name string, stop func()) time.Duration {
		binder.Proc.Stop(10 * time.Second)
		var names []string
		for i := range n {
			names = append(names, fmt.Sprintf("%s-%02d", name, i))
			if err := w.create(context.Background(), names[i], claims[rng.IntN(len(claims))]); err != nil {
				t.Fatal(err)
			}
		}
		stop()
		lat := classCreate(t, s, name)
		if lat > timeout+2*time.Second {
			t.Errorf("webhook %s: the class create took %v, more than timeoutSeconds %v", name, lat.Round(time.Millisecond), timeout)
		}
		start := time.Now()
		binder = s.StartController(t, binderArgs...)
		w.addController(binder)
		for _, nm := range names {
			s.WaitReady(t, nm, time.Minute)
		}
		ready := time.Since(start)
		if name == "stopped" {
			adminContentUpdateRefused(t, s, names[0])
		}
		for _, nm := range names[:n/2] {
			if err := w.remove(context.Background(), nm); err != nil {
				t.Fatal(err)
			}
		}
		w.checkInvariants(t, time.Minute)
		t.Logf("webhook %s: %d snapshots ready %v after the binder started, %d deleted, all as the chart's ServiceAccounts", name, n, ready.Round(time.Millisecond), n/2)
		return lat
	}

	slow := phase("frozen", func() {
		if err := wh.Proc.Freeze(10 * time.Second); err != nil {
			t.Fatal(err)
		}
	})
	wh.Proc.Signal(syscall.SIGCONT)
	again := webhookJudges(t, s, 30*time.Second)
	t.Logf("webhook judging again %v after SIGCONT", again.Round(time.Millisecond))
	down := phase("stopped", func() { wh.Proc.Stop(5 * time.Second) })
	t.Logf("a user's class create failed after %v with the webhook frozen and after %v with it stopped (timeoutSeconds %v)",
		slow.Round(time.Millisecond), down.Round(time.Millisecond), timeout)
	noPhantoms(t, binder)
	noPhantoms(t, csi)
}

// classCreate creates a valid VolumeSnapshotClass as the admin, expects the
// API server to refuse it because the webhook does not answer, and
// returns how long the refusal took.
func classCreate(t *testing.T, s *framework.Scenario, name string) time.Duration {
	t.Helper()
	c := framework.SnapshotClass(name+"-"+s.NS, s.Drv.Name, "Delete", false)
	start := time.Now()
	_, err := s.Env.Snap.SnapshotV1().VolumeSnapshotClasses().Create(context.Background(), c, metav1.CreateOptions{})
	lat := time.Since(start)
	if err == nil {
		t.Errorf("webhook %s: the class was created without the webhook (failurePolicy Fail)", name)
		return lat
	}
	if !strings.Contains(err.Error(), "failed calling webhook") {
		t.Errorf("webhook %s: unclear error: %v", name, err)
	}
	t.Logf("webhook %s: class create refused after %v: %v", name, lat.Round(time.Millisecond), err)
	return lat
}

// adminContentUpdateRefused shows that the webhook does intercept content
// writes: the admin's label on the content of snapshot name is refused
// while the webhook is away, where the controller's writes passed.
func adminContentUpdateRefused(t *testing.T, s *framework.Scenario, name string) {
	t.Helper()
	cn := *s.GetSnapshot(t, name).Status.BoundVolumeSnapshotContentName
	patch := []byte(`{"metadata":{"labels":{"faults.snapkeeper.io/probe":"x"}}}`)
	_, err := s.Env.Snap.SnapshotV1().VolumeSnapshotContents().Patch(context.Background(), cn, types.MergePatchType, patch, metav1.PatchOptions{})
	if err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
		t.Errorf("the admin's update of content %s with the webhook away: %v, want a webhook failure", cn, err)
	}
}
