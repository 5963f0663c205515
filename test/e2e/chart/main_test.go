// Package chart tests the Helm chart (docs/chart.md): rendering in every
// certificate mode, and installs, upgrades and uninstalls on the real test
// API server, with the chart's ServiceAccounts checked by the API server's
// own RBAC.
package chart

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	manifests "github.com/snapkeeper/snapkeeper/pkg/manifest"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

// The Kubernetes versions the tests render for: below and above the 1.30
// floor of webhook matchConditions.
const (
	kubeOld = "1.29.0"
	kubeNew = "1.31.0"
)

// rendered is a rendered manifest split into documents.
type rendered struct {
	raw  [][]byte
	objs []*unstructured.Unstructured
}

func parseManifest(t *testing.T, b []byte) *rendered {
	t.Helper()
	r := &rendered{}
	docs, err := manifests.SplitDocuments(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range docs {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &obj.Object); err != nil {
			t.Fatalf("rendered YAML does not parse: %v\n%s", err, doc)
		}
		if len(obj.Object) == 0 {
			continue
		}
		r.raw = append(r.raw, doc)
		r.objs = append(r.objs, obj)
	}
	return r
}

// kinds counts the objects of each kind that an install creates: the
// `helm test` hooks (templates/tests/) are left out.
func (r *rendered) kinds() map[string]int {
	out := map[string]int{}
	for _, o := range r.objs {
		if o.GetAnnotations()["helm.sh/hook"] != "test" {
			out[o.GetKind()]++
		}
	}
	return out
}

// get returns the object of kind and name, failing the test when absent.
func (r *rendered) get(t *testing.T, kind, name string) *unstructured.Unstructured {
	t.Helper()
	if o := r.find(kind, name); o != nil {
		return o
	}
	t.Fatalf("no %s %q rendered", kind, name)
	return nil
}

func (r *rendered) find(kind, name string) *unstructured.Unstructured {
	for _, o := range r.objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

// into decodes the object of kind and name strictly into a typed value, so
// a misspelt field fails the test.
func (r *rendered) into(t *testing.T, kind, name string, out any) {
	t.Helper()
	for i, o := range r.objs {
		if o.GetKind() == kind && o.GetName() == name {
			if err := yaml.UnmarshalStrict(r.raw[i], out); err != nil {
				t.Fatalf("%s %s: %v", kind, name, err)
			}
			return
		}
	}
	t.Fatalf("no %s %q rendered", kind, name)
}

// helmKubeconfig is the kubeconfig Helm uses for the shared API server.
// `make tools` stamps kube-apiserver with its release version (v1.37.2), so
// Helm reads the real version and the admin kubeconfig is enough. A
// kube-apiserver built before that stamp reports v0.0.0, which Helm's
// kubeVersion check and the chart's capability checks would read as older
// than any real cluster: Helm then talks to it through versionProxy as
// kubeNew.
func helmKubeconfig(t *testing.T, env *framework.Env) string {
	t.Helper()
	info, err := env.Kube.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v, err := utilversion.ParseGeneric(info.GitVersion); err == nil && v.AtLeast(utilversion.MajorMinor(1, 30)) {
		return env.Kubeconfig
	}
	t.Logf("kube-apiserver reports %s (built without the version stamp, see the Makefile): Helm sees it as %s through a proxy", info.GitVersion, kubeNew)
	return versionProxy(t, env, kubeNew)
}

// versionProxy stands in front of the test API server and answers /version
// with gitVersion; everything else passes through (see helmKubeconfig).
func versionProxy(t *testing.T, env *framework.Env, gitVersion string) string {
	t.Helper()
	target, err := url.Parse(env.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := &httputil.ReverseProxy{
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // loopback test server
		FlushInterval: -1,
		// client-go sends no bearer token over plain HTTP: the proxy adds
		// the admin's.
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Header.Set("Authorization", "Bearer "+framework.AdminToken)
		},
	}
	v := strings.Split(strings.TrimPrefix(gitVersion, "v"), ".")
	info := version.Info{Major: v[0], Minor: v[1], GitVersion: "v" + strings.TrimPrefix(gitVersion, "v"), Platform: "linux/amd64"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/version" {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(info)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["proxy"] = &clientcmdapi.Cluster{Server: srv.URL}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "admin"}
	cfg.CurrentContext = "proxy"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// clusterHelm is a helm CLI bound to the shared API server (1.30 or newer
// as Helm sees it).
func clusterHelm(t *testing.T) (*framework.Env, *framework.Helm) {
	t.Helper()
	env := framework.Shared(t)
	return env, framework.NewHelm(t, helmKubeconfig(t, env))
}

var (
	certManagerOnce sync.Once
	certManagerErr  error
)

// installCertManagerCRDs installs cert-manager's own CRDs on the shared
// API server once.
func installCertManagerCRDs(t *testing.T, env *framework.Env) {
	t.Helper()
	certManagerOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		certManagerErr = framework.InstallCertManagerCRDs(ctx, env.Dynamic)
	})
	if certManagerErr != nil {
		t.Fatal(certManagerErr)
	}
}

// uninstallOnCleanup removes the release when the test ends: a leftover
// webhook configuration whose Service has no endpoints would make the API
// server reject snapshot objects of later tests.
func uninstallOnCleanup(t *testing.T, h *framework.Helm, release, ns string) {
	t.Cleanup(func() {
		if _, err := h.Run(context.Background(), "uninstall", release, "--namespace", ns, "--ignore-not-found"); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
}
