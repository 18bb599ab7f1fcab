"""py_overhead.py STORE PLAN ROUNDS: Python's cost per 1-record gather.

Prints "python-getitem <batch> <record_bytes> <s per call> <MB/s>" for
store[i] (the public API: index normalisation, a fresh ndarray) and
"python-raw ..." for the SWIG call into a preallocated array, on the same
store and plan as the C reference (gather_c)."""
import sys
import time

import numpy as np
from loaderx import zrecord, _zr

store, plan, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
batches = [np.array(line.split(), dtype=np.int64) for line in open(plan)]
s = zrecord.DenseStore.open(store)
rs = int(np.prod(s.item_shape)) * s.dtype.itemsize
ints = [int(b[0]) for b in batches]
s[ints[0]]
t0 = time.perf_counter()
for r in range(rounds):
    s[ints[r]]
per = (time.perf_counter() - t0) / rounds
print(f"python-getitem 1 {rs} {per:.9f} {rs / per / 1e6:.1f}")
h = s._handle()
dst = np.empty(rs, np.uint8)
t0 = time.perf_counter()
for r in range(rounds):
    _zr.zrs_gather_dense(h, batches[r], dst)
per = (time.perf_counter() - t0) / rounds
print(f"python-raw 1 {rs} {per:.9f} {rs / per / 1e6:.1f}")
s.close()
