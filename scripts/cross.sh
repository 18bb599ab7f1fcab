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
CACHE=$ROOT/.cache/cross
# The toolchain venv (zig, meson) and zig's compile cache live outside the
# clone, so every clone on this machine shares them: zig builds each
# target's C runtime (mingw, glibc stubs) once, minutes for Windows.
TOOLS=${ZR_CROSS_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/loaderx-cross}
export ZR_CROSS_TOOLS=$TOOLS
ALL=(linux-x64-gnu linux-arm64-gnu linux-x64-musl linux-arm64-musl
     windows-x64 windows-arm64 macos-x64 macos-arm64)
RUNNABLE="linux-x64-gnu linux-arm64-gnu linux-x64-musl linux-arm64-musl windows-x64"
RUN=${CROSS_RUN:-$RUNNABLE}
JOBS=${CROSS_JOBS:-$(nproc)}

targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${ALL[@]}")
for t in "${targets[@]}"; do
    [ -f cross/$t.ini ] || { echo "cross: unknown target '$t' (have: ${ALL[*]})" >&2; exit 2; }
done

bash scripts/cross_setup.sh || { echo "cross: toolchain setup failed" >&2; exit 1; }
MESON=$TOOLS/venv/bin/meson
ZIG=$("$TOOLS/venv/bin/python3" -c 'import ziglang, os; print(os.path.join(os.path.dirname(ziglang.__file__), "zig"))')
printf "[constants]\nzig = '%s'\n" "$ZIG" > "$CACHE/toolchain.ini"
export ZIG_GLOBAL_CACHE_DIR=$TOOLS/zig-cache ZIG_LOCAL_CACHE_DIR=$TOOLS/zig-cache
export WINEPREFIX=$CACHE/wine WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="

# Our shared libraries, by base name.
LIBS=(zsampler zrengine zrstore zmrec zloader)
# Exported names allowed in our shared libraries: the prefixed APIs and the
# <lib>_version / <lib>_version_string functions.
EXPORT_OK='^_?(zre_|zrs_|zsm_|zld_|zmr_|zr_|zrengine_version|zrstore_version|zsampler_version|zloader_version|zmrec_version)'
EXPORT_BAD='^_?(ZSTD_|ZDICT_|HUF_|FSE_|mdb_|json_|msgpack_|lh_|array_list_|printbuf_|_cmocka|mock_)'
# DLLs a Windows artifact may import: the system's (UCRT through its
# api-ms-win-crt-* sets, kernel32, advapi32 for json-c's seed) and ours.
DLL_OK='^(kernel32|advapi32|ntdll|bcrypt|ucrtbase|api-ms-win-[a-z0-9-]+|lib(zsampler|zrengine|zrstore|zmrec|zloader)(-[0-9]+)?)\.dll$'

declare -A R_BUILT R_SUITES R_FAILED R_TIME

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
        windows-*) echo "exe $b/tools/zr.exe" ;;
        *) echo "exe $b/tools/zr" ;;
    esac
}

file_pattern() {
    case $1 in
        linux-x64-*) echo 'ELF 64-bit LSB .*x86-64' ;;
        linux-arm64-*) echo 'ELF 64-bit LSB .*ARM aarch64' ;;
        windows-x64) echo 'PE32\+ executable .*x86-64' ;;
        windows-arm64) echo 'PE32\+ executable .*Aarch64' ;;
        macos-x64) echo 'Mach-O 64-bit .*x86_64' ;;
        macos-arm64) echo 'Mach-O 64-bit .*arm64' ;;
    esac
}

# Exported (defined, global) symbol names of shared library $2 for target $1.
exports() {
    case $1 in
        linux-*) llvm-nm -D --defined-only "$2" | awk '{print $NF}' ;;
        # (less the two symbols ld64 defines in every dylib)
        macos-*) llvm-nm -gU "$2" | awk '{print $NF}' | grep -Ev '^(___dso_handle|__mh_dylib_header)$' ;;
        windows-*) llvm-readobj --coff-exports "$2" | sed -n 's/^ *Name: //p' ;;
    esac
}

