#!/usr/bin/env bash
# Build the five libraries, `zr` and the C test programs for every published
# platform from this one Debian x86-64 machine, with zig as the compiler and
# linker and meson (>= 1.12, from the tool venv) driving it; run the C suites
# where an emulator exists; check the artifacts of every target.
#
#   bash scripts/cross.sh [TARGET...]     (default: all eight)
#
# Targets: linux-x64-gnu linux-arm64-gnu linux-x64-musl linux-arm64-musl
#          windows-x64 windows-arm64 macos-x64 macos-arm64
# Environment:
#   CROSS_RUN   targets whose suites run (default: every target that has a
#               way to run here: x64 Linux natively, arm64 Linux under
#               qemu-aarch64-static, windows-x64 under wine64). "none" to
#               only build and check.
#   CROSS_JOBS  parallel compile jobs (default: nproc)
#
# Dependencies (zstd, msgpack-c, liblmdb, json-c, cmocka, zlib) are built from the
# subprojects/ wraps (Debian source packages) and linked statically, hidden.
# Prints one summary table; exits non-zero if any build, suite or check failed.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
. scripts/cross_common.sh
RUNNABLE="linux-x64-gnu linux-arm64-gnu linux-x64-musl linux-arm64-musl windows-x64"
RUN=${CROSS_RUN:-$RUNNABLE}
JOBS=${CROSS_JOBS:-$(nproc)}

targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${ALL[@]}")
for t in "${targets[@]}"; do
    [ -f cross/$t.ini ] || { echo "cross: unknown target '$t' (have: ${ALL[*]})" >&2; exit 2; }
done

bash scripts/cross_setup.sh --wheels || { echo "cross: toolchain setup failed" >&2; exit 1; }
cross_toolchain
GO=${CROSS_GO:-/usr/lib/go-1.19/bin/go}

declare -A R_BUILT R_SUITES R_GO R_FAILED R_TIME

# The artifacts of target $1 in build dir $2: "kind path" lines.
artifacts() {
    local t=$1 b=$2 l
    for l in "${LIBS[@]}"; do
        case $t in
            linux-*) echo "lib $b/lib$l/lib$l.so" ;;
            windows-*) echo "lib $(ls "$b"/lib$l/lib$l*.dll 2>/dev/null | head -1)" ;;
            macos-*) echo "lib $(ls "$b"/lib$l/lib$l.*.dylib 2>/dev/null | head -1)" ;;
        esac
    done
    case $t in
        windows-*) echo "exe $b/tools/zr.exe"; echo "lua $b/bindings/lua/zrecord.dll" ;;
        *) echo "exe $b/tools/zr"; echo "lua $b/bindings/lua/zrecord.so" ;;
    esac
    # The Go binding's test program (go_build), a cgo program linked
    # against our libraries as a Go user's would be.
    case $t in
        macos-*) ;;
        windows-*) echo "exe $b/go/zrecord.test.exe" ;;
        *) echo "exe $b/go/zrecord.test" ;;
    esac
}

# Check target $1 (build dir $2); prints failed check names, one a line.
check_target() {
    local kind f
    while read -r kind f; do
        check_file "$1" "$kind" "$f"
    done < <(artifacts "$1" "$2")
}

