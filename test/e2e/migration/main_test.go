// Package migration checks the switch between the community snapshot
// controllers (external-snapshotter at framework.CommunityVersion: snapshot-controller and the
// csi-snapshotter sidecar) and ours, in both directions, on a real
// kube-apiserver and etcd with the mock CSI driver: snapshots that are ready
// at the switch cost no API write and no CSI call, snapshots in flight at the
// switch finish without being cut twice, and deletions afterwards leave
// nothing behind on the backend. docs/migration.md describes the procedure
// and holds the figures.
//
// Sizes: SNAPKEEPER_MIGRATION_FULL=1 runs 500 ready and 20 in-flight
// snapshots per direction; the default is 40 and 5. SNAPKEEPER_MIGRATION_N
// and SNAPKEEPER_MIGRATION_M override either. SNAPKEEPER_MIGRATION_REPORT
// names a file the figures are appended to as Markdown.
package migration

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

// config is the size and timing of a run.
type config struct {
	N, M int
	// Hang is how long the mock holds each CreateSnapshot of the new pair
	// (after cutting the snapshot): longer than its start and the quiet
	// window. The old pair's calls are held until it exits.
	Hang time.Duration
	// Window is how long the new pair runs, once ready, while the in-flight
	// snapshots are held: every API write in it is a write for nothing.
	Window time.Duration
	// Quiet is how long the API server's write counters must stand still
	// before a phase counts as settled.
	Quiet time.Duration
}

func loadConfig(t *testing.T) config {
	c := config{N: 40, M: 5, Hang: 8 * time.Second, Window: 4 * time.Second, Quiet: 2 * time.Second}
	if os.Getenv("SNAPKEEPER_MIGRATION_FULL") == "1" {
		c.N, c.M = 500, 20
	}
	for env, p := range map[string]*int{"SNAPKEEPER_MIGRATION_N": &c.N, "SNAPKEEPER_MIGRATION_M": &c.M} {
		if v := os.Getenv(env); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				t.Fatalf("%s=%q: want a number >= 0", env, v)
			}
			*p = n
		}
	}
	if c.N < 4 || c.M < 2 {
		t.Fatalf("need N >= 4 and M >= 2 (got N=%d, M=%d)", c.N, c.M)
	}
	return c
}
