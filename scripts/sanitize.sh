#!/usr/bin/env bash
# Sanitizer lanes: the C suites under AddressSanitizer + UndefinedBehavior-
# Sanitizer, and the engine and loader suites (the threaded code) under
# ThreadSanitizer. Each lane has its own build directory; any report fails
# the run. Called from .ci/run; takes a few minutes on two cores.
#
#   bash scripts/sanitize.sh            # both lanes
#   bash scripts/sanitize.sh asan       # one lane (asan | tsan)
set -euo pipefail
cd "$(dirname "$0")/.."
lanes=("$@")
[ ${#lanes[@]} -gt 0 ] || lanes=(asan tsan)
common=(-Dpython=disabled -Dlua=disabled -Dbuildtype=debugoptimized -Db_lundef=false)

# liblmdb builds from source (subprojects/lmdb.wrap): its tarball first.
bash scripts/dep_sources.sh lmdb
setup() { # dir, sanitize, extra c_args
    if [ ! -f "$1/build.ninja" ]; then
        meson setup "$1" "${common[@]}" -Db_sanitize="$2" -Dc_args="$3" >/dev/null
    fi
    meson compile -C "$1" >/dev/null
}

for lane in "${lanes[@]}"; do
    case "$lane" in
    asan)
        setup build-asan address,undefined "-fno-sanitize-recover=undefined -fno-omit-frame-pointer"
        ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
            meson test -C build-asan --suite c --print-errorlogs --num-processes 2
        ;;
    tsan)
        setup build-tsan thread "-fno-omit-frame-pointer"
        TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
            meson test -C build-tsan --suite c engine engine_smallgeom engine_nomap loader resume gather packload \
            --print-errorlogs --num-processes 2
        ;;
    *)
        echo "sanitize: unknown lane '$lane' (asan or tsan)" >&2
        exit 2
        ;;
    esac
done
