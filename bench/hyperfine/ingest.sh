#!/usr/bin/env bash
# zr ingest of the dense vision .npy into a new store, raw and zstd.
. "$(dirname "$0")/_common.sh"
"${HF[@]}" --prepare "rm -rf $WORK/ingested" \
  -n "zr ingest --codec raw" "$ZR ingest $WORK/data.npy $WORK/ingested --codec raw" \
  -n "zr ingest --codec zstd" "$ZR ingest $WORK/data.npy $WORK/ingested --codec zstd"
rm -rf "$WORK/ingested"
