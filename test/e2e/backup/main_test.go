// Package backup drives snapkeeper with the client that drives the snapshot
// API most in production: Velero (v1.18, CSI snapshots without data
// movement, its AWS object-store plugin against an S3 server on loopback).
// Velero's server runs as a process against the cluster-like plane
// (kube-controller-manager and the real csi-provisioner next to the mock
// driver, which keeps data per volume so a restore is compared byte for
// byte), with our binder, CSI side and webhook, or with the community
// pair. It needs `make test-backup` (SNAPKEEPER_BACKUP=1 and Velero's
// build); elsewhere it skips. docs/backup.md.
package backup

import (
	"fmt"
	"os"
	"testing"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// backupEnv turns the suite on (`make test-backup` sets it).
const backupEnv = "SNAPKEEPER_BACKUP"

func TestMain(m *testing.M) {
	if os.Getenv(backupEnv) == "" {
		fmt.Println("test/e2e/backup: skipped: it needs Velero's build; run `make test-backup`")
		os.Exit(0)
	}
	framework.MainWith(m, framework.ControlPlaneOptions{Cluster: true})
}