# Run the C and Lua suites of target $1 (build dir $2); sets R_SUITES.
run_suites() {
    local t=$1 b=$2
    rm -f "$b/meson-logs/testlog.json"
    # The peak RSS of the largest suite (GNU time reports the largest
    # waited-for descendant): bounded under emulation too (QEMU_RESERVED_VA).
    /usr/bin/time -o "$b/cross-test.rss" -f %M \
        "$MESON" test -C "$b" --suite c --suite lua --no-rebuild --num-processes "$JOBS" --print-errorlogs \
        >"$b/cross-test.log" 2>&1
    local counts
    counts=$("$TOOLS/venv/bin/python3" - "$b/meson-logs/testlog.json" <<'EOF'
import json, sys
ok = n = 0
try:
    for line in open(sys.argv[1]):
        r = json.loads(line)
        n += 1
        ok += r["result"] in ("OK", "EXPECTEDFAIL", "SKIP")
except OSError:
    pass
print(ok, n)
EOF
)
    set -- $counts
    R_SUITES[$t]="$1/$2"
    local rss
    rss=$(tail -1 "$b/cross-test.rss" 2>/dev/null)
    # (Measured: about 200 MiB natively, 1.0 GiB under wine, 1.6 GiB under
    # qemu with the reserve, 7.5 GB for torture_store without it.)
    if [ -n "$rss" ] && [ "$rss" -gt "$((4 * 1024 * 1024))" ]; then
        echo "cross: $t: a suite peaked at $((rss / 1024)) MiB of RSS (bound: 4096 MiB)"
        R_FAILED[$t]+="rss($((rss / 1024))MiB) "
        return 1
    fi
    if [ "$2" -eq 0 ] || [ "$1" -ne "$2" ]; then
        grep -E '^ *[0-9]+/[0-9]+ .*(FAIL|TIMEOUT|ERROR)' "$b/cross-test.log" | sort -u | sed "s/^/cross: $t: /"
        return 1
    fi
}

# How to run a program of target $1 here (empty: natively).
runner() {
    case $1 in
        linux-arm64-*) echo qemu-aarch64-static ;;
        windows-x64) echo /usr/lib/wine/wine64 ;;
    esac
}

# zr's output of target $1 (build dir $2): text on stdout (`zr version`),
# and `zr cat --raw` writes a store's bytes to stdout unchanged: an int64
# store of 0..999 (8,000 bytes, with 0x0A bytes in it) must come back as
# exactly the bytes that went in, as on Linux. Prints failed checks.
check_stdout() {
    local t=$1 b=$2 zr=$2/tools/zr run d
    [[ $t == windows-* ]] && zr=$b/tools/zr.exe
    run=$(runner "$t")
    d=$(mktemp -d)
    # wine finds the DLLs of the build tree through WINEPATH (as meson test
    # sets it for the suites).
    local WINEPATH="" l
    for l in "${LIBS[@]}"; do WINEPATH+="Z:$(echo "$b/lib$l" | tr / '\\');"; done
    export WINEPATH
    # shellcheck disable=SC2086
    $run "$zr" version >"$d/version.out" 2>"$d/version.err" </dev/null
    grep -q zrengine "$d/version.out" || echo "stdout(zr version wrote $(wc -c <"$d/version.out") bytes to stdout):zr"
    "$TOOLS/venv/bin/python3" - "$d" <<'PY'
import struct, sys
d = sys.argv[1]
data = b"".join(struct.pack("<q", v) for v in range(1000))
head = b"{'descr': '<i8', 'fortran_order': False, 'shape': (1000,), }"
head += b" " * (117 - len(head)) + b"\n"  # 10 + 118 = 128 bytes of header
open(f"{d}/x.npy", "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head + data)
open(f"{d}/x.bin", "wb").write(data)
PY
    # shellcheck disable=SC2086
    (cd "$d" && $run "$zr" ingest x.npy store >/dev/null 2>&1 </dev/null &&
        $run "$zr" cat --raw store 0:1000 >raw.out 2>raw.err </dev/null)
    cmp -s "$d/x.bin" "$d/raw.out" || echo "binary-stdout(zr cat --raw wrote $(wc -c <"$d/raw.out" 2>/dev/null || echo 0) bytes, want 8000 unchanged):zr"
    rm -rf "$d"
}

# GOOS and GOARCH of target $1; none for macOS, where Go's external link
# expects Apple's linker and zig's refuses it (Go 1.19: darwin/arm64's
# runtime/cgo asks for the CoreFoundation framework, which zig's libSystem
# stubs do not have; darwin/amd64 passes -no_pie, which zig rejects, and
# with -buildmode=pie zig rejects a relocation in Go's object).
go_target() {
    case $1 in
        linux-x64-*) echo linux amd64 ;;
        linux-arm64-*) echo linux arm64 ;;
        windows-x64) echo windows amd64 ;;
        windows-arm64) echo windows arm64 ;;
    esac
}

