package main

import (
	"flag"
	"strings"
	"testing"
	"time"
)

// selfManagedArgs are the arguments the chart passes in
// certificates.mode=selfManaged.
var selfManagedArgs = []string{
	"--tls-cert-file=/tls/tls.crt", "--tls-private-key-file=/tls/tls.key",
	"--self-managed-certs=true", "--self-managed-cert-dir=/tls", "--self-managed-secret=sk-snapkeeper-webhook-tls",
	"--self-managed-namespace=snapkeeper", "--self-managed-webhook-configuration=sk-snapkeeper-webhook",
	"--self-managed-dns-names=sk-snapkeeper-webhook.snapkeeper.svc,sk-snapkeeper-webhook.snapkeeper",
	"--self-managed-ca-validity=26280h", "--self-managed-cert-validity=8760h",
}

func without(args []string, prefix string) []string {
	var out []string
	for _, a := range args {
		if !strings.HasPrefix(a, prefix) {
			out = append(out, a)
		}
	}
	return out
}

func TestOptions(t *testing.T) {
	tests := map[string]struct {
		args         []string
		podNamespace string
		wantErr      string
	}{
		"certificate flags are enough": {
			args: []string{"--tls-cert-file=/c/tls.crt", "--tls-private-key-file=/c/tls.key"},
		},
		"every flag of the issue is accepted": {
			args: []string{"--kubeconfig=/k", "--tls-cert-file=/c", "--tls-private-key-file=/k", "--port=8443",
				"--bind-address=127.0.0.1", "--strict-populators", "--allow-cross-namespace-data-source",
				"--kube-api-qps=50", "--kube-api-burst=100", "-v=4", "--logging-format=json"},
		},
		"missing certificate flags are refused": {
			args:    nil,
			wantErr: "--tls-cert-file and --tls-private-key-file are required",
		},
		"all problems are reported at once": {
			args:    []string{"--port=0", "--logging-format=xml", "--kube-api-qps=0", "--bind-address=host"},
			wantErr: "--port 0 is not a TCP port",
		},
		"a tiny body cap is refused": {
			args:    []string{"--tls-cert-file=/c", "--tls-private-key-file=/k", "--max-request-bytes=1000"},
			wantErr: "below 1 MiB",
		},
		"--version needs nothing else": {
			args: []string{"--version"},
		},
		"the chart's selfManaged arguments are accepted": {
			args: selfManagedArgs,
		},
		"selfManaged takes the namespace from $POD_NAMESPACE": {
			args:         without(selfManagedArgs, "--self-managed-namespace="),
			podNamespace: "from-the-pod",
		},
		"selfManaged without any namespace is refused": {
			args:    without(selfManagedArgs, "--self-managed-namespace="),
			wantErr: "--self-managed-namespace is required",
		},
		"selfManaged without a Secret is refused": {
			args:    without(selfManagedArgs, "--self-managed-secret="),
			wantErr: "--self-managed-secret is required",
		},
		"selfManaged without DNS names is refused": {
			args:    without(selfManagedArgs, "--self-managed-dns-names="),
			wantErr: "--self-managed-dns-names is required",
		},
		"selfManaged serving files outside its directory are refused": {
			args:    append(without(selfManagedArgs, "--tls-cert-file="), "--tls-cert-file=/elsewhere/tls.crt"),
			wantErr: "set --tls-cert-file=/tls/tls.crt and --tls-private-key-file=/tls/tls.key",
		},
		"selfManaged certificate outliving its CA is refused": {
			args:    append(selfManagedArgs, "--self-managed-cert-validity=30000h"),
			wantErr: "at most --self-managed-ca-validity",
		},
		"--self-managed-* flags are ignored while the mode is off": {
			args: []string{"--tls-cert-file=/c", "--tls-private-key-file=/k", "--self-managed-secret=s"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o := NewOptions()
			o.PodNamespace = tc.podNamespace
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			o.AddFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := o.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
			if name == "all problems are reported at once" && strings.Count(err.Error(), "\n") < 3 {
				t.Errorf("want every problem listed, got:\n%v", err)
			}
		})
	}
}

func TestSelfCertConfigFollowsTheFlags(t *testing.T) {
	parse := func(podNamespace string, args ...string) *Options {
		t.Helper()
		o := NewOptions()
		o.PodNamespace = podNamespace
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		o.AddFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		if err := o.Validate(); err != nil {
			t.Fatal(err)
		}
		return o
	}
	cfg := parse("from-the-pod", selfManagedArgs...).SelfCertConfig()
	if cfg.Namespace != "snapkeeper" || cfg.SecretName != "sk-snapkeeper-webhook-tls" || cfg.WebhookConfiguration != "sk-snapkeeper-webhook" ||
		cfg.CertDir != "/tls" || len(cfg.Hosts) != 2 || cfg.Hosts[0] != "sk-snapkeeper-webhook.snapkeeper.svc" ||
		cfg.CAValidity != 26280*time.Hour || cfg.CertValidity != 8760*time.Hour {
		t.Errorf("config %+v does not follow the flags", cfg)
	}
	if cfg := parse("from-the-pod", without(selfManagedArgs, "--self-managed-namespace=")...).SelfCertConfig(); cfg.Namespace != "from-the-pod" {
		t.Errorf("namespace %q, want $POD_NAMESPACE", cfg.Namespace)
	}
}
