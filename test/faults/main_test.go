// Package faults is the fault-injection suite (docs/faults.md): the real
// controller binary on a real kube-apiserver next to the mock CSI driver,
// with the controller SIGKILLed at random moments, driver calls failing,
// hanging past the call timeout or losing their replies, the driver
// restarting, a rate-limited controller facing a burst of deletes, the API
// server restarted, the leader of two replicas killed, and the webhook
// down; hostile input for the controller (absurd names and values, objects
// stored before the CRD rules, secret templates, a planted secret that must
// appear nowhere) and for the webhook (slow, idle, oversized and malformed
// clients, a GitOps re-sync of 200 objects). The TestProd* scenarios
// (prod_*_test.go) run on a production-shaped plane of their own: three
// etcd members, two API servers, each replica behind fault proxies. The
// workload scenarios end with the same invariants (invariants_test.go).
//
// Each scenario draws every random choice from a math/rand/v2 generator
// seeded by SNAPKEEPER_FAULT_SEED (or -fault-seed), time-based by default,
// and logs the seed first so that a failure can be replayed. The short
// sizes run in plain `go test ./test/...`; SNAPKEEPER_FAULTS=full (make
// test-faults) selects the full sizes.
package faults

import (
	"flag"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

// Environment variables of the suite.
const (
	// EnvSeed replays a run: every scenario seeds its generator from it.
	EnvSeed = "SNAPKEEPER_FAULT_SEED"
	// EnvSize=full selects the full sizes (make test-faults).
	EnvSize = "SNAPKEEPER_FAULTS"
)

var seedFlag = flag.Uint64("fault-seed", 0, "seed of every scenario's random choices (default: $"+EnvSeed+", else time-based)")

// sizes are the workload sizes of one run.
type sizes struct {
	// KillN creates and deletes, and at least Kills SIGKILLs, in each
	// variant of the kill scenario.
	KillN, Kills int
	// DriverN creates and deletes in the driver-fault scenario.
	DriverN int
	// BurstM snapshots deleted at once in the rate-limited scenario.
	BurstM int
	full   bool
}

func runSizes() sizes {
	if os.Getenv(EnvSize) == "full" {
		return sizes{KillN: 300, Kills: 10, DriverN: 300, BurstM: 500, full: true}
	}
	return sizes{KillN: 30, Kills: 3, DriverN: 40, BurstM: 25}
}

// shortOrFull is short in a short run and full in a full one: the size of
// a scenario that only that scenario uses, next to where it is used.
func shortOrFull[V any](short, full V) V {
	if runSizes().full {
		return full
	}
	return short
}

// settleTimeout bounds how long the invariants may take to hold once a
// scenario's faults end; a full run leaves more to settle.
func settleTimeout() time.Duration { return shortOrFull(2*time.Minute, 5*time.Minute) }

// baseSeed is the run's seed: the flag, else the environment, else the
// clock.
func baseSeed(t *testing.T) uint64 {
	t.Helper()
	if *seedFlag != 0 {
		return *seedFlag
	}
	if s := os.Getenv(EnvSeed); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", EnvSeed, s, err)
		}
		return v
	}
	return clockSeed()
}

// clockSeed is the run's time-based seed, the same for every scenario.
var clockSeed = sync.OnceValue(func() uint64 { return uint64(time.Now().UnixNano()) })

// newRand returns the scenario's generator, seeded by the run's seed and
// the test's name (so each scenario replays on its own), and logs how to
// replay it.
func newRand(t *testing.T) *rand.Rand {
	t.Helper()
	seed := baseSeed(t)
	h := fnv.New64a()
	h.Write([]byte(t.Name()))
	mode := shortOrFull("short", "full")
	t.Logf("seed %d (%s sizes); replay: %s=%d %s=%s SNAPKEEPER_REQUIRE_MOCK_CSI=1 go test -count=1 -v -run '%s' ./test/faults",
		seed, mode, EnvSeed, seed, EnvSize, mode, runPattern(t.Name()))
	return rand.New(rand.NewPCG(seed, h.Sum64()))
}

// runPattern is the -run pattern of exactly the test named name.
func runPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + p + "$"
	}
	return strings.Join(parts, "/")
}
