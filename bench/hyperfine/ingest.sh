#!/usr/bin/env bash
# zr ingest of the dense vision .npy into a new store, raw and zstd; and of
# Fashion-MNIST's own gzipped IDX training images when the Debian package
# dataset-fashion-mnist is installed.
. "$(dirname "$0")/_common.sh"
IDX=/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz
extra=()
[ -f "$IDX" ] && extra=(-n "zr ingest (Fashion-MNIST IDX.gz, zstd)" "$ZR ingest -q $IDX $WORK/ingested")
"${HF[@]}" --prepare "rm -rf $WORK/ingested" \
  -n "zr ingest --codec raw" "$ZR ingest -q $WORK/data.npy $WORK/ingested --codec raw" \
  -n "zr ingest --codec zstd" "$ZR ingest -q $WORK/data.npy $WORK/ingested --codec zstd" \
  "${extra[@]}"
rm -rf "$WORK/ingested"
