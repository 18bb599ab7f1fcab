#!/usr/bin/env bash
# Install what scripts/cross.sh needs on a Debian 12 (bookworm) x86-64 machine:
#   - Debian: qemu-user-static (arm64 Linux suites), wine64 (windows-x64
#     suites), musl-tools, llvm (llvm-objdump/llvm-nm read ELF, PE and
#     Mach-O for the artifact checks), file, ninja-build, lua5.4 (embeds
#     the Lua module's Lua part at build time), swig (the Go binding's, as
#     in the native build) and golang-1.19-go (Go for the cross builds of
#     the Go binding: Go >= 1.22 programs need bcryptprimitives.dll's
#     ProcessPrng on Windows, which Debian 12's wine lacks);
#   - the arm64 runtimes qemu loads: libc6:arm64 and musl:arm64 (the only
#     reason for `dpkg --add-architecture arm64`);
#   - a tool venv under .cache/cross/venv with pinned zig (PyPI `ziglang`,
#     the one C compiler and linker for all eight targets), meson (>= 1.12:
#     Debian's 1.0.1 cannot detect zig's linker) and SWIG (pyproject.toml's pin);
#   - the dependency sources (zstd, msgpack-c, json-c, cmocka, zlib, Lua) from
#     Debian's source packages and liblmdb from PyPI's lmdb source package,
#     into subprojects/packagecache/ where the wrap files under subprojects/
#     find them (scripts/dep_sources.sh; nothing is downloaded by meson).
#
# With --wheels, also the Python parts of the eight wheels (scripts/wheel.sh):
#   - CPython 3.11's headers and the stable ABI's export list (PC/pyconfig.h
#     and PC/python3dll.c for Windows) from Debian's python3.11 source
#     package, and Debian's own x86-64 pyconfig.h (python3-dev) for the
#     POSIX targets (LP64 and little-endian all, which is what the limited
#     API's headers read from it);
#   - numpy's headers as numpy's wheel for each target ships them (its
#     _numpyconfig.h knows the target's C types: long is 32-bit on Windows),
#     the numpy pinned in pyproject.toml, from PyPI;
# (The CPythons that run the foreign wheels' tests, Debian's python3.11:arm64
# unpacked and PyPI's embeddable CPython 3.13 for Windows, are fetched by
# scripts/wheel_test.sh.)
# Safe to run again: it does only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
wheels=0
[ "${1:-}" = --wheels ] && wheels=1

ZIG_VERSION=0.17.1
MESON_VERSION=1.12.1
# The SWIG of the Python module's build (pyproject.toml pins the same).
SWIG_VERSION=$(sed -n 's/^ *"swig==\([0-9.]*\)".*/\1/p' pyproject.toml)
CACHE=.cache/cross
# The toolchain venv (outside the clone, shared by every clone; see cross.sh).
TOOLS=${ZR_CROSS_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/loaderx-cross}
mkdir -p "$TOOLS"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
APT=(apt-get -o DPkg::Lock::Timeout=900 -qq)

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "ok installed"; }

# 1. Debian packages.
debs=(qemu-user-static wine64 musl-tools llvm file ninja-build time unzip lua5.4 swig golang-1.19-go libc6:arm64 musl:arm64)
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    echo "cross-setup: adding dpkg architecture arm64 (for libc6:arm64 and musl:arm64 only)"
    $SUDO dpkg --add-architecture arm64
    need_update=1
fi
# A deb-src entry for bookworm, for `apt-get source`.
src_list=/etc/apt/sources.list.d/loaderx-deb-src.sources
if [ ! -f $src_list ]; then
    echo "cross-setup: adding a deb-src entry for bookworm ($src_list)"
    printf '%s\n' 'Types: deb-src' 'URIs: http://deb.debian.org/debian' \
        'Suites: bookworm bookworm-updates' 'Components: main' \
        'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' | $SUDO tee $src_list >/dev/null
    need_update=1
fi
missing=()
for p in "${debs[@]}"; do installed "$p" || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ] || [ -n "${need_update:-}" ]; then
    $SUDO "${APT[@]}" update
