#!/usr/bin/env bash
# Run every test suite: the cmocka suites of each library (meson test),
# then the Python package's pytest suite against the installed package.
# Builds and installs first (scripts/setup.sh), so it works on a fresh clone.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
export BUILD_DIR
bash scripts/setup.sh
meson test -C "$BUILD_DIR" --suite c --print-errorlogs
meson test -C "$BUILD_DIR" --suite lua --print-errorlogs
# The Go binding builds with cgo against the installed .pc files (offline,
# no external modules).
command -v go >/dev/null || { echo "test: 'go' is not on PATH (the Go binding needs Go >= 1.22)" >&2; exit 1; }
(cd bindings/go && CGO_ENABLED=1 \
    PKG_CONFIG_PATH="${PREFIX:-/usr/local}/lib/$(gcc -print-multiarch)/pkgconfig:${PREFIX:-/usr/local}/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}" \
    go test -count=1 ./...)
# Run from outside the source tree so `import loaderx` is the installed one.
cd tests/python
python3 -m pytest -q -p no:cacheprovider .
# The binary wheel: build, repair (auditwheel), install into a fresh venv, smoke-test.
bash scripts/wheel.sh
