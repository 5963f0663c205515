package main

// Without node-driver-registrar, the driver registers itself with the
// kubelet: the kubelet's plugin watcher sees a socket appear in its
// plugins_registry directory, calls GetInfo on it to learn the driver's
// name and CSI endpoint, registers the driver (NodeGetInfo on the
// endpoint, the CSINode object) and reports the outcome through
// NotifyRegistrationStatus. Removing the socket deregisters the driver.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"google.golang.org/grpc"
	"k8s.io/klog/v2"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// csiSpecVersions are the CSI versions GetInfo offers the kubelet.
var csiSpecVersions = []string{"1.0.0"}

// registrationServer answers the kubelet's plugin watcher.
type registrationServer struct {
	registerapi.UnimplementedRegistrationServer
	driverName string
	// endpoint is the CSI socket as the kubelet sees it: a host path,
	// not the path in the driver's container.
	endpoint string
}

func (r *registrationServer) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{
		Type:              registerapi.CSIPlugin,
		Name:              r.driverName,
		Endpoint:          r.endpoint,
		SupportedVersions: csiSpecVersions,
	}, nil
}

func (r *registrationServer) NotifyRegistrationStatus(_ context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	if s.GetPluginRegistered() {
		klog.InfoS("Kubelet registered the driver", "driver", r.driverName, "endpoint", r.endpoint)
	} else {
		klog.ErrorS(errors.New(s.GetError()), "Kubelet refused to register the driver", "driver", r.driverName, "endpoint", r.endpoint)
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}

// registrationSocket is where the kubelet's plugin watcher looks for the
// driver: <dir>/<driver name>-reg.sock, as node-driver-registrar names it.
func registrationSocket(dir, driverName string) string {
	return filepath.Join(dir, driverName+"-reg.sock")
}

// serveRegistration serves the registration API on dir/<driver>-reg.sock
// until stop is called, which removes the socket (the kubelet then
// deregisters the driver). A failure while serving goes to serveErr.
func serveRegistration(dir, driverName, endpoint string, serveErr chan<- error) (stop func(), err error) {
	path := registrationSocket(dir, driverName)
	lis, err := listenUnix(path)
	if err != nil {
		return nil, fmt.Errorf("registration socket: %w", err)
	}
	srv := grpc.NewServer()
	registerapi.RegisterRegistrationServer(srv, &registrationServer{driverName: driverName, endpoint: endpoint})
	go func() {
		if err := srv.Serve(lis); err != nil {
			serveErr <- fmt.Errorf("serving the registration socket %s: %w", path, err)
		}
	}()
	klog.InfoS("Serving the kubelet plugin registration API", "socket", path, "endpoint", endpoint)
	return func() {
		srv.Stop()
		// Closing the listener normally unlinks the socket already.
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			klog.ErrorS(err, "Removing the registration socket", "socket", path)
		}
	}, nil
}
