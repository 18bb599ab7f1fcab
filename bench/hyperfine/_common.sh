# Sourced by the hyperfine scripts: WORK (dir prepared by bench/run.py:
# data.npy, store-raw/, store-zstd/), OUT (JSON export path), ZR and
# GATHER_BENCH (binaries), RUNS (timed runs, default 10).
set -euo pipefail
WORK=${1:?usage: $0 WORKDIR OUT.json}
OUT=${2:?usage: $0 WORKDIR OUT.json}
ZR=${ZR:-zr}
RUNS=${RUNS:-10}
HF=(hyperfine --style none --warmup 1 --runs "$RUNS" --export-json "$OUT")
