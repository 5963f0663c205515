package gitops

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// fluxNS is where the GitRepository and Kustomization live, and the
// controllers' RUNTIME_NAMESPACE (events, as in a flux install).
const fluxNS = "flux-system"

var (
	gitRepositories = schema.GroupVersionResource{Group: "source.toolkit.fluxcd.io", Version: "v1", Resource: "gitrepositories"}
	kustomizations  = schema.GroupVersionResource{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Resource: "kustomizations"}
)

// repo is a git repository served over HTTP on loopback by git's own
// http-backend (the smart protocol, as a git host serves it), and a
// working copy the test commits to and pushes from.
type repo struct {
	URL  string // http://127.0.0.1:port/app.git
	work string
}

// git runs git in dir with a fixed identity.
func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-c", "user.name=snapkeeper-e2e", "-c", "user.email=e2e@snapkeeper.io",
		"-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// newRepo starts the git server; t.Cleanup stops it.
func newRepo(t *testing.T, dir string) *repo {
	t.Helper()
	backend, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("git is needed (apt-get install git): %v", err)
	}
	root := filepath.Join(dir, "server")
	r := &repo{work: filepath.Join(dir, "work")}
	for _, step := range []struct {
		dir  string
		args []string
	}{
		{dir, []string{"init", "--bare", filepath.Join(root, "app.git")}},
		{dir, []string{"init", r.work}},
		{r.work, []string{"remote", "add", "origin", filepath.Join(root, "app.git")}},
	} {
		if _, err := git(step.dir, step.args...); err != nil {
			t.Fatal(err)
		}
	}
	h := &cgi.Handler{
		Path: filepath.Join(strings.TrimSpace(string(backend)), "git-http-backend"),
		Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"},
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	r.URL = "http://" + l.Addr().String() + "/app.git"
	return r
}

