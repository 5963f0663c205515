package chart

import (
	"context"
	"os/exec"
	"path"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// runHelmTestPod runs the command of the chart's `helm test` Pod
// (templates/tests/webhook-test.yaml) of release sk in ns here: our snapctl
// binary for the image's /usr/local/bin/snapctl, with the Pod's arguments
// and the admin kubeconfig instead of the Pod's ServiceAccount, and fails
// the test unless it passes.
func runHelmTestPod(t *testing.T, env *framework.Env, h *framework.Helm, ns string) {
	t.Helper()
	r := parseManifest(t, []byte(h.Must(t, "template", "sk", framework.ChartDir(), "--namespace", ns, "--kube-version", kubeNew,
		"--show-only", "templates/tests/webhook-test.yaml")))
	var pod corev1.Pod
	r.into(t, "Pod", "sk-snapkeeper-test", &pod)
	c := pod.Spec.Containers[0]
	if len(c.Command) == 0 || path.Base(c.Command[0]) != "snapctl" {
		t.Fatalf("the helm test Pod runs %q, not snapctl", c.Command)
	}
	snapctl := ownBinary(t, "cmd/snapctl")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args := append(append(append([]string{}, c.Command[1:]...), c.Args...), "--kubeconfig="+env.Kubeconfig)
	out, err := exec.CommandContext(ctx, snapctl, args...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "PASS") {
		t.Errorf("the helm test Pod's command failed against a running webhook: %v\n%s", err, out)
	}
}
