// Command bench runs snapkeeper and the community snapshot controllers
// (external-snapshotter at framework.CommunityVersion) through the same scenario on a real local
// control plane with the mock CSI driver, and writes the side-by-side figures
// to docs/benchmarks.md:
//
//	make tools bin/snapshot-controller bin/csi-snapshotter
//	go run ./test/bench -n 500 -out docs/benchmarks.md
//
// Each run of a system gets a fresh etcd + kube-apiserver, production-like
// (etcd syncs its writes, default APF and inflight limits; every controller
// and the webhook as its own ServiceAccount under the RBAC it ships with,
// test/bench/identities.go): its raw write ceiling (ConfigMap
// create+patch), then N snapshots of N bound PVCs created at once, waited
// for, deleted and waited for again, -repeats times per system,
// interleaved. The report records the commit and refuses a dirty tree
// without -allow-dirty; its analysis is generated. A steady-state run
// restarts each system over M ready snapshots, a group scenario creates and
// deletes G volume group snapshots of K claims each (test/bench/groups.go),
// and the admission webhook's latency is measured directly and through the
// API server (sent by ServiceAccounts, under APF). Then the scale runs repeat
// the scenario at several N (-scale; above -scale-dynamic-max the snapshots
// are seeded ready, test/bench/scale.go), and a cold start seeds M ready
// snapshots and starts each system over them (-cold-start-m,
// test/bench/steady.go). The schedule stage runs one hourly SnapshotSchedule
// over -schedule-claims claims (its runs and its retention) next to the same
// creates and deletes sent to the community pair, and a schedule's run over
// -schedule-seeded seeded scheduled snapshots (test/bench/schedules.go,
// schedules_seeded.go). The command exits
// non-zero when a snapshot does not become ready in time, a backend snapshot
// is left behind, or a run fails.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

type options struct {
	n                 int
	systems           string
	skipCommunity     bool
	communityDefaultN int
	createConc        int
	ceilingOps        int
	ceilingConc       int
	quiet             time.Duration
	steadyM           int
	steadyIdle        time.Duration
	steadySystems     string
	admission         bool
	admissionRequests int
	admissionAPIReqs  int
	groups            int
	groupSize         int
	groupSystems      string
	out               string
	keep              bool
	oursArgs          string
	repeats           int
	unsafeNoFsync     bool
	allowDirty        bool
	adminControllers  bool
	csiLatency        bool
	csiReadyAfter     string
	waiting           string
	waitingSystems    string
	waitingN          int
	scale             string
	scaleSystems      string
	scaleDynamicMax   int
	scaleRepeats      int
	coldStartM        int
	coldStartSystems  string
	seedConc          int
	single            int
	singleSystems     string
	scheduleClaims    int
	scheduleSystems   string
	scheduleSeeded    int
}

// planeOptions is the control plane every run starts: production-like
// unless -unsafe-no-fsync.
var planeOptions = framework.ControlPlaneOptions{Fsync: true, InflightDefaults: true}

