package main

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// The kubelet's plugin watcher finds the socket, asks GetInfo and reports
// the outcome; stopping removes the socket, which deregisters the driver.
func TestRegistrationAnswersTheKubeletsPluginWatcher(t *testing.T) {
	dir := t.TempDir()
	const endpoint = "/var/lib/kubelet/plugins/mock.csi.test/csi.sock"
	serveErr := make(chan error, 1)
	stop, err := serveRegistration(dir, "mock.csi.test", endpoint, serveErr)
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "mock.csi.test-reg.sock")
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := registerapi.NewRegistrationClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	info, err := client.GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil {
		t.Fatalf("GetInfo: %v", err)
	}
	if info.GetType() != registerapi.CSIPlugin || info.GetName() != "mock.csi.test" || info.GetEndpoint() != endpoint ||
		!slices.Equal(info.GetSupportedVersions(), []string{"1.0.0"}) {
		t.Errorf("GetInfo = %v", info)
	}
	for _, st := range []*registerapi.RegistrationStatus{{PluginRegistered: true}, {PluginRegistered: false, Error: "refused"}} {
		if _, err := client.NotifyRegistrationStatus(ctx, st); err != nil {
			t.Errorf("NotifyRegistrationStatus(%v): %v", st, err)
		}
	}

	stop()
	if _, err := os.Stat(sock); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("registration socket after stop: %v, want it removed", err)
	}
	select {
	case err := <-serveErr:
		t.Errorf("serving failed: %v", err)
	default:
	}
}

func TestValidateNodeOptions(t *testing.T) {
	tests := map[string]struct {
		o       Options
		wantErr bool
	}{
		"nothing set is fine":                                      {},
		"registration with both paths is fine":                     {o: Options{KubeletRegistrationPath: "/var/lib/kubelet/plugins/d/csi.sock", PluginRegistrationDir: "/registration"}},
		"a registration dir without the kubelet's path is refused": {o: Options{PluginRegistrationDir: "/registration"}, wantErr: true},
		"the kubelet's path without a registration dir is refused": {o: Options{KubeletRegistrationPath: "/var/lib/kubelet/plugins/d/csi.sock"}, wantErr: true},
		"a relative kubelet path is refused":                       {o: Options{KubeletRegistrationPath: "csi.sock", PluginRegistrationDir: "/registration"}, wantErr: true},
		"a relative data dir is made absolute":                     {o: Options{DataDir: "data"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := tc.o.validateNodeOptions()
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if tc.o.DataDir != "" && !filepath.IsAbs(tc.o.DataDir) {
				t.Errorf("data dir %q is not absolute", tc.o.DataDir)
			}
		})
	}
}
