#!/usr/bin/env bash
# zr verify (every record read and checked) on the dense vision stores.
. "$(dirname "$0")/_common.sh"
"${HF[@]}" -n "zr verify (raw)" "$ZR verify $WORK/store-raw" \
           -n "zr verify (zstd)" "$ZR verify $WORK/store-zstd"
