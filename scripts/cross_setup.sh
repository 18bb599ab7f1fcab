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
#   - the dependency sources (zstd, msgpack-c, json-c, cmocka, zlib) from
#     Debian's source packages and liblmdb from PyPI's lmdb source package,
#     into subprojects/packagecache/ where the wrap files under subprojects/
#     find them (scripts/dep_sources.sh; nothing is downloaded by meson).
# Safe to run again: it does only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

ZIG_VERSION=0.17.1
MESON_VERSION=1.12.1
CACHE=.cache/cross
# The toolchain venv (outside the clone, shared by every clone; see cross.sh).
TOOLS=${ZR_CROSS_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/loaderx-cross}
mkdir -p "$TOOLS"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
APT=(apt-get -o DPkg::Lock::Timeout=900 -qq)

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "ok installed"; }

# 1. Debian packages.
debs=(qemu-user-static wine64 musl-tools llvm file ninja-build libc6:arm64 musl:arm64)
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
sys.exit(not (m.version('ziglang') == '$ZIG_VERSION' and m.version('meson') == '$MESON_VERSION'))" 2>/dev/null; then
    echo "cross-setup: installing ziglang==$ZIG_VERSION meson==$MESON_VERSION into $TOOLS/venv"
    $TOOLS/venv/bin/python3 -m pip install -q --disable-pip-version-check \
        "ziglang==$ZIG_VERSION" "meson==$MESON_VERSION"
fi

# 3. Dependency sources: the upstream tarballs of Debian's source packages
#    (and liblmdb from PyPI's lmdb source package), checked against the
#    hashes in the wrap files.
#    A dependency whose build file here changed since its source was
#    extracted is extracted again (the build dirs then reconfigure:
#    scripts/cross.sh sees the stamp .cache/cross/reconfigure).
mkdir -p $CACHE
PYTHON=$TOOLS/venv/bin/python3 bash scripts/dep_sources.sh
echo "cross-setup: ready (zig $($TOOLS/venv/bin/python3 -m ziglang version), meson $($TOOLS/venv/bin/meson --version))"
