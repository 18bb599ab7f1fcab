#!/usr/bin/env bash
# Set up a Debian 12 machine for loaderx-in-C, build everything and install
# it: the C libraries, headers and pkg-config files under /usr/local, the
# `zr` tool on PATH, and the Python package `loaderx` into the python3 on
# PATH. Safe to run again: it installs only what is missing and rebuilds
# only what changed.
#
# Environment: BUILD_DIR (default: build), PREFIX (default: /usr/local).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
PREFIX=${PREFIX:-/usr/local}
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo

# 1. Debian packages: toolchain, libraries, and the Fashion-MNIST data set.
debs=(build-essential pkg-config meson ninja-build swig
      libzstd-dev libmsgpack-dev libcmocka-dev liblua5.4-dev lua5.4 liblmdb-dev
      hyperfine dataset-fashion-mnist
      libjson-c-dev lammps-examples gromacs-data
      linux-doc-6.1 nodejs)
missing=()
for p in "${debs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing Debian packages: ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# 2. Python packages, from the one pinned list.
# The python3 on PATH must be one pip may install into (pyenv, a venv, a
# user-built CPython), not Debian's /usr/bin/python3, which PEP 668 marks as
# externally managed.
if python3 -c 'import sys, sysconfig, os; sys.exit(not os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")))'; then
    echo "setup: $(command -v python3) is an externally managed system Python; put a" >&2
    echo "       pip-capable python3 first on PATH (e.g. python3 -m venv ~/.venvs/loaderx && . ~/.venvs/loaderx/bin/activate)" >&2
    exit 1
fi
python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore -r requirements/run.txt -r requirements/bench.txt

# 3. Configure, build, install. The Python package goes to the site-packages
#    of the python3 on PATH, wherever that interpreter lives.
platlib=$(python3 -c 'import sysconfig; print(sysconfig.get_path("platlib"))')
purelib=$(python3 -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
opts=(--prefix="$PREFIX" -Dpython.platlibdir="$platlib" -Dpython.purelibdir="$purelib"
      -Dwerror=true)
if [ -f "$BUILD_DIR/build.ninja" ]; then
    meson configure "$BUILD_DIR" "${opts[@]}" >/dev/null
else
    meson setup "$BUILD_DIR" "${opts[@]}" >/dev/null
fi
echo "setup: building in $BUILD_DIR"
meson compile -C "$BUILD_DIR" >/dev/null
$SUDO meson install -C "$BUILD_DIR" --quiet
$SUDO ldconfig
echo "setup: installed loaderx-in-C into $PREFIX (zr: $(command -v zr || echo "$PREFIX/bin/zr"))"
