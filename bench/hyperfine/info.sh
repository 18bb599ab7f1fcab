#!/usr/bin/env bash
# zr info on the dense vision stores (raw and zstd).
. "$(dirname "$0")/_common.sh"
"${HF[@]}" -n "zr info (raw)" "$ZR info $WORK/store-raw" -n "zr info (zstd)" "$ZR info $WORK/store-zstd"
