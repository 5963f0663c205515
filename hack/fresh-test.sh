#!/usr/bin/env bash
# Measures `make test` as a fresh CI machine runs it: a clone of HEAD in a
# new directory, with empty Go module, build and staticcheck caches and an
# empty HOME, then `.ci/run`. Prints make test's step table and the wall
# time; the clone and caches stay in the printed directory (remove it).
#
# Usage: hack/fresh-test.sh [DIR]   (default: a new directory under /tmp)
#        FRESH_TARGET=test-gitops hack/fresh-test.sh [DIR]   (`make <target>` instead)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$(mktemp -d /tmp/snapkeeper-fresh.XXXXXX)}
mkdir -p "$dir/home"
git clone -q "$root" "$dir/src"
cd "$dir/src"
target=${FRESH_TARGET:-test}
echo "fresh make $target of $(git rev-parse HEAD) in $dir"
export HOME=$dir/home GOPATH=$dir/home/go GOCACHE=$dir/home/.cache/go-build XDG_CACHE_HOME=$dir/home/.cache
start=$(date +%s)
rc=0
if [ "$target" = test ]; then bash .ci/run || rc=$?; else make "$target" || rc=$?; fi
echo "fresh make $target: exit $rc, wall $(($(date +%s) - start))s (clone and caches in $dir)"
exit $rc
