"""This project's stores through the Python binding: raw, zstd and
zstd_dict (dictionary trained on the data with loaderx.utils.train_dict)."""
import os

import numpy as np

from common import Backend


class Zrecord(Backend):
    requires = ("loaderx.zrecord",)

    def __init__(self, codec, tier=None, only=None):
        self.codec, self.tier = codec, tier
        self.only = only
        self.name = "zrecord-" + codec.replace("_", "") + (f"-{tier}" if tier else "")
        self.compressed = codec != "raw"

    def write(self, path, wl):
        from loaderx.utils import train_dict
        from loaderx.zrecord import DenseStore, RaggedStore
        d = train_dict(wl.data, self.tier) if self.codec == "zstd_dict" else None
        p = os.path.join(path, "store")
        if wl.kind == "dense":
            with DenseStore.create(p, wl.dtype, wl.data.shape[1:], codec=self.codec,
                                   dict_bytes=d) as s:
                step = max(1, (64 << 20) // wl.data[0].nbytes)
                for lo in range(0, wl.n, step):
                    s.append(wl.data[lo:lo + step])
        else:
            with RaggedStore.create(p, wl.dtype, codec=self.codec, dict_bytes=d) as s:
                for lo in range(0, wl.n, 4096):
                    s.append(wl.data[lo:lo + 4096])

    def open(self, path, wl):
        from loaderx.zrecord import open_store
        self.s = open_store(os.path.join(path, "store"), readonly=True)

    def gather(self, idx):
        return self.s[idx]

    def close(self):
        self.s.close()


class ZrecordOut(Zrecord):
    """store.gather(idx, out=buf) into one destination the caller reuses
    across batches (reallocated only when the batch shape changes)."""

    kinds = ("dense",)

    def __init__(self, codec, only=None):
        super().__init__(codec, only=only)
        self.name += "-out"
        self.out = None

    def gather(self, idx):
        shape = (len(idx),) + self.s.item_shape
        if self.out is None or self.out.shape != shape:
            self.out = np.empty(shape, self.s.dtype)
        return self.s.gather(idx, out=self.out)

    def close(self):
        self.out = None
        super().close()


# zstd_dict (level 19) writes at a few MiB/s: it runs on the token
# workloads, where small records make a dictionary matter, to keep the
# full run near 20 minutes.
BACKENDS = [lambda: Zrecord("zstd"),
            lambda: Zrecord("zstd_dict", "balanced", only=("token_blocks", "token_ragged")),
            lambda: Zrecord("raw"),
            lambda: ZrecordOut("raw", only=("vision_dense", "token_blocks", "small_rows"))]
