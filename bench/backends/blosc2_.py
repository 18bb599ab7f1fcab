"""Blosc2 NDArray (zstd codec, clevel 5, byte shuffle), chunks of about
128 KiB (one image; a few token blocks), persisted to a .b2nd file; gather
is NDArray fancy indexing. Dense workloads only: blosc2 has no ragged
record container a user would pick."""
import os

import numpy as np

from common import Backend

CHUNK = 128 << 10


class Blosc2(Backend):
    name = "blosc2-zstd"
    kinds = ("dense",)
    requires = ("blosc2",)
    compressed = True

    def write(self, path, wl):
        import blosc2
        rows = max(1, CHUNK // wl.data[0].nbytes)
        chunks = (min(rows, wl.n),) + wl.data.shape[1:]
        cparams = blosc2.CParams(codec=blosc2.Codec.ZSTD, clevel=5)
        arr = blosc2.empty(wl.data.shape, dtype=wl.dtype, chunks=chunks,
                           urlpath=os.path.join(path, "data.b2nd"), mode="w", cparams=cparams)
        step = max(rows, ((64 << 20) // wl.data[0].nbytes) // rows * rows)
        for lo in range(0, wl.n, step):
            arr[lo:lo + step] = wl.data[lo:lo + step]
        del arr

    def open(self, path, wl):
        import blosc2
        self.a = blosc2.open(os.path.join(path, "data.b2nd"), mode="r")

    def gather(self, idx):
        return np.asarray(self.a[idx])

    def close(self):
        self.a = None


BACKENDS = [Blosc2]
