package kubeclient

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const kubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://from-the-kubeconfig:6443"}
users:
- name: u
  user: {token: t}
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
`

func parse(t *testing.T, o *Options, master bool, args ...string) {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	o.AddFlags(fs, "per component")
	if master {
		o.AddMasterFlag(fs)
	}
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
}

func TestDefaultsAreEachBinarys(t *testing.T) {
	o := &Options{QPS: 20, Burst: 40}
	parse(t, o, false)
	if o.QPS != 20 || o.Burst != 40 || o.Kubeconfig != "" {
		t.Errorf("defaults changed: %+v", o)
	}
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	o.AddFlags(fs, "")
	if fs.Lookup("master") != nil {
		t.Error("--master is registered without AddMasterFlag")
	}
	if u := fs.Lookup("kube-api-qps").Usage; strings.Contains(u, ",") || !strings.HasSuffix(u, ".") {
		t.Errorf("usage %q", u)
	}
}

func TestRESTConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	o := &Options{QPS: 1, Burst: 1}
	parse(t, o, true, "--kubeconfig="+path, "--kube-api-qps=50", "--kube-api-burst=100")
	cfg, err := o.RESTConfig("agent/1")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://from-the-kubeconfig:6443" || cfg.QPS != 50 || cfg.Burst != 100 || cfg.UserAgent != "agent/1" {
		t.Errorf("config: host %q, QPS %v, burst %d, user agent %q", cfg.Host, cfg.QPS, cfg.Burst, cfg.UserAgent)
	}
	parse(t, o, true, "--kubeconfig="+path, "--master=https://10.0.0.1:443")
	if cfg, err := o.RESTConfig("agent/1"); err != nil || cfg.Host != "https://10.0.0.1:443" {
		t.Errorf("--master does not override the kubeconfig: %v, %v", cfg, err)
	}
}

func TestInClusterWithoutFlags(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	o := &Options{QPS: 1, Burst: 1}
	if _, err := o.RESTConfig("agent/1"); err == nil || !strings.Contains(err.Error(), "in-cluster") {
		t.Errorf("error %v, want the in-cluster configuration's", err)
	}
}

func TestValidate(t *testing.T) {
	for _, o := range []Options{{QPS: 0, Burst: 1}, {QPS: 1, Burst: 0}, {QPS: -1, Burst: -1}} {
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--kube-api-qps and --kube-api-burst must be positive") {
			t.Errorf("%+v: %v", o, err)
		}
	}
	if err := (&Options{QPS: 0.5, Burst: 1}).Validate(); err != nil {
		t.Error(err)
	}
}