// commit replaces the working copy's files with files (path -> content),
// commits and pushes; it returns the commit's hash.
func (r *repo) commit(t *testing.T, message string, files map[string]string) string {
	t.Helper()
	old, err := filepath.Glob(filepath.Join(r.work, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(r.work, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"add", "-A"}, {"commit", "--allow-empty", "-q", "-m", message}, {"push", "-q", "origin", "HEAD:main"}} {
		if _, err := git(r.work, args...); err != nil {
			t.Fatal(err)
		}
	}
	sha, err := git(r.work, "rev-parse", "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	return sha
}

// flux is source-controller and kustomize-controller running as processes
// with the admin kubeconfig, as a flux install runs them with a
// cluster-admin service account.
type flux struct {
	env  *framework.Env
	dir  string
	src  *framework.Process
	kust *framework.Process
}

// startFlux installs Flux's CRDs (an apply: again is a no-op) and starts both
// controllers; t.Cleanup stops them.
func startFlux(t *testing.T, env *framework.Env) *flux {
	t.Helper()
	f := &flux{env: env, dir: env.TempDir(t, "flux")}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := framework.InstallCRDs(ctx, env.Dynamic, filepath.Join(framework.RepoRoot(), "bin", "flux-crds")); err != nil {
		t.Fatalf("Flux CRDs from bin/flux-crds (make test-gitops): %v", err)
	}
	if err := env.EnsureNamespace(ctx, fluxNS); err != nil {
		t.Fatal(err)
	}
	storage, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(storage)
	artifacts := filepath.Join(f.dir, "artifacts")
	if err := os.MkdirAll(artifacts, 0o755); err != nil {
		t.Fatal(err)
	}
	f.src = f.start(t, "source-controller", "--storage-path="+artifacts,
		"--storage-addr="+addr, "--storage-adv-addr="+addr)
	f.kust = f.start(t, "kustomize-controller")
	return f
}

func (f *flux) start(t *testing.T, name string, args ...string) *framework.Process {
	t.Helper()
	bin, err := framework.Tool(name)
	if err != nil {
		t.Fatalf("%v (make test-gitops)", err)
	}
	ports := make([]int, 2)
	for i := range ports {
		if ports[i], err = framework.FreePort(); err != nil {
			t.Fatal(err)
		}
	}
	health := "127.0.0.1:" + strconv.Itoa(ports[1])
	args = append(args, "--metrics-addr=127.0.0.1:"+strconv.Itoa(ports[0]), "--health-addr="+health,
		"--enable-leader-election=false", "--watch-all-namespaces=true", "--log-level=debug")
	p, err := framework.StartProcess(f.dir, name, bin, args, "KUBECONFIG="+f.env.Kubeconfig, "RUNTIME_NAMESPACE="+fluxNS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(5 * time.Second) })
	p.WaitOK(t, "http://"+health+"/readyz", 60*time.Second)
	return p
}

// sync is a GitRepository and a Kustomization of it, both named name:
// the repository polled every 2 s, the Kustomization retried every 5 s
// after a failure, pruning on.
func (f *flux) sync(t *testing.T, name, url string) *kustomization {
	t.Helper()
	objects := []struct {
		gvr schema.GroupVersionResource
		obj map[string]any
	}{
		{gitRepositories, map[string]any{
			"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
			"metadata": map[string]any{"name": name, "namespace": fluxNS},
			"spec":     map[string]any{"url": url, "interval": "2s", "timeout": "20s", "ref": map[string]any{"branch": "main"}},
		}},
		{kustomizations, map[string]any{
			"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
			"metadata": map[string]any{"name": name, "namespace": fluxNS},
			"spec": map[string]any{"interval": "10m", "retryInterval": "5s", "timeout": "1m", "path": "./", "prune": true,
				"sourceRef": map[string]any{"kind": "GitRepository", "name": name}},
		}},
	}
	for _, o := range objects {
		if _, err := f.env.Dynamic.Resource(o.gvr).Namespace(fluxNS).Create(context.Background(),
			&unstructured.Unstructured{Object: o.obj}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	k := &kustomization{f: f, name: name}
	t.Cleanup(func() {
		// Without the Kustomization nothing is pruned any more: the test
		// deletes what it applied itself.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, o := range objects {
			_ = f.env.Dynamic.Resource(o.gvr).Namespace(fluxNS).Delete(ctx, name, metav1.DeleteOptions{})
		}
	})
	return k
}

// kustomization reads one Kustomization's outcome.
type kustomization struct {
	f    *flux
	name string
}

// outcome is what a team reads from a Kustomization: its Ready condition
// and the revisions it last attempted and last applied.
type outcome struct {
	Status, Reason, Message string
	Attempted, Applied      string
}

func (o outcome) String() string {
	return fmt.Sprintf("Ready=%s reason=%s message=%q (attempted %s, applied %s)", o.Status, o.Reason, o.Message, o.Attempted, o.Applied)
}

func (k *kustomization) read(ctx context.Context) (outcome, error) {
	u, err := k.f.env.Dynamic.Resource(kustomizations).Namespace(fluxNS).Get(ctx, k.name, metav1.GetOptions{})
	if err != nil {
		return outcome{}, err
	}
	var o outcome
	o.Attempted, _, _ = unstructured.NestedString(u.Object, "status", "lastAttemptedRevision")
	o.Applied, _, _ = unstructured.NestedString(u.Object, "status", "lastAppliedRevision")
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Ready" {
			o.Status, _ = m["status"].(string)
			o.Reason, _ = m["reason"].(string)
			o.Message, _ = m["message"].(string)
		}
	}
	return o, nil
}

// wait waits until the Kustomization has settled on commit sha with Ready
// want ("True": sha applied; "False": sha attempted, and the message holds
// every part of parts) and returns the outcome and the time since since.
func (k *kustomization) wait(t *testing.T, sha, want string, since time.Time, timeout time.Duration, parts ...string) (outcome, time.Duration) {
	t.Helper()
	var last outcome
	err := framework.Poll(timeout, "Kustomization "+k.name+" Ready="+want+" at "+sha[:8], func() (bool, error) {
		o, err := k.read(context.Background())
		if err != nil {
			return false, err
		}
		last = o
		rev := o.Attempted
		if want == "True" {
			rev = o.Applied
		}
		return strings.HasSuffix(rev, sha) && o.Status == want && framework.ContainsAll(o.Message, parts), nil
	})
	if err != nil {
		t.Fatalf("%v; last: %v; want the message to hold %q\nkustomize-controller:\n%s", err, last, parts, k.f.kust.Tail(3000))
	}
	return last, time.Since(since)
}