# Check target $1 (build dir $2); prints failed check names, one a line.
check_target() {
    local t=$1 b=$2 kind f pat bad max
    pat=$(file_pattern "$t")
    while read -r kind f; do
        local name
        name=$(basename "$f")
        if [ -z "$f" ] || [ ! -f "$f" ]; then echo "missing:$kind"; continue; fi
        file -bL "$f" | grep -Eq "$pat" || echo "file:$name"
        case $t in
            linux-*-gnu)
                max=$(llvm-objdump -T "$f" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -1)
                [ -z "$max" ] || [ "$(printf '%s\n2.17\n' "$max" | sort -V | tail -1)" = 2.17 ] \
                    || echo "glibc($max):$name"
                ;;
            macos-*)
                local hdr
                hdr=$(llvm-objdump --macho --private-headers "$f")
                # LC_BUILD_VERSION "minos 11.0" (or LC_VERSION_MIN_MACOSX "version 11.0").
                echo "$hdr" | grep -A4 -E 'LC_BUILD_VERSION|LC_VERSION_MIN_MACOSX' \
                    | grep -Eq '^ *(minos|version) 11\.0$' || echo "minos:$name"
                if [ "$kind" = lib ]; then
                    echo "$hdr" | grep -A3 'cmd LC_ID_DYLIB' | grep -Eq "name @rpath/lib[a-z]+\.[0-9]+\.dylib" \
                        || echo "install-name:$name"
                fi
                # Every dylib of ours it loads is by @rpath, and it has an rpath.
                if echo "$hdr" | grep -A3 'cmd LC_LOAD_DYLIB' | grep -E 'name .*libz' | grep -vq '@rpath/'; then
                    echo "load-path:$name"
                fi
                if [ "$kind" = exe ] || echo "$hdr" | grep -A3 'cmd LC_LOAD_DYLIB' | grep -q '@rpath/'; then
                    echo "$hdr" | grep -q 'cmd LC_RPATH' || echo "rpath:$name"
                fi
                ;;
            windows-*)
                bad=$(llvm-objdump -p "$f" | sed -n 's/^ *DLL Name: //p' | tr 'A-Z' 'a-z' | grep -Ev "$DLL_OK" | tr '\n' ' ')
                [ -z "$bad" ] || echo "imports(${bad% }):$name"
                ;;
        esac
        if [ "$kind" = lib ]; then
            local ex
            ex=$(exports "$t" "$f")
            [ -n "$ex" ] || echo "no-exports:$name"
            if echo "$ex" | grep -Eq "$EXPORT_BAD"; then
                echo "dep-exports:$name"
            elif [ -n "$(echo "$ex" | grep -Ev "$EXPORT_OK" | grep -v '^$')" ]; then
                echo "foreign-exports:$name"
            fi
        fi
    done < <(artifacts "$t" "$b")
}

# Run the C suites of target $1 (build dir $2); sets R_SUITES.
run_suites() {
    local t=$1 b=$2
    rm -f "$b/meson-logs/testlog.json"
    "$MESON" test -C "$b" --suite c --no-rebuild --num-processes "$JOBS" --print-errorlogs \
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
    if [ "$2" -eq 0 ] || [ "$1" -ne "$2" ]; then
        grep -E '^ *[0-9]+/[0-9]+ .*(FAIL|TIMEOUT|ERROR)' "$b/cross-test.log" | sort -u | sed "s/^/cross: $t: /"
        return 1
    fi
}

# Configure target $1 (meson setup is mostly serial compiler checks, so
# the targets configure side by side); leaves its status and seconds in
# $CACHE/setup-$1.rc.
configure_target() {
    local t=$1 b=$CACHE/build/$1 t0 rc=0
    t0=$(date +%s)
    # Stores at URLs need libcurl and a TLS library per target: the cross
    # builds leave them out (docs/PLATFORMS.md), and refuse URLs.
    local opts=(-Dwrap_mode=forcefallback -Dpython=disabled -Dlua=disabled -Dtests=true
                -Dbuildtype=release -Dwerror=true -Dremote=disabled)
    # Our code builds with -Werror; the dependencies' own warnings are theirs.
    for sub in zstd msgpack-c lmdb json-c cmocka zlib; do opts+=(-D$sub:werror=false); done
    [ "$t" = linux-arm64-musl ] && opts+=(-Dlmdb:robust_mutex=false)
    local setup=()
    [ ! -f "$b/build.ninja" ] || setup=(--reconfigure)
    # A dependency's build file changed since this dir was set up (the
    # stamp is from cross_setup.sh): reconfigure.
    if [ ! -f "$b/build.ninja" ] || [ "$CACHE/reconfigure" -nt "$b/build.ninja" ]; then
        "$MESON" setup "${setup[@]}" "$b" --cross-file "$CACHE/toolchain.ini" --cross-file "cross/$t.ini" \
            "${opts[@]}" >"$CACHE/setup-$t.log" 2>&1 || rc=1
    fi
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
    R_FAILED[$t]=""
    if [ $ok = 1 ]; then
        if [[ " $RUN " == *" $t "* ]] && [[ " $RUNNABLE " == *" $t "* ]]; then
            run_suites "$t" "$b" || status=1
        fi
        R_FAILED[$t]=$(check_target "$t" "$b" | tr '\n' ' ')
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
printf '%-18s %-6s %-14s %-14s %s\n' target built suites time failed-checks
printf '%-18s %-6s %-14s %-14s %s\n' ------ ----- ------ ---- -------------
for t in "${targets[@]}"; do
    printf '%-18s %-6s %-14s %-14s %s\n' "$t" "${R_BUILT[$t]}" "${R_SUITES[$t]}" "${R_TIME[$t]}" \
        "${R_FAILED[$t]:-none}"
done
[ $status = 0 ] && echo "cross: all targets passed" || echo "cross: FAILED"
exit $status
