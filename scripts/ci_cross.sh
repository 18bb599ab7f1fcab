#!/usr/bin/env bash
# CI lane for the foreign targets: build all eight (libraries, zr, C test
# programs, the Lua module, the Go binding's tests but for macOS) with their
# artifact checks, run the C, Lua and Go suites of linux-arm64-gnu under
# qemu and of windows-x64 under wine, print the summary table and the
# lane's wall time. See docs/PLATFORMS.md.
set -uo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
CROSS_RUN="linux-arm64-gnu windows-x64" bash scripts/cross.sh
rc=$?
echo "ci-cross: $(( $(date +%s) - start )) s (exit $rc)"
exit $rc
