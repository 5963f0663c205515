//go:build tools

// Package tools pins the community snapshot controllers that every suite
// runs next to ours (conformance, drop-in, cluster, migration, Velero, the
// node plane, the benchmark): snapshot-controller and csi-snapshotter of
// the external-snapshotter release this go.mod requires, built by
// `make bin/snapshot-controller bin/csi-snapshotter`. This go.mod is the one
// place that names the version (the Makefile's COMMUNITY_VERSION and
// test/framework.CommunityVersion read it; docs/testing.md, "When the
// community releases").
//
// Alignment: the release asks for k8s.io modules at v0.37.0 and client/v8
// v8.6.0; client/v8 is v8.7.0 (the product's) and every dependency shared
// with the product and kube-apiserver is on the versions hack/alignmods
// chose. It compiles unchanged: no replace and no older pin is needed.
package tools

import (
	_ "github.com/kubernetes-csi/external-snapshotter/v8/cmd/csi-snapshotter"
	_ "github.com/kubernetes-csi/external-snapshotter/v8/cmd/snapshot-controller"
)
