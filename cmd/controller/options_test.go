package main

import (
	"flag"
	"io/fs"
	"maps"
	"os"
	"strings"
	"testing"
)

func parse(t *testing.T, env map[string]string, args ...string) (*Options, error) {
	t.Helper()
	noDefaultSocket(t)
	o := NewOptions()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	o.Complete(fs, func(k string) string { return env[k] })
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
			"--leader-election-retry-period=5s", "--leader-election-labels=a=b", "--metrics-path=/metrics",
			"--automaxprocs", "--vmodule=foo=3", "--log-flush-frequency=5s", "--log-json-split-stream=true",
			"--log-json-info-buffer-size=0", "--log-text-split-stream=false", "--log-text-info-buffer-size=64Ki"},
			components: "binder"},
		"csi-snapshotter sidecar": {args: []string{"--csi-address=unix:///csi/csi.sock", "--v=2", "--timeout=150s",
			"--extra-create-metadata", "--snapshot-name-prefix=snap", "--snapshot-name-uuid-length=10",
			"--groupsnapshot-name-prefix=gs", "--groupsnapshot-name-uuid-length=10", "--leader-election",
			"--metrics-address=:9809", "--worker-threads=10", "--leader-election-labels=app:snap,tier:storage",
			"--master=https://10.0.0.1:443", "--automaxprocs=true"},
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
	for _, want := range []string{"unknown component \"bogus\"", "--worker-threads", "--logging-format", "NODE_NAME"} {
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

// noDefaultSocket makes the default CSI socket and its directory absent,
// whatever this machine has at /run/csi.
func noDefaultSocket(t *testing.T) {
	t.Helper()
	statPath = func(string) (fs.FileInfo, error) { return nil, os.ErrNotExist }
	t.Cleanup(func() { statPath = os.Stat })
}

// A csi-snapshotter command line without --csi-address relies on the
// sidecar's default socket: swapping its image for ours must give the CSI
// side on that socket, never a second binder.
func TestComponentsFollowTheCommandLine(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]struct {
		args         []string
		exists       string // "", "dir" or "socket": what is at /run/csi
		components   string
		address      string
		reasonPrefix string
	}{
		"snapshot-controller flags":     {args: []string{"--leader-election", "--worker-threads=10"}, components: "binder", address: ""},
		"--csi-address":                 {args: []string{"--csi-address=/csi/csi.sock"}, components: "csi", address: "/csi/csi.sock", reasonPrefix: "--csi-address"},
		"--timeout":                     {args: []string{"--timeout=2m", "--leader-election"}, components: "csi", address: DefaultCSIAddress, reasonPrefix: "--timeout"},
		"--snapshot-name-prefix":        {args: []string{"--snapshot-name-prefix=snap"}, components: "csi", address: DefaultCSIAddress},
		"--snapshot-name-uuid-length":   {args: []string{"--snapshot-name-uuid-length=8"}, components: "csi", address: DefaultCSIAddress},
		"--extra-create-metadata":       {args: []string{"--extra-create-metadata"}, components: "csi", address: DefaultCSIAddress},
		"--groupsnapshot-name-prefix":   {args: []string{"--groupsnapshot-name-prefix=g"}, components: "csi", address: DefaultCSIAddress},
		"--node-deployment":             {args: []string{"--node-deployment"}, components: "csi", address: DefaultCSIAddress},
		"only shared flags, socket dir": {args: []string{"--v=5", "--leader-election"}, exists: "dir", components: "csi", address: DefaultCSIAddress, reasonPrefix: "/run/csi exists"},
		"only shared flags, socket":     {args: []string{"--v=5"}, exists: "socket", components: "csi", address: DefaultCSIAddress, reasonPrefix: "/run/csi/socket exists"},
		"explicit binder wins":          {args: []string{"--components=binder", "--timeout=2m"}, exists: "dir", components: "binder", address: "", reasonPrefix: "--components"},
		"explicit csi, default socket":  {args: []string{"--components=csi"}, components: "csi", address: DefaultCSIAddress},
		"explicit both":                 {args: []string{"--components=binder,csi", "--csi-address=unix:///x.sock"}, components: "binder,csi", address: "/x.sock"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := NewOptions()
			fset := flag.NewFlagSet("test", flag.ContinueOnError)
			o.AddFlags(fset)
			if err := fset.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			statPath = func(p string) (fs.FileInfo, error) {
				switch {
				case tc.exists == "socket" && p == DefaultCSIAddress, tc.exists != "" && p == "/run/csi":
					return os.Stat(dir) // a directory stands in for both
				}
				return nil, os.ErrNotExist
			}
			t.Cleanup(func() { statPath = os.Stat })
			o.Complete(fset, func(string) string { return "node-1" })
			if err := o.Validate(); err != nil {
				t.Fatal(err)
			}
			if o.Components != tc.components || o.CSIAddress != tc.address {
				t.Errorf("components %q at %q, want %q at %q (%s)", o.Components, o.CSIAddress, tc.components, tc.address, o.ComponentsReason)
			}
			if !strings.HasPrefix(o.ComponentsReason, tc.reasonPrefix) {
				t.Errorf("reason %q, want it to start with %q", o.ComponentsReason, tc.reasonPrefix)
			}
		})
	}
}

func TestLeaderElectionLabels(t *testing.T) {
	o, err := parse(t, nil, "--leader-election-labels=a=1, b:2", "--leader-election-labels=example.com/c:3")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := o.LeaderElectionLabels.Map(), map[string]string{"a": "1", "b": "2", "example.com/c": "3"}; !maps.Equal(got, want) {
		t.Errorf("labels = %v, want %v", got, want)
	}
	if _, err := parse(t, nil, "--leader-election-labels=novalue"); err == nil || !strings.Contains(err.Error(), "key=value or key:value") {
		t.Errorf("a label without value: %v", err)
	}
	if _, err := parse(t, nil, "--leader-election-labels=bad key:v"); err == nil || !strings.Contains(err.Error(), "--leader-election-labels") {
		t.Errorf("an invalid label key: %v", err)
	}
}

func TestAutomaxprocsTakesAnOptionalValue(t *testing.T) {
	for args, want := range map[string]bool{"--automaxprocs": true, "--automaxprocs=": true, "--automaxprocs=false": false, "": false} {
		var list []string
		if args != "" {
			list = []string{args}
		}
		o, err := parse(t, nil, list...)
		if err != nil {
			t.Fatalf("%s: %v", args, err)
		}
		if bool(o.Automaxprocs) != want {
			t.Errorf("%s: automaxprocs = %v", args, o.Automaxprocs)
		}
	}
	if _, err := parse(t, nil, "--automaxprocs=maybe"); err == nil {
		t.Error("--automaxprocs=maybe was accepted")
	}
}
