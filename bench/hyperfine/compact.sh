#!/usr/bin/env bash
# zr compact of the dense vision stores after deleting every third record
# (the copy and the delete are hyperfine's untimed --prepare).
. "$(dirname "$0")/_common.sh"
PY=${PYTHON:-python3}
"$PY" - "$WORK" <<'PY'
import os, sys, json, subprocess
import numpy as np
work = sys.argv[1]
n = json.loads(subprocess.run([os.environ.get("ZR", "zr"), "info", "--json",
                               os.path.join(work, "store-raw")],
                              capture_output=True, check=True).stdout)["records"]
m = np.zeros(n, bool)
m[::3] = True
np.save(os.path.join(work, "delete-mask.npy"), m)
PY
prep() { echo "rm -rf $WORK/compacted && cp -r $WORK/store-$1 $WORK/compacted && $ZR delete $WORK/compacted --mask $WORK/delete-mask.npy"; }
"${HF[@]}" \
  -n "zr compact (raw, 1/3 deleted)" --prepare "$(prep raw)" "$ZR compact -q $WORK/compacted" \
  -n "zr compact (zstd, 1/3 deleted)" --prepare "$(prep zstd)" "$ZR compact -q $WORK/compacted"
rm -rf "$WORK/compacted" "$WORK/delete-mask.npy"
