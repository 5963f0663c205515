#!/usr/bin/env bash
# `make test`: every step of the suite, scheduled for a 2-core CI machine
# with cold caches (docs/testing.md, "Where make test spends its time").
#
#   1. builds, in the foreground: our commands once for every e2e package
#      (bin/own, $SNAPKEEPER_OWN_BINARIES), `go vet ./...`, whose
#      compilation the e2e test binaries and the community peers reuse, the
#      pinned tools one module at a time (their shared dependencies on one
#      version: hack/alignmods, checked here), and the CRD freshness check
#      (it rewrites the CRD files the e2e tests read);
#   2. the end-to-end tests at normal priority: test/faults (the longest
#      package) and test/e2e/schedules (which waits on the clock's minutes)
#      each in its own `go test` beside the others (-p 2), and the short
#      node form (make test-node-short: its five images, then the chart's
#      pods on a real node), whose Debian packages hack/node-deps.sh
#      installs in the background from the start (as root; without root
#      it is skipped in one line);
#   3. meanwhile, at the lowest CPU priority (nice 19), the steps that only
#      need CPU: gofmt, the test driver's vet and staticcheck, unit tests
#      with the race detector, 5 s of each fuzz target, the test driver's
#      tests. The e2e tests wait on leases, timeouts and the API
#      server; this chain takes the CPU they leave idle and yields it back
#      whenever a test's process wants it.
#
# Every step's wall and CPU time is printed at the end and kept in
# bin/test-times.tsv. A failing step fails the run; the others still finish
# so that one run reports every failure.
set -uo pipefail
cd "$(dirname "$0")/.."
make=${MAKE:-make}
go=${GO:-go}
export SNAPKEEPER_REQUIRE_MOCK_CSI=1
# FAULT_SEED=<n> replays the fault suite's random choices, as with make e2e.
[ -n "${FAULT_SEED:-}" ] && export SNAPKEEPER_FAULT_SEED=$FAULT_SEED
times=bin/test-times.tsv
logs=$(mktemp -d)
mkdir -p bin
: >"$times"

# step NAME CMD...: runs CMD, appends NAME, wall, user and system seconds
# and the exit code to $times; prints CMD's output as it comes. CPU is what
# CMD and its children used (bash's `times` in a subshell of its own).
step() {
	local name=$1 t0 cpu rc
	shift
	echo "== $name: $*"
	t0=$EPOCHREALTIME
	{
		cpu=$(
			"$@" >&4 2>&4
			rc=$?
			times # two lines: this subshell's CPU, then its children's
			exit $rc
		)
		rc=$?
	} 4>&1
	local e u s
	e=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", b - a }')
	read -r u s < <(echo "$cpu" | tail -1 | awk '{ split($0, f, " "); for (i = 1; i <= 2; i++) { split(f[i], p, /[ms]/); printf "%.0f ", p[1] * 60 + p[2] } }')
	printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$e" "$u" "$s" "$rc" >>"$times"
	echo "== $name: exit $rc, wall ${e}s, CPU ${u}s user + ${s}s system"
	return "$rc"
}

start=$(date +%s)
failed=()

# The node form's Debian packages (containerd, runc, CNI plugins, ...),
# installed while the builds run; the node step waits for this.
node_root=$([ "$(id -u)" = 0 ] && echo yes || echo no)
if [ "$node_root" = yes ]; then
	(
		hack/node-deps.sh
		echo $? >"$logs/node-deps.rc"
	) >"$logs/node-deps" 2>&1 &
fi

# 1. Builds. Without the tools nothing else can run. Our commands, `go vet`
# and the community peers compile the same k8s.io packages (same versions):
# whichever runs first pays, the others reuse (measured: peers 52 s after
# vet, 237 s before it; vet 74 s after the peers).
step own-binaries "$make" --no-print-directory own-binaries || exit 1
step vet "$make" --no-print-directory vet || failed+=(vet)
step tools "$make" --no-print-directory bin/snapshot-controller tools || { echo "tool build failed"; exit 1; }
# Before the e2e tests: it rewrites the chart's CRD files, which they read.
step check-crds "$make" --no-print-directory check-crds || failed+=(check-crds)
step check-mods "$make" --no-print-directory check-mods || failed+=(check-mods)
# What the community release (hack/tools/peers/go.mod) declares against ours.
step check-drift "$make" --no-print-directory check-drift || failed+=(check-drift)

# 2. End-to-end tests, in the background.
export SNAPKEEPER_OWN_BINARIES=$PWD/bin/own
mapfile -t others < <("$go" list ./test/... | grep -v -e '/test/faults$' -e '/schedules$' -e '/test/node$')
step e2e-faults "$go" test -count=1 -timeout 45m ./test/faults >"$logs/faults" 2>&1 &
faults=$!
# Schedules fire on the minute: their packages (e2e and faults) mostly wait
# for the clock, so they run beside the others instead of holding one of
# their two slots.
step e2e-schedules "$go" test -count=1 -p 2 -timeout 25m ./test/e2e/schedules ./test/faults/schedules >"$logs/schedules" 2>&1 &
schedules=$!
step e2e "$go" test -count=1 -p 2 -timeout 45m "${others[@]}" >"$logs/e2e" 2>&1 &
e2e=$!
node=
if [ "$node_root" = yes ]; then
	(
		while [ ! -f "$logs/node-deps.rc" ]; do sleep 1; done
		cat "$logs/node-deps"
		step e2e-node env SNAPKEEPER_NODE=if-possible "$make" --no-print-directory test-node-short NODE_DEPS=true
	) >"$logs/node" 2>&1 &
	node=$!
else
	echo "== e2e-node: skipped: not root (the node form starts containerd and a kubelet on this host); as root: make test-node-short" >"$logs/node"
fi

# 3. The CPU-only chain, niced, one make target after the other.
for target in lint-static unit fuzz-short test-tools; do
	step "$target" nice -n 19 "$make" --no-print-directory "$target" || failed+=("$target")
done
wait "$e2e" || failed+=(e2e)
cat "$logs/e2e"
wait "$faults" || failed+=(faults)
cat "$logs/faults"
wait "$schedules" || failed+=(e2e-schedules)
cat "$logs/schedules"
if [ -n "$node" ]; then wait "$node" || failed+=(e2e-node); fi
cat "$logs/node"
rm -rf "$logs"

echo
echo "== make test: wall $(($(date +%s) - start))s"
printf '%-14s %8s %8s %8s %4s\n' step wall user system exit
while IFS=$'\t' read -r n e u s rc; do
	printf '%-14s %8s %8s %8s %4s\n' "$n" "$e" "$u" "$s" "$rc"
done <"$times"
if [ ${#failed[@]} -gt 0 ]; then
	echo "FAILED: ${failed[*]}"
	exit 1
fi
