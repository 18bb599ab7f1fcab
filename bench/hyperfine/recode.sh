#!/usr/bin/env bash
# zr recode between codecs of the dense vision stores (public read and
# append contracts, bounded slices). zstd_dict (level 19) is left out: on a
# store this size one run takes minutes.
. "$(dirname "$0")/_common.sh"
"${HF[@]}" --prepare "rm -rf $WORK/recoded" \
  -n "zr recode raw -> zstd" "$ZR recode -q $WORK/store-raw $WORK/recoded --codec zstd" \
  -n "zr recode zstd -> raw" "$ZR recode -q $WORK/store-zstd $WORK/recoded --codec raw"
rm -rf "$WORK/recoded"
