//go:build deps

// Package deps keeps product dependencies in go.mod until code imports them.
package deps

import (
	_ "github.com/container-storage-interface/spec/lib/go/csi"
	_ "github.com/gorilla/mux"
	_ "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	_ "github.com/kubernetes-csi/external-snapshotter/client/v8/informers/externalversions"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "google.golang.org/grpc"
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/klog/v2"
)
