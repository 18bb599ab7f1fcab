#!/usr/bin/env bash
# The C gather program (bench/c/gather_bench.c): 50 random batches of 256.
. "$(dirname "$0")/_common.sh"
GATHER_BENCH=${GATHER_BENCH:?set GATHER_BENCH to the built bench/c/gather_bench}
"${HF[@]}" -n "gather_bench (raw)" "$GATHER_BENCH $WORK/store-raw 256 50" \
           -n "gather_bench (zstd)" "$GATHER_BENCH $WORK/store-zstd 256 50"
