"""TileDB through tiledb-py: raw and zstd (level 3) filters, tiles of about
128 KiB. Dense: a 2-D dense array (record, element) read with a multi-point
multi_index over the sorted unique indices, then reordered. Ragged: a 1-D
dense payload array plus offsets and shapes (.npy sidecars), one
multi-range read per batch."""
import os

import numpy as np

from common import CodecBackend, flat_ragged, sorted_unique

TILE = 128 << 10


class TileDB(CodecBackend):
    family = "tiledb"
    requires = ("tiledb",)


    def _filters(self):
        import tiledb
        return tiledb.FilterList([tiledb.ZstdFilter(level=3)] if self.compressed else [])

    def write(self, path, wl):
        import tiledb
        uri = os.path.join(path, "array")
        item = wl.dtype.itemsize
        if wl.kind == "dense":
            width = int(np.prod(wl.data.shape[1:]))
            rows = max(1, TILE // (width * item))
            dims = [tiledb.Dim("r", domain=(0, wl.n - 1), tile=min(rows, wl.n), dtype=np.int64),
                    tiledb.Dim("e", domain=(0, width - 1), tile=width, dtype=np.int64)]
            src = wl.data.reshape(wl.n, width)
        else:
            src, offsets, shapes = flat_ragged(wl.data)
            np.save(os.path.join(path, "offsets.npy"), offsets)
            np.save(os.path.join(path, "shapes.npy"), shapes)
            dims = [tiledb.Dim("e", domain=(0, src.size - 1), tile=TILE // item, dtype=np.int64)]
        schema = tiledb.ArraySchema(domain=tiledb.Domain(*dims), sparse=False,
                                    attrs=[tiledb.Attr("x", dtype=wl.dtype,
                                                       filters=self._filters())])
        tiledb.Array.create(uri, schema)
        with tiledb.open(uri, "w") as A:
            step = max(1, (64 << 20) // max(1, src[:1].nbytes)) if src.ndim == 2 else src.size
            for lo in range(0, len(src), step):
                A[lo:lo + step] = src[lo:lo + step]

    def open(self, path, wl):
        import tiledb
        self.wl = wl
        self.A = tiledb.open(os.path.join(path, "array"), "r")
        if wl.kind == "ragged":
            self.off = np.load(os.path.join(path, "offsets.npy"))
            self.shapes = [tuple(s) for s in np.load(os.path.join(path, "shapes.npy")).tolist()]

    def gather(self, idx):
        uniq, inv = sorted_unique(idx)
        wl = self.wl
        if wl.kind == "dense":
            x = self.A.multi_index[uniq.tolist(), :]["x"]
            return x.reshape((len(uniq),) + wl.data.shape[1:])[inv]
        lo, hi = self.off[uniq], self.off[uniq + 1]
        flat = self.A.multi_index[list(zip(lo.tolist(), (hi - 1).tolist()))]["x"]
        ends = np.cumsum(hi - lo)
        parts = np.split(flat, ends[:-1])
        return [parts[k].reshape(self.shapes[i]).copy() for k, i in zip(inv.tolist(), idx.tolist())]

    def close(self):
        self.A.close()


BACKENDS = [lambda: TileDB("raw"), lambda: TileDB("zstd")]
