"""HDF5 through h5py: raw (contiguous) and gzip (chunked, ~128 KiB chunks).
Dense: one (N, *shape) dataset, read with an increasing fancy selection
(h5py's rule) and reordered when raw, one read_direct per record when
chunked (h5py's point selections are slow there). Ragged: a flat payload dataset plus offsets
and shapes, one slice read per record."""
import os

import numpy as np

from common import Backend, flat_ragged, sorted_unique

CHUNK = 128 << 10


class Hdf5(Backend):
    requires = ("h5py",)

    def __init__(self, gzip):
        self.gzip = gzip
        self.compressed = gzip
        self.name = "hdf5-gzip" if gzip else "hdf5-raw"

    def _opts(self, shape, itemsize, per_record):
        if not self.gzip:
            return {}
        if per_record:
            rows = max(1, CHUNK // (int(np.prod(shape[1:])) * itemsize))
            chunks = (min(rows, shape[0]),) + tuple(shape[1:])
        else:
            chunks = (min(shape[0], CHUNK // itemsize),)
        return {"chunks": chunks, "compression": "gzip", "compression_opts": 4}

    def write(self, path, wl):
        import h5py
        with h5py.File(os.path.join(path, "data.h5"), "w") as f:
            if wl.kind == "dense":
                f.create_dataset("x", data=wl.data,
                                 **self._opts(wl.data.shape, wl.dtype.itemsize, True))
            else:
                flat, offsets, shapes = flat_ragged(wl.data)
                f.create_dataset("flat", data=flat,
                                 **self._opts(flat.shape, flat.dtype.itemsize, False))
                f.create_dataset("offsets", data=offsets)
                f.create_dataset("shapes", data=shapes)

    def open(self, path, wl):
        import h5py
        self.kind = wl.kind
        self.f = h5py.File(os.path.join(path, "data.h5"), "r")
        if wl.kind == "dense":
            self.x = self.f["x"]
        else:
            self.x = self.f["flat"]
            self.off = self.f["offsets"][:].tolist()
            self.shapes = [tuple(s) for s in self.f["shapes"][:].tolist()]

    def gather(self, idx):
        if self.kind == "dense":
            if not self.gzip:
                uniq, inv = sorted_unique(idx)
                return self.x[uniq][inv]
            # A point selection over a chunked dataset is far slower in
            # h5py than one read per record.
            out = np.empty((len(idx),) + self.x.shape[1:], dtype=self.x.dtype)
            for j, i in enumerate(idx.tolist()):
                self.x.read_direct(out, np.s_[i], np.s_[j])
            return out
        x, off, shapes = self.x, self.off, self.shapes
        return [x[off[i]:off[i + 1]].reshape(shapes[i]) for i in idx.tolist()]

    def close(self):
        self.f.close()


BACKENDS = [lambda: Hdf5(False), lambda: Hdf5(True)]
