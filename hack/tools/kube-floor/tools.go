//go:build tools

// Package tools pins the oldest kube-apiserver snapkeeper is tested against
// (docs/kubernetes-versions.md). Only kube-apiserver is built from here; etcd
// and kubectl come from hack/tools/kube.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
