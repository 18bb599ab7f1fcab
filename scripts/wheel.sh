#!/usr/bin/env bash
# Build the binary wheels of loaderx and its sdist into dist/, refuse any
# wheel that breaks the platform rules, and test the wheels this machine can
# run.
#
#   bash scripts/wheel.sh                   linux-x64-gnu: build, check, test
#   bash scripts/wheel.sh --all             all eight targets
#   bash scripts/wheel.sh TARGET...         those (names as in scripts/cross.sh)
#   ... --no-test                           build and check only
#
# One wheel per platform serves every CPython >= 3.11: the extension is built
# on CPython's stable ABI (cp311-abi3). Every wheel is built here with zig,
# like the C side of scripts/cross.sh and from the same in-tree dependencies
# (static, hidden), against the target's CPython and numpy headers
# (scripts/cross_setup.sh --wheels fetches them):
#
#   linux-x64-gnu    cp311-abi3-manylinux_2_17_x86_64
#   linux-arm64-gnu  cp311-abi3-manylinux_2_17_aarch64
#   linux-x64-musl   cp311-abi3-musllinux_1_2_x86_64
#   linux-arm64-musl cp311-abi3-musllinux_1_2_aarch64
#   macos-x64        cp311-abi3-macosx_11_0_x86_64
#   macos-arm64      cp311-abi3-macosx_11_0_arm64
#   windows-x64      cp311-abi3-win_amd64
#   windows-arm64    cp311-abi3-win_arm64
#
# 1. The sdist (`python -m build --sdist`: meson dist, the committed files of
#    HEAD); it builds with any C compiler through meson-python.
# 2. Per target: the build of scripts/cross.sh (.cache/cross/build/TARGET,
#    which builds the extension with -Dpython_cross too), installed to a
#    staging dir in the wheel's layout (package, extension, libraries and zr
#    in loaderx/), packed by scripts/wheel_pack.py.
# 3. The check of every wheel (check_wheel below): the five libraries, the
#    extension and zr of its own platform and no other binary; no export of
#    a dependency's symbols (the extension exports PyInit__zr only); glibc
#    <= 2.17; Windows imports only system DLLs, python3.dll and its own;
#    macOS minos 11.0, @rpath install names, run paths relative to the file;
#    abi3audit finds no symbol outside the stable ABI of 3.11. A wheel that
#    fails is deleted from dist/ and the script fails.
# 4. Tests (scripts/wheel_test.sh): each wheel on every CPython that can run
#    it here.
#
# Tools (build, abi3audit: requirements/wheel.txt) go to a venv of their own
# under $WHEEL_WORK (default: build-wheel/).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
. scripts/cross_common.sh
work=${WHEEL_WORK:-$ROOT/build-wheel}
run_tests=1
targets=()
for a in "$@"; do
    case $a in
        --no-test) run_tests=0 ;;
        --all) targets=("${ALL[@]}") ;;
        -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
        *) [ -f "cross/$a.ini" ] || { echo "wheel: unknown target '$a' (have: ${ALL[*]})" >&2; exit 2; }
           targets+=("$a") ;;
    esac
done
[ ${#targets[@]} -gt 0 ] || targets=(linux-x64-gnu)
JOBS=${CROSS_JOBS:-$(nproc)}

wheel_platform() {
    case $1 in
        linux-x64-gnu) echo manylinux_2_17_x86_64 ;;
        linux-arm64-gnu) echo manylinux_2_17_aarch64 ;;
        linux-x64-musl) echo musllinux_1_2_x86_64 ;;
        linux-arm64-musl) echo musllinux_1_2_aarch64 ;;
        macos-x64) echo macosx_11_0_x86_64 ;;
        macos-arm64) echo macosx_11_0_arm64 ;;
        windows-x64) echo win_amd64 ;;
        windows-arm64) echo win_arm64 ;;
    esac
}

bash scripts/cross_setup.sh --wheels || { echo "wheel: toolchain setup failed" >&2; exit 1; }
cross_toolchain
mkdir -p "$work" dist
if [ ! -x "$work/tools/bin/python" ]; then
    python3 -m venv "$work/tools"
fi
"$work/tools/bin/python" -m pip install -q --disable-pip-version-check -r requirements/wheel.txt

