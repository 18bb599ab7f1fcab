"""Build the small stores of the cross-language determinism cases
(cases.txt) into the directory given: label (int64) and x (float32 [3]) of
N records, their 3-shard split (label.shard0..2, x.shard0..2), two mixture
sources (srcA.*, srcB.*), ragged documents tokens (int32) and mask (uint8,
aligned with tokens), and lengths.u32 (one uint32 length per record, for
bucketing)."""

import os
import sys

import numpy as np

from loaderx.zrecord import DenseStore, RaggedStore

N = 40
DOCS = 30


def dense(path, dtype, shape, values):
    with DenseStore.create(path, dtype, shape, codec="zstd") as s:
        s.append(np.ascontiguousarray(values, dtype=dtype).reshape((-1,) + shape))


def pair(out, prefix, first, n):
    i = np.arange(first, first + n)
    dense(os.path.join(out, prefix + "label"), "int64", (), i * 7 - 3)
    dense(os.path.join(out, prefix + "x"), "float32", (3,),
          np.stack([i * 0.5, -i, i * i / 3.0], axis=1))


def main(out):
    os.makedirs(out, exist_ok=True)
    pair(out, "", 0, N)
    for k, (first, n) in enumerate([(0, 13), (13, 14), (27, 13)]):
        i = np.arange(first, first + n)
        dense(os.path.join(out, f"label.shard{k}"), "int64", (), i * 7 - 3)
        dense(os.path.join(out, f"x.shard{k}"), "float32", (3,),
              np.stack([i * 0.5, -i, i * i / 3.0], axis=1))
    pair(out, "srcA.", 100, 25)
    pair(out, "srcB.", 500, 9)
    lens = [(d * 37) % 23 + (40 if d % 7 == 3 else 0) for d in range(DOCS)]
    with RaggedStore.create(os.path.join(out, "tokens"), "int32") as s:
        s.append([np.arange(d * 1000, d * 1000 + n, dtype=np.int32) for d, n in enumerate(lens)])
    with RaggedStore.create(os.path.join(out, "mask"), "uint8", codec="raw") as s:
        s.append([((d + np.arange(n)) % 3 == 0).astype(np.uint8) for d, n in enumerate(lens)])
    lengths = np.array([(i * 37) % 61 for i in range(N)], dtype="<u4")
    with open(os.path.join(out, "lengths.u32"), "wb") as f:
        f.write(lengths.tobytes())


if __name__ == "__main__":
    main(sys.argv[1])
