#!/usr/bin/env bash
# zr export of the dense vision stores to a .npy (every record read through
# the public gather contract, written in slices).
. "$(dirname "$0")/_common.sh"
"${HF[@]}" --prepare "rm -f $WORK/exported.npy" \
  -n "zr export (raw)" "$ZR export -q $WORK/store-raw -o $WORK/exported.npy" \
  -n "zr export (zstd)" "$ZR export -q $WORK/store-zstd -o $WORK/exported.npy"
rm -f "$WORK/exported.npy"