func main() {
	var o options
	fs := flag.NewFlagSet("bench", flag.ExitOnError)
	fs.IntVar(&o.n, "n", 500, "Snapshots (and bound PVCs) in the create/delete scenario.")
	fs.StringVar(&o.systems, "systems", "ours,community-tuned,community-equal,community-default", "Systems for the scenario, comma-separated: ours, community-tuned, community-equal (our client limits and workers), community-default, writes-only (an empty controller: our writes without logic or CSI calls).")
	fs.IntVar(&o.repeats, "repeats", 3, "Runs of the scenario per system, interleaved (ours, community-tuned, ..., ours, ...); the report gives median, min and max.")
	fs.BoolVar(&o.unsafeNoFsync, "unsafe-no-fsync", false, "Start etcd with --unsafe-no-fsync (faster, not what a cluster does; the report says so).")
	fs.BoolVar(&o.allowDirty, "allow-dirty", false, "Run on a tree with uncommitted or untracked files (the report says so prominently).")
	fs.BoolVar(&o.adminControllers, "admin-controllers", false, "Run the controllers and the webhook as admin (system:masters, exempt from API Priority and Fairness) instead of their ServiceAccounts.")
	fs.BoolVar(&o.csiLatency, "csi-latency", false, "Give the mock driver latency (CreateSnapshot 200 ms, ListSnapshots 50 ms) in the scenario.")
	fs.StringVar(&o.csiReadyAfter, "csi-ready-after", "", "Experiments: with a duration range such as 5s-30s, the mock driver of the main scenario answers readyToUse=false for a snapshot until that long (spread per snapshot) after its first answer (-waiting measures this on its own).")
	fs.StringVar(&o.waiting, "waiting", "5s-30s", "The slow-driver stage: a driver with -csi-latency whose snapshots turn ready this long (spread per snapshot) after its first answer; per snapshot the CSI calls and API writes while it uploads and the delay until the VolumeSnapshot shows it ready (empty skips it).")
	fs.StringVar(&o.waitingSystems, "waiting-systems", "ours,community-tuned,community-equal", "Systems for the slow-driver stage, -repeats runs each, interleaved.")
	fs.IntVar(&o.waitingN, "waiting-n", 0, "Snapshots in the slow-driver stage (0: same as -n).")
	fs.BoolVar(&o.skipCommunity, "skip-community", false, "Run only snapkeeper (scenario and steady state).")
	fs.IntVar(&o.communityDefaultN, "community-default-n", 0, "Snapshots for the community pair at default flags (0: same as -n). A smaller value is reported as measured and extrapolated linearly to -n: at QPS 5 its time is client-side waiting that grows with N.")
	fs.IntVar(&o.createConc, "create-concurrency", 100, "Goroutines creating (and deleting) the snapshots.")
	fs.IntVar(&o.ceilingOps, "ceiling-ops", 2000, "Objects created and then patched to measure the raw write ceiling (ConfigMaps, then VolumeSnapshots).")
	fs.IntVar(&o.ceilingConc, "ceiling-concurrency", 64, "Goroutines of the write-ceiling measurement.")
	fs.DurationVar(&o.quiet, "quiet", 3*time.Second, "A window ends when no API write happened for this long.")
	fs.IntVar(&o.steadyM, "steady-m", 5000, "Ready snapshots held during the steady-state restart (0 skips it).")
	fs.DurationVar(&o.steadyIdle, "steady-idle", 60*time.Second, "Least window after a restart or cold start in which writes and CSI calls are counted (it runs on until the controllers are idle for -quiet).")
	fs.StringVar(&o.steadySystems, "steady-systems", "ours,community-tuned", "Systems for the steady-state restart.")
	fs.IntVar(&o.coldStartM, "cold-start-m", 100000, "Ready snapshots (with their contents) seeded directly in the API server, over which each of -cold-start-systems starts cold (0 skips it).")
	fs.StringVar(&o.coldStartSystems, "cold-start-systems", "ours,community-tuned,community-equal", "Systems for the cold start, one after the other over the same seeded control plane.")
	fs.IntVar(&o.seedConc, "seed-concurrency", 128, "Goroutines seeding ready snapshots (cold start, seeded scale runs).")
	fs.StringVar(&o.scale, "scale", "500,5000,20000", "Snapshot counts of the scale runs, comma-separated (empty skips them).")
	fs.StringVar(&o.scaleSystems, "scale-systems", "ours,writes-only,community-equal", "Systems for the scale runs; writes-only, the empty controller that sends only our writes, shows what the API server alone needs for them.")
	fs.IntVar(&o.scaleRepeats, "scale-repeats", 1, "Runs per N and system of the scale stage, interleaved (every N of every system, then again); the tables give the median run by time to all-ready, and each phase's median, min and max with its growth.")
	fs.IntVar(&o.scaleDynamicMax, "scale-dynamic-max", 20000, "Largest N of a scale run whose snapshots are created through the system; above it they are seeded ready and the system starts over them before the delete phase.")
	fs.IntVar(&o.groups, "groups", 100, "Volume group snapshots in the group scenario (0 skips it).")
	fs.IntVar(&o.groupSize, "group-size", 10, "Claims (members) per volume group snapshot.")
	fs.StringVar(&o.groupSystems, "group-systems", "ours,community-tuned", "Systems for the group scenario.")
	fs.BoolVar(&o.admission, "admission", true, "Measure the admission webhook's latency.")
	fs.IntVar(&o.admissionRequests, "admission-requests", 4000, "Requests per row sent straight to the webhook.")
	fs.IntVar(&o.admissionAPIReqs, "admission-api-requests", 1000, "Requests per row sent through the API server (dry-run creates).")
	fs.IntVar(&o.single, "single", 50, "Snapshots taken one after the other (each created, ready, deleted, gone before the next) on an idle control plane per -single-systems, next to the latency of one API write (0 skips it).")
	fs.StringVar(&o.singleSystems, "single-systems", "ours,community-equal", "Systems for the one-snapshot-alone stage.")
	fs.IntVar(&o.scheduleClaims, "schedule-claims", 2000, "Bound claims of the schedule stage (test/bench/schedules.go): one hourly SnapshotSchedule over them (keepLast 1) cuts one snapshot per claim at the next full minute, then, moved to the next minute, cuts again while its retention deletes the first run; the community systems get the same creates at once, and the deletes once the second run is ready, from the benchmark, as snapscheduler would send them (0 skips every schedule stage).")
	fs.StringVar(&o.scheduleSystems, "schedule-systems", "ours,community-equal", "Systems for the schedule stage (empty skips it; -schedule-seeded runs ours alone).")
	fs.IntVar(&o.scheduleSeeded, "schedule-seeded", 100000, "Ready scheduled snapshots (with contents and backend snapshots, a multiple of -schedule-claims and at least 2 per claim, an hour apart) seeded for a schedule's run over them: the time and memory of the schedule component's first sync, its idle syncs and its retention (test/bench/schedules_seeded.go; 0 skips it).")
	fs.StringVar(&o.out, "out", "", "Write the Markdown report here (rewritten after every stage); it is always printed too.")
	fs.StringVar(&baselineRev, "baseline", "", "A git revision: adds the system ours-baseline, our controller built from that commit (use it in -systems and the other lists to measure a change against the tree before it, in the same run).")
	fs.StringVar(&o.oursArgs, "ours-args", "", "Extra flags for snapkeeper, space-separated (experiments only: the report labels them as not the defaults).")
	fs.StringVar(&profileDir, "profile", "", "A directory: take CPU profiles of kube-apiserver, etcd and our processes over every create and delete phase of the scale runs, and our processes' heap once all are ready (files <run>-<phase>-<process>-<k>.pb.gz, merged by `go tool pprof`); the report lists the top functions of each.")
	fs.BoolVar(&o.keep, "keep", false, "Keep the control planes' directories (logs) even on success.")
	_ = fs.Parse(os.Args[1:])

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, o, strings.Join(os.Args[1:], " ")))
}

