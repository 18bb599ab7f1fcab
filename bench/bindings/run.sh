#!/usr/bin/env bash
# bench/bindings/run.sh - binding overhead, one run (a benchmark, not a test).
#
# 1. Gather of 256 random 147 KiB records (224x224x3 uint8) from one dense
#    store through C, Lua and Go: same store, same index plan, one reused
#    destination buffer each; reports seconds per gather and the ratio of
#    each binding's throughput to C's (goal: >= 0.9).
# 2. Per-call cost of a 1-record gather (64-byte records) in C, Lua, Go and
#    Python (store[i] and the raw SWIG call).
#
# Needs the installed libraries (scripts/setup.sh), lua5.4, go, python3.
# Environment: WORK (scratch dir, default a fresh mktemp -d, removed at the
# end), N (records, 1024), ROUNDS (100), CODEC (raw), CALLS (1-record
# gathers, 100000), LUA_CPATH as usual.
set -euo pipefail
cd "$(dirname "$0")"
HERE=$PWD
WORK=${WORK:-$(mktemp -d)}
N=${N:-1024}
ROUNDS=${ROUNDS:-100}
CODEC=${CODEC:-raw}
CALLS=${CALLS:-100000}
REC=150528          # 224 * 224 * 3 = 147 KiB
trap 'rm -rf "$WORK/store" "$WORK/small"' EXIT

cc -O2 -std=c11 -o "$WORK/gather_c" gather_c.c $(pkg-config --cflags --libs zloader)
(cd go && go build -o "$WORK/zrbench" .)

echo "# store: $N records of $REC bytes, codec $CODEC; $ROUNDS gathers of 256"
lua5.4 make_store.lua "$WORK/store" "$N" "$REC" "$CODEC"
lua5.4 make_plan.lua "$N" 256 "$ROUNDS" 42 > "$WORK/plan"
# read the store once so every language starts from a warm page cache
cat "$WORK"/store/*.chunk > /dev/null

# five passes in turn (C, Lua, Go, C, Lua, Go, ...); each keeps its best pass
for pass in 1 2 3 4 5; do
  "$WORK/gather_c" "$WORK/store" "$WORK/plan" "$ROUNDS"
  lua5.4 gather.lua "$WORK/store" "$WORK/plan" "$ROUNDS"
  "$WORK/zrbench" "$WORK/store" "$WORK/plan" "$ROUNDS"
done | awk '
  { if (!($1 in per) || $4 < per[$1]) { per[$1] = $4; mbs[$1] = $5 }
    if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 } }
  END {
    printf "%-12s %12s %10s %8s\n", "binding", "ms/gather", "MB/s", "vs C"
    for (i = 1; i <= n; i++)
      printf "%-12s %12.3f %10.1f %8.3f\n", order[i], per[order[i]] * 1e3, mbs[order[i]], per["c"] / per[order[i]]
  }'

echo "# 1-record gathers: 10000 records of 64 bytes, $CALLS calls"
lua5.4 make_store.lua "$WORK/small" 10000 64 raw
lua5.4 make_plan.lua 10000 1 "$CALLS" 7 > "$WORK/plan1"
{
  "$WORK/gather_c" "$WORK/small" "$WORK/plan1" "$CALLS"
  lua5.4 gather.lua "$WORK/small" "$WORK/plan1" "$CALLS"
  "$WORK/zrbench" "$WORK/small" "$WORK/plan1" "$CALLS"
  python3 py_overhead.py "$WORK/small" "$WORK/plan1" "$CALLS"
} | awk '
  { name[NR] = $1; per[NR] = $4 }
  END {
    printf "%-16s %12s %14s\n", "binding", "us/call", "over C (us)"
    for (i = 1; i <= NR; i++)
      printf "%-16s %12.3f %14.3f\n", name[i], per[i] * 1e6, (per[i] - per[1]) * 1e6
  }'
