#!/usr/bin/env bash
# Build the libFuzzer harnesses (tests/fuzz) with clang, ASan and UBSan,
# then run each one on its committed seed corpus for a bounded time.
#
#   bash scripts/fuzz.sh                 # every harness, FUZZ_SECONDS each
#   FUZZ_SECONDS=600 bash scripts/fuzz.sh fuzz_store
#
# Environment: FUZZ_SECONDS (default 20), FUZZ_BUILD_DIR (build-fuzz). New
# inputs go to $FUZZ_BUILD_DIR/corpus/<name>, never into the committed
# seeds. Prints each harness's executions; exits non-zero on a crash.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${FUZZ_SECONDS:-20}
B=${FUZZ_BUILD_DIR:-build-fuzz}
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo

# clang and its runtime (libFuzzer, sanitizers) from Debian.
missing=()
for p in clang-14 libclang-rt-14-dev; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "fuzz: installing Debian packages: ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# liblmdb builds from source (subprojects/lmdb.wrap): its tarball first.
bash scripts/dep_sources.sh lmdb
if [ ! -f "$B/build.ninja" ]; then
    CC=clang-14 meson setup "$B" -Dfuzz=true -Dtests=false -Dpython=disabled -Dlua=disabled \
        -Dbuildtype=debugoptimized -Db_sanitize=address,undefined -Db_lundef=false \
        -Dc_args="-fsanitize=fuzzer-no-link -fno-sanitize-recover=undefined" >/dev/null
fi
meson compile -C "$B" fuzz_store fuzz_identity fuzz_mrf1 fuzz_mrec_lmdb >/dev/null

targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_store fuzz_identity fuzz_mrf1 fuzz_mrec_lmdb)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
for t in "${targets[@]}"; do
    work="$B/corpus/$t"
    mkdir -p "$work"
    log="$B/$t.log"
    set +e
    # Every harness fails on any crash, fuzz_mrec_lmdb included: a damaged
    # file is an error wherever it is met, inside liblmdb too.
    "$B/tests/fuzz/$t" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 \
        -max_len=65536 -print_final_stats=1 \
        -artifact_prefix="$B/$t-" "$work" "tests/fuzz/corpus/$t" >"$log" 2>&1
    rc=$?
    execs=$(grep -h "stat::number_of_executed_units" "$log" fuzz-*.log 2>/dev/null | awk '{s += $2} END {print s + 0}')
    set -e
    if [ $rc -ne 0 ]; then
        echo "fuzz: $t FAILED after $execs executions (see $log)" >&2
        tail -40 "$log" >&2
        status=1
    else
        echo "fuzz: $t ok, $execs executions in ${SECONDS_EACH}s"
    fi
done
exit $status
