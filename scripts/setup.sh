#!/usr/bin/env bash
# Set up a Debian 12 machine for loaderx-in-C and install it. No root is
# needed past the Debian packages (apt-get, through sudo when not root).
#
#   bash scripts/setup.sh                  the Python package, into .venv/
#   bash scripts/setup.sh --prefix DIR     also the C libraries, headers,
#                                          pkg-config files, zr and the Lua
#                                          module under DIR (e.g. ~/.local)
#   bash scripts/setup.sh --tests          also what the test suites need
#
# 1. Debian packages: the C toolchain, SWIG, patch, the -dev packages of
#    zstd, msgpack-c, json-c and libcurl (OpenSSL), Debian's python3 with venv and headers,
#    and the Fashion-MNIST data set of the main job. liblmdb is built from
#    source (Debian 12's 0.9.24 crashes on damaged files): its tarball comes
#    from PyPI's lmdb source package (scripts/dep_sources.sh).
# 2. A virtual environment, $VENV (default: .venv in this clone), made by
#    the python3 on PATH (Debian's /usr/bin/python3 on a stock machine:
#    PEP 668 keeps pip out of it, a venv is the way in). It sees only what
#    the pinned lists put in it, never the interpreter's own site-packages,
#    so a test cannot pass because the machine happens to have a package
#    (tests/python/test_requirements.py checks that every distribution a
#    test imports is pinned). A venv made earlier with the system's
#    site-packages is made again. Use it with `. .venv/bin/activate`, or run
#    `.venv/bin/python3` directly.
# 3. requirements/run.txt (numpy) into the venv, then `pip install .`: pip
#    builds the libraries, the SWIG module, the `loaderx` package and `zr`
#    with meson-python (pyproject.toml) and installs them into the venv.
#    `zr` lands in .venv/bin.
# 4. With --prefix DIR (or PREFIX=DIR): a meson build in $BUILD_DIR
#    (default: build) installed under DIR: lib/<multiarch>/libz*.so and
#    pkgconfig/*.pc, include/*.h, bin/zr, lib/lua/5.4/zrecord.so. Installed
#    files find each other through RPATH, so any DIR works without
#    LD_LIBRARY_PATH; a C program needs PKG_CONFIG_PATH=DIR/lib/<multiarch>/pkgconfig.
#    DIR must be writable by you (root only for a prefix such as /usr/local).
#
# --tests adds the Debian packages of the test suites (cmocka, Lua 5.4, Go,
# hyperfine, the mrec and benchmark data, Java for Spark) and requirements/test.txt.
# Safe to run again: it installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
PREFIX=${PREFIX:-}
VENV=${VENV:-$PWD/.venv}
tests=0
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) PREFIX=$2; shift 2 ;;
        --prefix=*) PREFIX=${1#--prefix=}; shift ;;
        --tests) tests=1; shift ;;
        -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
        *) echo "setup: unknown argument '$1' (see: bash scripts/setup.sh --help)" >&2; exit 2 ;;
    esac
done
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
t_start=$(date +%s)

# 1. Debian packages.
debs=(build-essential pkg-config swig ca-certificates patch
      libzstd-dev libmsgpack-dev libjson-c-dev zlib1g-dev libcurl4-openssl-dev
      python3 python3-venv python3-dev
      dataset-fashion-mnist)
# The meson build under a prefix (and the test suites): Debian's meson and
# ninja (pip brings its own for the Python package), Lua 5.4 for the module.
[ -n "$PREFIX" ] || [ $tests -eq 1 ] && debs+=(meson ninja-build liblua5.4-dev lua5.4)
# The test suites: cmocka, the Go binding's toolchain, hyperfine (CLI
# benchmarks), LAMMPS/GROMACS samples (mrec importers), the Linux docs
# (the benchmarks' token corpus), node (the benchmarks' tokenizer), git
# (the wheel test's sdist is made from the git tree).
[ $tests -eq 1 ] && debs+=(libcmocka-dev hyperfine lammps-examples gromacs-data linux-doc-6.1
                           nodejs git)
