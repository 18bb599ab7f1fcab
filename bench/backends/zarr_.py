"""Zarr v3 arrays, chunks of about 128 KiB (one image; a few token
blocks): through the zarr package (raw, zstd level 3; orthogonal integer
selection) and through tensorstore's zarr3 driver (zstd level 3; an index
array on the first dimension). Dense workloads only: zarr has no ragged
record type a user would pick."""
import os

import numpy as np

from common import Backend, CodecBackend

CHUNK = 128 << 10


def _chunks(wl):
    return (max(1, min(wl.n, CHUNK // wl.data[0].nbytes)),) + wl.data.shape[1:]


def _batches(wl):
    rows = _chunks(wl)[0]
    step = max(rows, ((64 << 20) // wl.data[0].nbytes) // rows * rows)
    return [(lo, min(wl.n, lo + step)) for lo in range(0, wl.n, step)]


class Zarr(CodecBackend):
    family = "zarr"
    kinds = ("dense",)
    requires = ("zarr",)


    def write(self, path, wl):
        import zarr
        from zarr.codecs import ZstdCodec
        arr = zarr.create_array(store=os.path.join(path, "z"), shape=wl.data.shape,
                                chunks=_chunks(wl), dtype=wl.dtype,
                                compressors=[ZstdCodec(level=3)] if self.compressed else None,
                                fill_value=0)
        for lo, hi in _batches(wl):
            arr[lo:hi] = wl.data[lo:hi]

    def open(self, path, wl):
        import zarr
        self.a = zarr.open_array(os.path.join(path, "z"), mode="r")

    def gather(self, idx):
        return self.a.get_orthogonal_selection((idx,))

    def close(self):
        self.a = None


class TensorstoreZarr3(Backend):
    name = "tensorstore-zarr3-zstd"
    kinds = ("dense",)
    requires = ("tensorstore",)
    compressed = True

    def _spec(self, path, wl=None):
        spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": os.path.join(path, "t")}}
        if wl is not None:
            spec["metadata"] = {
                "shape": list(wl.data.shape), "data_type": wl.dtype.name,
                "chunk_grid": {"name": "regular",
                               "configuration": {"chunk_shape": list(_chunks(wl))}},
                "codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                           {"name": "zstd", "configuration": {"level": 3}}]}
            spec["create"] = True
        return spec

    def write(self, path, wl):
        import tensorstore as ts
        arr = ts.open(self._spec(path, wl)).result()
        for lo, hi in _batches(wl):
            arr[lo:hi].write(wl.data[lo:hi]).result()

    def open(self, path, wl):
        import tensorstore as ts
        self.a = ts.open(self._spec(path), open=True, read=True).result()

    def gather(self, idx):
        return self.a[idx].read().result()

    def close(self):
        self.a = None


BACKENDS = [lambda: Zarr("raw"), lambda: Zarr("zstd"), TensorstoreZarr3]
