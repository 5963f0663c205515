package chart

import (
	"context"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

func TestWebhookHostNetworkDNSPolicyAndPort(t *testing.T) {
	h := framework.NewHelm(t, "")
	pod := func(args ...string) (corev1.PodSpec, corev1.Service) {
		r := parseManifest(t, h.Template(t, kubeNew, args...))
		var dep appsv1.Deployment
		r.into(t, "Deployment", "snapkeeper-webhook", &dep)
		var svc corev1.Service
		r.into(t, "Service", "snapkeeper-webhook-metrics", &svc)
		return dep.Spec.Template.Spec, svc
	}
	spec, _ := pod()
	if spec.HostNetwork || spec.DNSPolicy != corev1.DNSClusterFirst {
		t.Errorf("default: hostNetwork %v, dnsPolicy %q", spec.HostNetwork, spec.DNSPolicy)
	}
	spec, svc := pod("--set", "webhook.hostNetwork=true", "--set", "webhook.port=10443")
	c := spec.Containers[0]
	switch {
	case !spec.HostNetwork || spec.DNSPolicy != corev1.DNSClusterFirstWithHostNet:
		t.Errorf("hostNetwork: %v, dnsPolicy %q", spec.HostNetwork, spec.DNSPolicy)
	case c.Ports[0].ContainerPort != 10443 || c.Ports[0].HostPort != 10443 || !strings.Contains(strings.Join(c.Args, " "), "--port=10443"):
		t.Errorf("port not followed: %v %v", c.Ports, c.Args)
	case svc.Spec.Ports[0].Port != 10443:
		t.Errorf("metrics Service port %d", svc.Spec.Ports[0].Port)
	}
	spec, _ = pod("--set", "webhook.hostNetwork=true", "--set", "webhook.dnsPolicy=Default")
	if spec.DNSPolicy != corev1.DNSDefault {
		t.Errorf("explicit dnsPolicy: %q", spec.DNSPolicy)
	}
	if _, err := h.Run(context.Background(), "template", "snapkeeper", framework.ChartDir(), "--set", "webhook.dnsPolicy=Sometimes"); err == nil {
		t.Error("the schema accepted an unknown dnsPolicy")
	}
}

const classValues = `volumeSnapshotClasses=[{"name":"fast","driver":"a.csi.io","default":true,"parameters":{"tier":"fast"},"labels":{"team":"x"}},{"name":"keep","driver":"a.csi.io","deletionPolicy":"Retain"}]`
const groupClassValues = `volumeGroupSnapshotClasses=[{"name":"group","driver":"a.csi.io","default":false}]`

func TestSnapshotClassListsRenderObjects(t *testing.T) {
	h := framework.NewHelm(t, "")
	r := parseManifest(t, h.Template(t, kubeNew, "--set-json", classValues, "--set-json", groupClassValues))
	fast := r.get(t, "VolumeSnapshotClass", "fast")
	switch {
	case fast.GetAnnotations()["snapshot.storage.kubernetes.io/is-default-class"] != "true":
		t.Errorf("fast annotations %v", fast.GetAnnotations())
	case fast.GetLabels()["team"] != "x" || fast.GetLabels()["snapkeeper.io/chart-class"] != "true":
		t.Errorf("fast labels %v", fast.GetLabels())
	case fast.Object["driver"] != "a.csi.io" || fast.Object["deletionPolicy"] != "Delete":
		t.Errorf("fast %v", fast.Object)
	}
	keep := r.get(t, "VolumeSnapshotClass", "keep")
	if keep.Object["deletionPolicy"] != "Retain" || len(keep.GetAnnotations()) != 0 {
		t.Errorf("keep %v", keep.Object)
	}
	group := r.get(t, "VolumeGroupSnapshotClass", "group")
	if group.GetAnnotations()["groupsnapshot.storage.kubernetes.io/is-default-class"] != "false" || group.GetAPIVersion() != "groupsnapshot.storage.k8s.io/v1" {
		t.Errorf("group %v", group.Object)
	}
	// The class entries of the webhook skip the chart's own classes, which
	// are created while it starts; the other entries are unchanged.
	for _, wh := range webhookEntries(t, r, "snapkeeper-webhook") {
		skips := wh.ObjectSelector != nil && len(wh.ObjectSelector.MatchExpressions) == 1 &&
			wh.ObjectSelector.MatchExpressions[0].Key == "snapkeeper.io/chart-class" &&
			wh.ObjectSelector.MatchExpressions[0].Operator == metav1.LabelSelectorOpDoesNotExist
		isClass := strings.Contains(wh.Name, "classes.")
		if skips != isClass {
			t.Errorf("%s: objectSelector %+v", wh.Name, wh.ObjectSelector)
		}
	}
	plain := parseManifest(t, h.Template(t, kubeNew))
	if k := plain.kinds(); k["VolumeSnapshotClass"] != 0 || k["VolumeGroupSnapshotClass"] != 0 {
		t.Errorf("classes rendered by default: %v", k)
	}
	for _, wh := range webhookEntries(t, plain, "snapkeeper-webhook") {
		if wh.ObjectSelector != nil && len(wh.ObjectSelector.MatchExpressions) != 0 {
			t.Errorf("%s: objectSelector %+v without chart classes", wh.Name, wh.ObjectSelector)
		}
	}
	bad := map[string]string{
		"two defaults of one driver": `volumeSnapshotClasses=[{"name":"a","driver":"d","default":true},{"name":"b","driver":"d","default":true}]`,
		"a class without a driver":   `volumeSnapshotClasses=[{"name":"a"}]`,
		"an unknown policy":          `volumeGroupSnapshotClasses=[{"name":"a","driver":"d","deletionPolicy":"Keep"}]`,
	}
	for what, v := range bad {
		if _, err := h.Run(context.Background(), "template", "snapkeeper", framework.ChartDir(), "--set-json", v); err == nil {
			t.Errorf("%s was accepted", what)
		}
	}
}

func TestHelmTestPodExpectsAWebhookDenial(t *testing.T) {
	h := framework.NewHelm(t, "")
	r := parseManifest(t, h.Template(t, kubeNew, "--set", "imagePullSecrets[0].name=pull"))
	var pod corev1.Pod
	r.into(t, "Pod", "snapkeeper-test", &pod)
	var webhook appsv1.Deployment
	r.into(t, "Deployment", "snapkeeper-webhook", &webhook)
	c := pod.Spec.Containers[0]
	switch {
	case pod.Annotations["helm.sh/hook"] != "test":
		t.Errorf("not a test hook: %v", pod.Annotations)
	case c.Image != webhook.Spec.Template.Spec.Containers[0].Image:
		t.Errorf("image %q, want the chart's own %q", c.Image, webhook.Spec.Template.Spec.Containers[0].Image)
	case !slices.Equal(c.Command, []string{"/usr/local/bin/snapctl", "selftest", "webhook"}) ||
		!slices.Equal(c.Args, []string{"--class-name=snapkeeper-test-invalid"}):
		t.Errorf("command %q %q: want snapctl selftest webhook, no shell", c.Command, c.Args)
	case pod.Spec.ServiceAccountName != "snapkeeper-test" || pod.Spec.RestartPolicy != corev1.RestartPolicyNever:
		t.Errorf("pod spec %+v", pod.Spec)
	case len(pod.Spec.ImagePullSecrets) != 1 || pod.Spec.ImagePullSecrets[0].Name != "pull":
		t.Errorf("imagePullSecrets %v", pod.Spec.ImagePullSecrets)
	}
	r = parseManifest(t, h.Template(t, kubeNew, "--set", "tests.image.tag=9.9"))
	var tagged corev1.Pod
	r.into(t, "Pod", "snapkeeper-test", &tagged)
	if img := tagged.Spec.Containers[0].Image; img != "ghcr.io/snapkeeper/snapkeeper:9.9" {
		t.Errorf("tests.image.tag=9.9: image %q", img)
	}
	for _, kind := range []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding"} {
		if o := r.get(t, kind, "snapkeeper-test"); o.GetAnnotations()["helm.sh/hook"] != "test" {
			t.Errorf("%s is not a test hook", kind)
		}
	}
	for _, off := range [][]string{{"--set", "tests.enabled=false"}, {"--set", "webhook.enabled=false"}} {
		if parseManifest(t, h.Template(t, kubeNew, off...)).find("Pod", "snapkeeper-test") != nil {
			t.Errorf("%v renders the test Pod", off)
		}
	}
}

func TestWebhookOnlyModeRendersNoController(t *testing.T) {
	h := framework.NewHelm(t, "")
	r := parseManifest(t, h.Template(t, kubeNew, "--set", "controller.enabled=false", "--set", "crds.install=false",
		"--set", "metrics.serviceMonitor.enabled=true"))
	k := r.kinds()
	if k["Deployment"] != 1 || r.find("Deployment", "snapkeeper-webhook") == nil || k["CustomResourceDefinition"] != 0 {
		t.Errorf("webhook-only renders %v", k)
	}
	for _, name := range []string{"snapkeeper-controller", "snapkeeper-controller-metrics"} {
		for _, kind := range []string{"Deployment", "Service", "ClusterRole", "ServiceAccount"} {
			if r.find(kind, name) != nil {
				t.Errorf("webhook-only renders %s %s", kind, name)
			}
		}
	}
	for _, wh := range webhookEntries(t, r, "snapkeeper-webhook") {
		for _, mc := range wh.MatchConditions {
			if strings.Contains(mc.Expression, "snapkeeper-controller") {
				t.Errorf("%s still skips the chart's controller account: %s", wh.Name, mc.Expression)
			}
		}
	}
}