# The cold-storage benchmark (bench/bench_readahead.py) builds its store on
# a throttled loop device: losetup and blockdev, mount, mkfs.ext4.
[ $tests -eq 1 ] && debs+=(util-linux mount e2fsprogs)
# The remote-store tests serve stores over HTTP ranges with Debian's nginx
# (the S3 server is SeaweedFS, built by scripts/seaweedfs.sh).
[ $tests -eq 1 ] && debs+=(nginx)
# The Spark shard writer's tests run pyspark, which needs a Java runtime.
[ $tests -eq 1 ] && debs+=(openjdk-17-jre-headless)
# Go and npm (the benchmarks fetch their tokenizer with it) from Debian
# unless another install is on PATH.
[ $tests -eq 1 ] && ! command -v go >/dev/null && debs+=(golang-go)
[ $tests -eq 1 ] && ! command -v npm >/dev/null && debs+=(npm)
missing=()
for p in "${debs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing Debian packages: ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# 2. The venv.
if [ -f "$VENV/pyvenv.cfg" ] && grep -Eqi '^include-system-site-packages *= *true' "$VENV/pyvenv.cfg"; then
    echo "setup: $VENV sees the system's site-packages; making it again without them"
    rm -rf "$VENV"
fi
if [ ! -x "$VENV/bin/python3" ]; then
    echo "setup: making the venv $VENV (from $(command -v python3))"
    python3 -m venv "$VENV"
fi
py=$VENV/bin/python3
pip=("$py" -m pip install -q --disable-pip-version-check)

# 3. Run-time requirements, then the package itself, built by pip.
PYTHON="$py" bash scripts/dep_sources.sh lmdb
reqs=(-r requirements/run.txt)
[ $tests -eq 1 ] && reqs+=(-r requirements/test.txt)
"${pip[@]}" "${reqs[@]}"
echo "setup: building and installing loaderx into $VENV (pip install .)"
"${pip[@]}" --force-reinstall --no-deps .
"$py" -c 'import importlib.metadata as m, loaderx; assert m.version("loaderx") == loaderx.__version__' ||
    { echo "setup: the installed loaderx does not import" >&2; exit 1; }

# 4. The C libraries, headers, pkg-config files, zr and the Lua module.
if [ -n "$PREFIX" ]; then
    mkdir -p "$PREFIX" 2>/dev/null && [ -w "$PREFIX" ] ||
        { echo "setup: cannot write to the prefix $PREFIX; choose one you own (--prefix ~/.local) or run as root" >&2; exit 1; }
    PREFIX=$(cd "$PREFIX" && pwd)
    # The Python package is the one pip built into the venv; this build
    # leaves it out.
    opts=(--prefix="$PREFIX" -Dwerror=true -Dpython=disabled)
    if [ -f "$BUILD_DIR/build.ninja" ]; then
        meson configure "$BUILD_DIR" "${opts[@]}" >/dev/null
    else
        meson setup "$BUILD_DIR" "${opts[@]}" >/dev/null
    fi
    echo "setup: building in $BUILD_DIR"
    meson compile -C "$BUILD_DIR" >/dev/null
    meson install -C "$BUILD_DIR" --quiet
    echo "setup: installed the C libraries, headers, pkg-config files, zr and the Lua module under $PREFIX"
fi
# 5. The test suites' S3 server: SeaweedFS built from the Go module proxy
# here, at set-up, never while the tests run. Minutes of CPU the first
# time; cached by version under ~/.cache/loaderx, so later runs (CI's
# clean clones included) find it at once.
if [ $tests -eq 1 ]; then
    echo "setup: the S3 server for the tests: $(bash scripts/seaweedfs.sh)"
fi
echo "setup: done in $(( $(date +%s) - t_start )) s. The venv: $VENV (new shell: . $VENV/bin/activate)"
