// Package gitops drives snapkeeper the way a GitOps pipeline does: Flux's
// source-controller fetches a git repository from a server on loopback and
// its kustomize-controller applies it (a server-side dry-run of each stage,
// then a server-side apply with its own field manager, pruning what left
// the repository) against the cluster-like plane, with our binder, CSI side
// and webhook. The tests read what a team reads: the Kustomization's Ready
// condition. It needs `make test-gitops` (SNAPKEEPER_GITOPS=1 and Flux's
// build); elsewhere it skips. docs/gitops.md.
package gitops

import (
	"fmt"
	"os"
	"testing"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// gitopsEnv turns the suite on (`make test-gitops` sets it).
const gitopsEnv = "SNAPKEEPER_GITOPS"

func TestMain(m *testing.M) {
	if os.Getenv(gitopsEnv) == "" {
		fmt.Println("test/e2e/gitops: skipped: it needs Flux's build; run `make test-gitops`")
		os.Exit(0)
	}
	framework.MainWith(m, framework.ControlPlaneOptions{Cluster: true})
}
