//go:build tools

// Package tools pins the community snapshot controllers that the benchmark
// (test/bench) runs next to ours: external-snapshotter v8.6.0's
// snapshot-controller and csi-snapshotter, built by
// `make bin/snapshot-controller bin/csi-snapshotter`.
//
// Alignment: v8.6.0's go.mod asks for every k8s.io module at v0.36.1 and
// for client/v8 v8.4.0 (its replace of client/v8 by ./client does not apply
// to a dependent module). client/v8 v8.4.0 lacks the groupsnapshot v1 API
// that v8.6.0 imports, so client/v8 is v8.7.0 (the product's); every k8s.io
// module (api, apimachinery, client-go, apiserver, component-base,
// component-helpers, streaming) is raised to v0.37.2, the version of the
// product and of the local kube-apiserver. It compiles unchanged: no replace
// and no older pin is needed.
package tools

import (
	_ "github.com/kubernetes-csi/external-snapshotter/v8/cmd/csi-snapshotter"
	_ "github.com/kubernetes-csi/external-snapshotter/v8/cmd/snapshot-controller"
)
