package chart

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// A webhook-only release on the host network with its own classes, as an
// EKS cluster with a custom CNI and the snapshot-controller add-on gets it:
// the API server stores every object, the chart's classes are created while
// no webhook pod runs (their label keeps them out of its entries), and no
// controller object exists.
func TestInstallWebhookOnlyOnTheHostNetworkWithClasses(t *testing.T) {
	env, h := clusterHelm(t)
	ns := env.Namespace(t)
	class, groupClass := "chart-"+ns, "chart-group-"+ns
	args := append([]string{"install", "sk", framework.ChartDir(), "--namespace", ns,
		"--set", "certificates.mode=selfManaged", "--set", "controller.enabled=false",
		"--set", "webhook.hostNetwork=true", "--set", "webhook.port=10443",
		"--set", "metrics.grafanaDashboard.enabled=true",
		"--set-json", `volumeSnapshotClasses=[{"name":"` + class + `","driver":"chart.csi.snapkeeper.io","default":true,"parameters":{"tier":"fast"}}]`,
		"--set-json", `volumeGroupSnapshotClasses=[{"name":"` + groupClass + `","driver":"chart.csi.snapkeeper.io","deletionPolicy":"Retain"}]`,
	}, installArgs...)
	out := h.Must(t, args...)
	uninstallOnCleanup(t, h, "sk", ns)
	if !strings.Contains(out, "Webhook-only mode") {
		t.Errorf("the notes do not explain webhook-only mode:\n%s", out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	vsc, err := env.Snap.SnapshotV1().VolumeSnapshotClasses().Get(ctx, class, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if vsc.Annotations["snapshot.storage.kubernetes.io/is-default-class"] != "true" || vsc.Parameters["tier"] != "fast" {
		t.Errorf("class as stored: %+v", vsc.ObjectMeta)
	}
	gsc, err := env.Snap.GroupsnapshotV1().VolumeGroupSnapshotClasses().Get(ctx, groupClass, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if gsc.DeletionPolicy != "Retain" {
		t.Errorf("group class policy %q", gsc.DeletionPolicy)
	}

	dep, err := env.Kube.AppsV1().Deployments(ns).Get(ctx, "sk-snapkeeper-webhook", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec := dep.Spec.Template.Spec
	c := spec.Containers[0]
	switch {
	case !spec.HostNetwork || spec.DNSPolicy != corev1.DNSClusterFirstWithHostNet:
		t.Errorf("stored pod: hostNetwork %v, dnsPolicy %q", spec.HostNetwork, spec.DNSPolicy)
	case c.Ports[0].ContainerPort != 10443 || c.Ports[0].HostPort != 10443:
		// hostPort: two replicas never share a node.
		t.Errorf("stored ports %+v", c.Ports)
	}
	svc, err := env.Kube.CoreV1().Services(ns).Get(ctx, "sk-snapkeeper-webhook", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if svc.Spec.Ports[0].Port != 443 || svc.Spec.Ports[0].TargetPort.String() != "https" {
		t.Errorf("webhook Service ports %+v", svc.Spec.Ports)
	}
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "sk-snapkeeper-dashboard", metav1.GetOptions{}); err != nil {
		t.Errorf("dashboard ConfigMap: %v", err)
	}
	for _, name := range []string{"sk-snapkeeper-controller"} {
		if _, err := env.Kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("webhook-only mode stored Deployment %s (%v)", name, err)
		}
		if _, err := env.Kube.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("webhook-only mode stored ClusterRole %s (%v)", name, err)
		}
	}
	// A class created outside the chart still goes to the (absent) webhook,
	// whose failurePolicy is Fail.
	outside := vsc.DeepCopy()
	outside.ObjectMeta = metav1.ObjectMeta{Name: "outside-" + ns}
	if _, err := env.Snap.SnapshotV1().VolumeSnapshotClasses().Create(ctx, outside, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err == nil ||
		!strings.Contains(err.Error(), "volumesnapshotclasses.validation.snapkeeper.io") {
		t.Errorf("a class without the chart's label did not go to the webhook: %v", err)
	}
}