# cgo-build the Go binding's tests for target $1 (build dir $2) with zig as
# the C compiler and linker, against the build tree's libraries through
# their uninstalled pkg-config files: $2/go/zrecord.test(.exe). Go is
# Debian's golang-1.19 (the floor go.mod names): Go >= 1.22 needs
# ProcessPrng from bcryptprimitives.dll on Windows, which Debian 12's wine
# does not have. SWIG is Debian's, as for the native Go build.
go_build() {
    local t=$1 b=$2 os arch out=$2/go/zrecord.test l triple
    read -r os arch < <(go_target "$t")
    triple=$(sed -n "s/^c = .*'-target', '\([^']*\)'.*/\1/p" "cross/$t.ini")
    [[ $t == windows-* ]] && out+=.exe
    rm -rf "$b/go" && mkdir -p "$b/go/lib"
    # zig's COFF link looks for -lzloader as zloader.lib; meson names the
    # import library libzloader.dll.a.
    if [[ $t == windows-* ]]; then
        for l in "${LIBS[@]}"; do ln -s "../../lib$l/lib$l.dll.a" "$b/go/lib/$l.lib"; done
    fi
    # Go's build cache keys a cgo package on its own directory's files, not
    # on the headers and SWIG files it includes from elsewhere: a package
    # compiled against an older zloader.h would be reused (measured: a
    # zld_options grown by a field, and the old wrapper's free() aborted).
    # Their hash in CGO_CFLAGS makes a change of any of them a new build.
    local hdrs
    hdrs=$(cat lib*/include/*.h platform/*.h bindings/swig/* | sha256sum | cut -c1-16)
    (cd bindings/go && CGO_ENABLED=1 GOOS=$os GOARCH=$arch CC="$ZIG cc -target $triple" \
        PKG_CONFIG_PATH="$b/meson-uninstalled" CGO_CFLAGS="-O2 -g -DZR_HEADERS_HASH=$hdrs" \
        CGO_LDFLAGS="-L$b/go/lib" "$GO" test -c -o "$out" .) >"$b/cross-go.log" 2>&1
}

# Run the Go binding's tests of target $1 (build dir $2), built by go_build,
# from the package's directory as `go test` does; -test.short leaves out
# the one test that runs this machine's `go vet`. Prints "passed/run"
# (a skipped test counted as passed, as for the suites).
go_run() {
    local t=$1 b=$2 run out=$2/go/zrecord.test l dirs="" rc=0
    run=$(runner "$t")
    [[ $t == windows-* ]] && out+=.exe
    for l in "${LIBS[@]}"; do dirs+="$b/lib$l:"; done
    local WINEPATH=""
    for l in "${LIBS[@]}"; do WINEPATH+="Z:$(echo "$b/lib$l" | tr / '\\');"; done
    # shellcheck disable=SC2086
    (cd bindings/go && WINEPATH=$WINEPATH LD_LIBRARY_PATH=${dirs%:} timeout 900 \
        $run "$out" -test.short -test.v -test.count=1 </dev/null) >"$b/cross-go-test.log" 2>&1 || rc=1
    echo "$(grep -Ec '^--- (PASS|SKIP)' "$b/cross-go-test.log")/$(grep -Ec '^--- (PASS|FAIL|SKIP)' "$b/cross-go-test.log")"
    return $rc
}

# Configure target $1 (meson setup is mostly serial compiler checks, so
# the targets configure side by side); leaves its status and seconds in
# $CACHE/setup-$1.rc.
configure_target() {
    local t=$1 t0 rc=0
    t0=$(date +%s)
    cross_configure "$t" >"$CACHE/setup-$t.log" 2>&1 || rc=1
    echo "$rc $(( $(date +%s) - t0 ))" > "$CACHE/setup-$t.rc"
}

echo "cross: configuring ${targets[*]}"
for t in "${targets[@]}"; do
    rm -f "$CACHE/setup-$t.rc"
    configure_target "$t" &
    while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n; done
done
wait

status=0
for t in "${targets[@]}"; do
    b=$CACHE/build/$t
    read -r setup_rc setup_s < "$CACHE/setup-$t.rc" || { setup_rc=1; setup_s=0; }
    t0=$(date +%s)
    ok=1
    if [ "$setup_rc" != 0 ]; then
        ok=0
        echo "cross: $t: meson setup failed, see $CACHE/setup-$t.log"
        tail -20 "$CACHE/setup-$t.log"
    fi
    if [ $ok = 1 ]; then
        ninja -C "$b" -j "$JOBS" >"$b/cross-build.log" 2>&1 \
            || { ok=0; echo "cross: $t: build failed, see $b/cross-build.log"; grep -A8 -m3 FAILED "$b/cross-build.log"; }
    fi
    t1=$(date +%s)
    R_BUILT[$t]=$([ $ok = 1 ] && echo yes || echo NO)
    R_SUITES[$t]="checked only"
    R_GO[$t]="checked only"
    R_FAILED[$t]=""
    if [ $ok = 1 ]; then
        if [ -z "$(go_target "$t")" ]; then
            R_GO[$t]="none (macOS)"
        else
            tg=$(date +%s)
            go_build "$t" "$b" || { R_FAILED[$t]+="go-build($b/cross-go.log) "; R_GO[$t]="NOT BUILT"; status=1;
                                    grep -v '^#' "$b/cross-go.log" | head -8 | sed "s/^/cross: $t: go: /"; }
            echo "cross: $t: go build $(( $(date +%s) - tg )) s"
        fi
        t1=$(date +%s)
        if [[ " $RUN " == *" $t "* ]] && [[ " $RUNNABLE " == *" $t "* ]]; then
            run_suites "$t" "$b" || status=1
            if [ "${R_GO[$t]}" = "checked only" ]; then
                tg=$(date +%s)
                R_GO[$t]=$(go_run "$t" "$b") || { R_FAILED[$t]+="go-test($b/cross-go-test.log) "; status=1;
                    grep -E '^--- FAIL' "$b/cross-go-test.log" | head -8 | sed "s/^/cross: $t: /"; }
                echo "cross: $t: go tests $(( $(date +%s) - tg )) s"
            fi
        fi
        R_FAILED[$t]+=$(check_target "$t" "$b" | tr '\n' ' ')
        if [[ " $RUN " == *" $t "* ]] && [[ " $RUNNABLE " == *" $t "* ]]; then
            R_FAILED[$t]+=$(check_stdout "$t" "$b" | tr '\n' ' ')
        fi
        [ -z "${R_FAILED[$t]}" ] || status=1
    else
        status=1
    fi
    t2=$(date +%s)
    R_TIME[$t]="${setup_s}+$(( t1 - t0 ))+$(( t2 - t1 ))s"
    echo "cross: $t: setup ${setup_s} s, build $(( t1 - t0 )) s, suites and checks $(( t2 - t1 )) s"
done

echo
echo "(time: seconds to configure + build + run suites and checks)"
printf '%-18s %-6s %-14s %-14s %-14s %s\n' target built suites go-tests time failed-checks
printf '%-18s %-6s %-14s %-14s %-14s %s\n' ------ ----- ------ -------- ---- -------------
for t in "${targets[@]}"; do
    printf '%-18s %-6s %-14s %-14s %-14s %s\n' "$t" "${R_BUILT[$t]}" "${R_SUITES[$t]}" "${R_GO[$t]}" "${R_TIME[$t]}" \
        "${R_FAILED[$t]:-none}"
done
[ $status = 0 ] && echo "cross: all targets passed" || echo "cross: FAILED"
exit $status
