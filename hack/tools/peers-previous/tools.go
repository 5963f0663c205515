//go:build tools

// Package tools pins the community release before the one in
// hack/tools/peers (this go.mod is the one place that names it):
// snapshot-controller and csi-snapshotter v8.6.0, whose volume group
// snapshot gate (CSIVolumeGroupSnapshot) is still beta and off by default.
// Clusters that move to snapkeeper may run it. `make test-migration-previous`
// builds them as bin/snapshot-controller-v8.6.0 and
// bin/csi-snapshotter-v8.6.0 and runs test/e2e/migration against them
// (docs/migration.md). Not part of `make test`, and not checked by
// hack/alignmods.
//
// Alignment: this is hack/tools/peers/go.mod as it was when it built
// v8.6.0. v8.6.0 asks for every k8s.io module at v0.36.1 and for client/v8
// v8.4.0, which lacks the groupsnapshot v1 API v8.6.0 imports; client/v8 is
// v8.7.0 and the k8s.io modules v0.37.2. It compiles unchanged: no replace.
package tools

import (
	_ "github.com/kubernetes-csi/external-snapshotter/v8/cmd/csi-snapshotter"
	_ "github.com/kubernetes-csi/external-snapshotter/v8/cmd/snapshot-controller"
)
