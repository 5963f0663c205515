//go:build tools

// Package tools pins controller-gen, which generates the CRDs from the
// client/v8 API types.
package tools

import (
	_ "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
)
