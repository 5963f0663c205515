//go:build tools

// Package tools pins the real csi-provisioner that the cluster-like control
// plane (test/framework, `make run`) runs next to the mock CSI driver:
// external-provisioner v6.4.0's cmd/csi-provisioner, built by
// `make bin/csi-provisioner`.
//
// Alignment: v6.4.0 asks for k8s.io modules at v0.36.1-v0.37.0 and, for its
// own e2e tests only, k8s.io/kubernetes v1.36.3, whose go.mod names every
// staging module at v0.0.0. Every k8s.io staging module is replaced by its
// published v0.37.2 (the version of the product and of the local
// kube-apiserver), as in hack/tools/kube. A module of its own, so that its
// newer gRPC and csi-lib-utils change neither the community snapshotter
// pair (hack/tools/peers) nor the mock driver (hack/tools/kube).
package tools

import (
	_ "github.com/kubernetes-csi/external-provisioner/v6/cmd/csi-provisioner"
)
