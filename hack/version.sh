#!/usr/bin/env bash
# Prints the version stamped into every binary, image and chart
# (docs/releases.md): `git describe --tags --dirty` on a tagged history,
# else v0.0.0-dev+<short commit>, with .dirty when tracked files differ
# from the commit.
set -euo pipefail
if v=$(git describe --tags --dirty 2>/dev/null); then
	echo "$v"
	exit 0
fi
sha=$(git rev-parse --short=12 HEAD 2>/dev/null) || { echo v0.0.0-dev; exit 0; }
if git diff-index --quiet HEAD -- 2>/dev/null; then
	echo "v0.0.0-dev+$sha"
else
	echo "v0.0.0-dev+$sha.dirty"
fi
