#!/usr/bin/env bash
# Run every test suite: the cmocka suites of each library and the Lua
# suites (meson test), the Go binding (go test), the C example against the
# installed headers and pkg-config files, the Python package's pytest suite
# against the package pip installed into the venv, and the binary wheel in
# a fresh venv of each CPython >= 3.11 found here. Sets up first (scripts/setup.sh --tests), so it works
# on a fresh clone of a fresh Debian 12 machine.
#
# Environment: VENV (default: .venv), PREFIX (default: .prefix in this
# clone; the C install the Go binding and the C example build against),
# BUILD_DIR (default: build).
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
BUILD_DIR=${BUILD_DIR:-build}
PREFIX=${PREFIX:-$src/.prefix}
VENV=${VENV:-$src/.venv}
export BUILD_DIR PREFIX VENV
bash scripts/setup.sh --tests --prefix "$PREFIX"
PREFIX=$(cd "$PREFIX" && pwd)
multiarch=$(gcc -print-multiarch)
export PATH="$VENV/bin:$PREFIX/bin:$PATH"
export PKG_CONFIG_PATH="$PREFIX/lib/$multiarch/pkgconfig:$PREFIX/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"

meson test -C "$BUILD_DIR" --suite c --print-errorlogs
meson test -C "$BUILD_DIR" --suite lua --print-errorlogs

# The Go binding builds with cgo against the installed .pc files (offline,
# no external modules).
command -v go >/dev/null || { echo "test: 'go' is not on PATH (the Go binding needs Go >= 1.19 (Debian 12: golang-go))" >&2; exit 1; }
. scripts/go_env.sh
zr_go test -count=1 ./...

# The C example, built as a C user builds it: public headers, pkg-config.
bash examples/c/build.sh "$BUILD_DIR/example-c"

# The cross-language determinism test: C, Python, Lua and Go over the same
# stores, seed and options hand out identical indices and batch bytes.
bash tests/cross/run.sh

# Run from outside the source tree so `import loaderx` is the installed one.
(cd tests/python && "$VENV/bin/python3" -m pytest -q -p no:cacheprovider .)

# The binary wheel of this platform (Linux x86-64, manylinux_2_17): built
# with zig, checked, then installed into a fresh venv of every CPython >= 3.11
# on this machine and smoke-tested there (scripts/wheel.sh; --all builds
# the eight platforms' wheels).
bash scripts/wheel.sh