fi
if [ ${#missing[@]} -gt 0 ]; then
    echo "cross-setup: installing Debian packages: ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive $SUDO "${APT[@]}" install -y --no-install-recommends "${missing[@]}" >/dev/null
fi

# 2. The tool venv: zig and meson, pinned.
if [ ! -x $TOOLS/venv/bin/python3 ]; then
    mkdir -p $CACHE
    python3 -m venv $TOOLS/venv
fi
if ! $TOOLS/venv/bin/python3 -c "
import importlib.metadata as m, sys
sys.exit(not (m.version('ziglang') == '$ZIG_VERSION' and m.version('meson') == '$MESON_VERSION'
              and m.version('swig') == '$SWIG_VERSION'))" 2>/dev/null; then
    echo "cross-setup: installing ziglang==$ZIG_VERSION meson==$MESON_VERSION swig==$SWIG_VERSION into $TOOLS/venv"
    $TOOLS/venv/bin/python3 -m pip install -q --disable-pip-version-check \
        "ziglang==$ZIG_VERSION" "meson==$MESON_VERSION" "swig==$SWIG_VERSION"
fi

# 3. Dependency sources: the upstream tarballs of Debian's source packages
#    (and liblmdb from PyPI's lmdb source package), checked against the
#    hashes in the wrap files.
#    A dependency whose build file here changed since its source was
#    extracted is extracted again (the build dirs then reconfigure:
#    scripts/cross.sh sees the stamp .cache/cross/reconfigure).
mkdir -p $CACHE
PYTHON=$TOOLS/venv/bin/python3 bash scripts/dep_sources.sh
# 5. The Python parts of the wheels.
if [ $wheels = 1 ]; then
    PYD=$PWD/$CACHE/python
    mkdir -p $PYD $CACHE/debsrc
    for p in python3-dev; do installed "$p" || wheel_debs+=("$p"); done
    if [ -n "${wheel_debs[*]:-}" ]; then
        DEBIAN_FRONTEND=noninteractive $SUDO "${APT[@]}" install -y --no-install-recommends "${wheel_debs[@]}" >/dev/null
    fi
    if [ ! -f $PYD/cpython/Include/Python.h ]; then
        echo "cross-setup: apt-get source python3.11 (CPython's headers)"
        (cd $CACHE/debsrc && apt-get -qq source --download-only python3.11 >/dev/null)
        rm -rf $PYD/cpython && mkdir -p $PYD/cpython
        tar -xf "$(ls $CACHE/debsrc/python3.11_*.orig.tar.* | head -1)" -C $PYD/cpython --strip-components=1 \
            --wildcards '*/Include/*' '*/PC/pyconfig.h' '*/PC/python3dll.c'
    fi
    numpy_version=$(sed -n 's/^ *"numpy==\([0-9.]*\)".*/\1/p' pyproject.toml)
    for t in linux-x64-gnu linux-arm64-gnu linux-x64-musl linux-arm64-musl windows-x64 windows-arm64 macos-x64 macos-arm64; do
        dest=$PYD/numpy-$numpy_version/$t
        [ -f $dest/numpy/_numpyconfig.h ] && continue
        case $t in
            linux-x64-gnu) plats=(manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux2014_x86_64) ;;
            linux-arm64-gnu) plats=(manylinux_2_28_aarch64 manylinux_2_27_aarch64 manylinux2014_aarch64) ;;
            linux-x64-musl) plats=(musllinux_1_2_x86_64) ;;
            linux-arm64-musl) plats=(musllinux_1_2_aarch64) ;;
            windows-x64) plats=(win_amd64) ;;
            windows-arm64) plats=(win_arm64) ;;
            macos-x64) plats=(macosx_11_0_x86_64) ;;
            macos-arm64) plats=(macosx_11_0_arm64) ;;
        esac
        echo "cross-setup: numpy==$numpy_version's headers for $t (PyPI)"
        rm -rf $PYD/dl && mkdir -p $PYD/dl
        $TOOLS/venv/bin/python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
            $(printf -- '--platform %s ' "${plats[@]}") --python-version 3.11 --implementation cp \
            -d $PYD/dl "numpy==$numpy_version"
        rm -rf $dest && mkdir -p $dest
        (cd $dest && unzip -q $PYD/dl/numpy-*.whl 'numpy/_core/include/*' && mv numpy/_core/include/numpy numpy.h.d &&
            rm -rf numpy && mv numpy.h.d numpy)
    done
fi
echo "cross-setup: ready (zig $($TOOLS/venv/bin/python3 -m ziglang version), meson $($TOOLS/venv/bin/meson --version))"
