package main

import (
	"flag"
	"strings"
	"testing"
)

func TestOptions(t *testing.T) {
	tests := map[string]struct {
		args    []string
		wantErr string
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
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o := NewOptions()
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
