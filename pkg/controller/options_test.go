package controller

import (
	"flag"
	"strings"
	"testing"

	"github.com/snapkeeper/snapkeeper/pkg/logging"
)

func parse(t *testing.T, env map[string]string, args ...string) (*Options, error) {
	t.Helper()
	o := NewOptions()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	o.AddFlags(fs)
	logging.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	o.Complete(func(k string) string { return env[k] })
	return o, o.Validate()
}

// The command lines that driver charts and the community deployment pass
// must start us unchanged: an unknown flag is a crashloop.
func TestCommunityCommandLinesAreAccepted(t *testing.T) {
	cases := map[string]struct {
		args       []string
		env        map[string]string
		components string
	}{
		"snapshot-controller": {args: []string{"--v=5", "--leader-election=true", "--leader-election-namespace=kube-system",
			"--kube-api-qps=100", "--kube-api-burst=200", "--worker-threads=100", "--retry-interval-start=1s",
			"--retry-interval-max=5m", "--resync-period=15m", "--http-endpoint=:8080", "--enable-distributed-snapshotting",
			"--prevent-volume-mode-conversion=true", "--retry-crd-interval-max=30s", "--feature-gates=CSIVolumeGroupSnapshot=true",
			"--logging-format=json", "--leader-election-lease-duration=15s", "--leader-election-renew-deadline=10s",
			"--leader-election-retry-period=5s", "--leader-election-labels=a=b", "--metrics-path=/metrics"},
			components: "binder"},
		"csi-snapshotter sidecar": {args: []string{"--csi-address=unix:///csi/csi.sock", "--v=2", "--timeout=150s",
			"--extra-create-metadata", "--snapshot-name-prefix=snap", "--snapshot-name-uuid-length=10",
			"--groupsnapshot-name-prefix=gs", "--groupsnapshot-name-uuid-length=10", "--leader-election",
			"--metrics-address=:9809", "--worker-threads=10"},
			components: "csi"},
		"per-node sidecar": {args: []string{"--csi-address=/csi/csi.sock", "--node-deployment"},
			env: map[string]string{"NODE_NAME": "node-1"}, components: "csi"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o, err := parse(t, tc.env, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if o.Components != tc.components {
				t.Errorf("components = %q, want %q", o.Components, tc.components)
			}
			if strings.HasPrefix(o.CSIAddress, "unix://") {
				t.Errorf("csi address keeps its scheme: %q", o.CSIAddress)
			}
		})
	}
}

func TestInvalidOptionsAreAllReported(t *testing.T) {
	_, err := parse(t, nil, "--components=csi,bogus", "--worker-threads=0", "--logging-format=xml", "--node-deployment")
	if err == nil {
		t.Fatal("want an error")
	}
	for _, want := range []string{"unknown component \"bogus\"", "--csi-address is required", "--worker-threads", "--logging-format", "NODE_NAME"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestLeaseNames(t *testing.T) {
	if got := CSILeaseName("ebs.csi.aws.com"); got != "external-snapshotter-leader-ebs-csi-aws-com" {
		t.Errorf("CSILeaseName = %q", got)
	}
}
