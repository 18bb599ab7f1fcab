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
# Run from outside the source tree so `import loaderx` is the installed one.
cd tests/python
python3 -m pytest -q -p no:cacheprovider .