# Check the unpacked wheel of target $1 in dir $2; prints failed checks.
check_wheel() {
    local t=$1 d=$2 f name kind want=()
    local l
    for l in "${LIBS[@]}"; do
        case $t in
            linux-*) want+=("lib lib$l.so.[0-9]*") ;;
            macos-*) want+=("lib lib$l.[0-9]*.dylib") ;;
            windows-*) want+=("lib lib$l*.dll") ;;
        esac
    done
    case $t in
        windows-*) want+=("ext _zr.pyd" "exe zr.exe") ;;
        *) want+=("ext _zr.abi3.so" "exe zr") ;;
    esac
    local w k p got
    for w in "${want[@]}"; do
        k=${w%% *}; p=${w#* }
        # shellcheck disable=SC2086
        got=$(cd "$d/loaderx" && ls $p 2>/dev/null | head -1)
        if [ -z "$got" ]; then echo "missing($p)"; continue; fi
        check_file "$t" "$k" "$d/loaderx/$got" 1
    done
    # No other binary: everything else is Python source or metadata.
    while IFS= read -r f; do
        name=${f#"$d"/}
        case $name in
            *.py|*.pyi|loaderx/py.typed|*.dist-info/*) continue ;;
        esac
        kind=""
        for w in "${want[@]}"; do
            p=${w#* }
            # shellcheck disable=SC2053
            [[ $(basename "$name") == $p ]] && kind=ok
        done
        [ -n "$kind" ] || echo "foreign-file:$name"
    done < <(find "$d" -type f)
}

t_all=$(date +%s)
rm -rf "$work/raw"
[ -z "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] ||
    echo "wheel: note: the sdist holds the committed files of HEAD, not uncommitted changes (the wheels are built from the work tree)"
"$work/tools/bin/python" -m build --sdist --outdir "$work/raw" . >"$work/sdist.log" 2>&1 ||
    { tail -30 "$work/sdist.log" >&2; echo "wheel: the sdist build failed (log: $work/sdist.log)" >&2; exit 1; }
sdist=$(ls "$work"/raw/loaderx-*.tar.gz)
rm -f dist/loaderx-*.tar.gz
cp "$sdist" dist/
echo "wheel: dist/$(basename "$sdist") ($(du -k "$sdist" | cut -f1) KiB)"

status=0
declare -A W_FILE W_CHECK
for t in "${targets[@]}"; do
    t0=$(date +%s)
    b=$CACHE/build/$t
    stage=$work/stage/$t
    plat=$(wheel_platform "$t")
    rm -f dist/loaderx-*-"$plat".whl
    W_FILE[$t]="NOT BUILT"
    W_CHECK[$t]=""
    if ! cross_configure "$t" >"$work/setup-$t.log" 2>&1; then
        tail -20 "$work/setup-$t.log"; echo "wheel: $t: meson setup failed ($work/setup-$t.log)"; status=1; continue
    fi
    if ! ninja -C "$b" -j "$JOBS" >"$work/build-$t.log" 2>&1; then
        grep -A8 -m3 FAILED "$work/build-$t.log"; echo "wheel: $t: build failed ($work/build-$t.log)"; status=1; continue
    fi
    rm -rf "$stage"
    DESTDIR="$stage" "$MESON" install -C "$b" --no-rebuild --quiet >"$work/install-$t.log" 2>&1 ||
        { tail -20 "$work/install-$t.log"; echo "wheel: $t: install failed"; status=1; continue; }
    if [[ $t == macos-* ]]; then
        for f in "$stage"/loaderx/*.dylib "$stage"/loaderx/_zr.abi3.so "$stage"/loaderx/zr; do
            [ -L "$f" ] || macho_clean_rpaths "$f"
        done
    fi
    whl=$("$work/tools/bin/python" scripts/wheel_pack.py "$stage" "$sdist" "cp311-abi3-$plat" "$ROOT/dist")
    chk=$work/check/$t
    rm -rf "$chk" && mkdir -p "$chk" && (cd "$chk" && unzip -q "$whl")
    failed=$(check_wheel "$t" "$chk" | tr '\n' ' ')
    # abi3audit: every CPython symbol the extension uses is in the stable ABI of 3.11.
    if ! "$work/tools/bin/abi3audit" --strict --assume-minimum-abi3 3.11 "$whl" >"$work/abi3audit-$t.log" 2>&1; then
        failed+="abi3audit($work/abi3audit-$t.log) "
    fi
    W_FILE[$t]=$(basename "$whl")
    W_CHECK[$t]=$failed
    if [ -n "$failed" ]; then
        echo "wheel: $t: $whl breaks the rules: $failed"
        rm -f "$whl"
        W_FILE[$t]="REFUSED"
        status=1
    fi
    echo "wheel: $t: $(basename "$whl") ($(du -k "$whl" 2>/dev/null | cut -f1) KiB) in $(( $(date +%s) - t0 )) s"
done

echo
printf '%-18s %-55s %s\n' target wheel failed-checks
for t in "${targets[@]}"; do
    printf '%-18s %-55s %s\n' "$t" "${W_FILE[$t]}" "${W_CHECK[$t]:-none}"
done
echo "wheel: built and checked in $(( $(date +%s) - t_all )) s"
[ $status = 0 ] || { echo "wheel: FAILED"; exit 1; }
[ $run_tests = 1 ] || exit 0
WHEEL_WORK=$work bash scripts/wheel_test.sh "${targets[@]}"