func run(ctx context.Context, o options, args string) int {
	defer removeOwnBinaries()
	defer removeBaseline()
	for _, name := range []string{"kube-apiserver", "etcd", "mock-csi-driver"} {
		if _, err := framework.Tool(name); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
	}
	oursArgs := strings.Fields(o.oursArgs)
	for _, list := range []string{o.systems, o.steadySystems, o.coldStartSystems, o.scaleSystems, o.groupSystems, o.waitingSystems, o.singleSystems, o.scheduleSystems} {
		if _, err := pick(list, o.skipCommunity, oursArgs); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
	}
	if _, err := parseScale(o.scale); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if o.scaleRepeats < 1 {
		fmt.Fprintf(os.Stderr, "bench: -scale-repeats %d: want 1 or more runs per N and system\n", o.scaleRepeats)
		return 2
	}
	if c, m := o.scheduleClaims, o.scheduleSeeded; c > 0 && m > 0 && (m%c != 0 || m/c < 2) {
		fmt.Fprintf(os.Stderr, "bench: -schedule-seeded %d: want a multiple of -schedule-claims (%d) with at least 2 snapshots per claim\n", m, c)
		return 2
	}
	tree, err := describeTree()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if tree.dirty != "" && !o.allowDirty {
		fmt.Fprintf(os.Stderr, "bench: the tree at %s is not clean (%s): commit first, or pass -allow-dirty (the report then says so)\n", tree.commit, tree.dirty)
		return 2
	}
	for flag, v := range map[string]string{"csi-ready-after": o.csiReadyAfter, "waiting": o.waiting} {
		if lo, hi, _ := strings.Cut(v, "-"); v != "" {
			for _, d := range []string{lo, hi} {
				if _, err := time.ParseDuration(d); err != nil && d != "" {
					fmt.Fprintf(os.Stderr, "bench: -%s %q: want min-max durations such as 5s-30s\n", flag, v)
					return 2
				}
			}
		}
	}
	if profileDir != "" {
		planeOptions.Profiling = true
		if err := os.MkdirAll(profileDir, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
	}
	planeOptions.Fsync = !o.unsafeNoFsync
	controllersAsAdmin = o.adminControllers
	rep := &report{opts: o, args: args, started: time.Now(), machine: describeMachine(), tree: tree, loadStart: loadAvg()}
	flush := func() {
		if o.out == "" {
			return
		}
		if err := os.WriteFile(o.out, []byte(rep.markdown()), 0o644); err != nil {
			logf("write %s: %v", o.out, err)
		}
	}

	if err := runStages(ctx, o, rep, oursArgs, flush); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	rep.finished = time.Now()
	rep.loadEnd = loadAvg()
	flush()
	fmt.Println(rep.markdown())
	if failed := rep.failures(); len(failed) > 0 || ctx.Err() != nil {
		fmt.Fprintln(os.Stderr, "\nBENCHMARK FAILED:")
		for _, f := range failed {
			fmt.Fprintln(os.Stderr, "  -", f)
		}
		if ctx.Err() != nil {
			fmt.Fprintln(os.Stderr, "  - interrupted")
		}
		return 1
	}
	return 0
}

func pick(list string, skipCommunity bool, oursArgs []string) ([]*system, error) {
	all := allSystems(oursArgs)
	var out []*system
	for _, id := range strings.Split(list, ",") {
		id = strings.TrimSpace(id)
		if id == "" || (skipCommunity && id != sysOurs && id != sysOursBaseline) {
			continue
		}
		found := false
		for _, s := range all {
			if s.ID == id {
				out = append(out, s)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown system %q (want ours, community-tuned, community-equal, community-default, writes-only, or ours-baseline with -baseline)", id)
		}
	}
	return out, nil
}

// ownBuilt is a command that framework.OwnBinary has built in this process.
var ownBuilt string

// removeOwnBinaries deletes the temp directory in which the framework built
// our commands (the framework removes it itself only under `go test`).
func removeOwnBinaries() {
	if ownBuilt == "" {
		return
	}
	p, err := framework.OwnBinary(ownBuilt) // cached: no build
	if err != nil {
		return
	}
	dir := filepath.Dir(p)
	if strings.HasPrefix(filepath.Base(dir), "snapkeeper-bin-") {
		os.RemoveAll(dir)
	}
}
