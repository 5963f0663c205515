// Package dropin checks that our controller image can replace the community
// snapshot-controller and csi-snapshotter (external-snapshotter at
// framework.CommunityVersion, hack/tools/peers/go.mod)
// without touching their Deployments: every community flag is accepted,
// the community RBAC is enough, and a community controller still holding
// the binder's Lease is noticed.
package dropin

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

// controllerBin builds our controller binary.
func controllerBin(t *testing.T) string {
	t.Helper()
	bin, err := framework.OwnBinary("./cmd/controller")
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// startOwn starts our controller with exactly args (no kubeconfig or
// endpoint added) and env; t.Cleanup stops it and shows its log on failure.
func startOwn(t *testing.T, env *framework.Env, name string, args []string, environ ...string) *framework.Process {
	t.Helper()
	p, err := framework.StartProcess(env.TempDir(t, name), name, controllerBin(t), args, environ...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop(10 * time.Second)
		if t.Failed() {
			t.Logf("log of %s (%v):\n%s", name, args, p.Tail(6000))
		}
	})
	return p
}

// communityModuleDir is the external-snapshotter v8 module the peers build
// from (hack/tools/peers), in the Go module cache.
func communityModuleDir(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/kubernetes-csi/external-snapshotter/v8")
	cmd.Dir = filepath.Join(framework.RepoRoot(), "hack", "tools", "peers")
	out, err := cmd.Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		t.Fatalf("the community module is not in the module cache (run `make tools`): %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "deploy", "kubernetes")); err != nil {
		t.Fatalf("community module at %s: %v", dir, err)
	}
	return dir
}

// saKubeconfig writes a kubeconfig with a token of ServiceAccount ns/sa
// from the TokenRequest API, the identity a pod of that account would have.
func saKubeconfig(t *testing.T, env *framework.Env, ns, sa string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	expiry := int64(3600)
	tr, err := env.Kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token of %s/%s: %v", ns, sa, err)
	}
	path := filepath.Join(env.TempDir(t, "kubeconfig-"+sa), "kubeconfig")
	if err := framework.WriteKubeconfig(path, env.URL, tr.Status.Token); err != nil {
		t.Fatal(err)
	}
	return path
}

// refusedLines returns the log lines of p that report a refusal by the API
// server's authorization.
func refusedLines(p *framework.Process) []string {
	var out []string
	for _, line := range strings.Split(p.Tail(8<<20), "\n") {
		// "... is forbidden: User ... cannot ...": the API server's RBAC
		// refusal. Other "forbidden"s are no refusal of ours: an older API
		// server refuses client-go's streaming list ("sendInitialEvents is
		// forbidden ... unless the WatchList feature gate is enabled") and
		// client-go falls back to list and watch.
		if l := strings.ToLower(line); strings.Contains(l, "forbidden") && !strings.Contains(l, "sendinitialevents") {
			out = append(out, line)
		}
	}
	return out
}
