package chart

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// runHelmTestScript runs the script of the chart's `helm test` Pod
// (templates/tests/webhook-test.yaml) of release sk in ns here, with
// bin/kubectl and the admin kubeconfig instead of the Pod's image and
// ServiceAccount, and fails the test unless the script passes.
func runHelmTestScript(t *testing.T, env *framework.Env, h *helmCLI, ns string) {
	t.Helper()
	r := parseManifest(t, []byte(h.must(t, "template", "sk", chartDir(), "--namespace", ns, "--kube-version", kubeNew,
		"--show-only", "templates/tests/webhook-test.yaml")))
	var pod corev1.Pod
	r.into(t, "Pod", "sk-snapkeeper-test", &pod)
	c := pod.Spec.Containers[0]
	kubectl, err := framework.Tool("kubectl")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.Command[0], append(c.Command[1:], c.Args...)...)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(kubectl)+":"+os.Getenv("PATH"),
		"KUBECONFIG="+env.Kubeconfig, "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "PASS") {
		t.Errorf("the helm test script failed against a running webhook: %v\n%s", err, out)
	}
}
