"""Apache Arrow through pyarrow: IPC files (raw, zstd) and Parquet (raw,
zstd). Records are one binary column (fixed_size_binary when dense) plus
one int64 column per dimension when ragged, in record batches / row groups
of about 256 KiB. A gather reads the batches / row groups its indices touch
(IPC through a memory map), concatenates them and takes the rows."""
import os

import numpy as np

from common import CodecBackend

GROUP = 256 << 10


def _table(wl, lo, hi):
    import pyarrow as pa
    if wl.kind == "dense":
        k = wl.data[0].nbytes
        buf = pa.py_buffer(np.ascontiguousarray(wl.data[lo:hi]).reshape(-1).view(np.uint8))
        col = pa.FixedSizeBinaryArray.from_buffers(pa.binary(k), hi - lo, [None, buf])
        return pa.record_batch([col], names=["data"])
    recs = wl.data[lo:hi]
    sizes = np.array([a.nbytes for a in recs], dtype=np.int32)
    off = np.zeros(len(recs) + 1, dtype=np.int32)
    np.cumsum(sizes, out=off[1:])
    payload = np.concatenate([a.reshape(-1).view(np.uint8) for a in recs])
    col = pa.BinaryArray.from_buffers(pa.binary(), len(recs),
                                      [None, pa.py_buffer(off), pa.py_buffer(payload)])
    dims = np.array([a.shape for a in recs], dtype=np.int64)
    cols = [col] + [pa.array(dims[:, d]) for d in range(dims.shape[1])]
    return pa.record_batch(cols, names=["data"] + [f"d{d}" for d in range(dims.shape[1])])


def _groups(wl):
    """Row ranges of about GROUP bytes each (a new group starts where the
    running byte count crosses a multiple of GROUP)."""
    ids = (np.cumsum(wl.record_bytes) - 1) // GROUP
    bounds = [0] + (np.flatnonzero(np.diff(ids)) + 1).tolist() + [wl.n]
    return list(zip(bounds[:-1], bounds[1:]))


def _decode(table, wl):
    """Records of a taken table, in row order."""
    col = table.column("data").combine_chunks()
    bufs = col.buffers()
    n = len(col)
    if wl.kind == "dense":
        k = wl.data[0].nbytes
        raw = np.frombuffer(bufs[1], dtype=np.uint8, count=n * k, offset=col.offset * k)
        return raw.view(wl.dtype).reshape((n,) + wl.data.shape[1:]).copy()
    off = np.frombuffer(bufs[1], dtype=np.int32, count=n + 1, offset=4 * col.offset).tolist()
    data = np.frombuffer(bufs[2], dtype=np.uint8)
    ndim = table.num_columns - 1
    dims = [table.column(f"d{d}").to_numpy() for d in range(ndim)]
    shapes = list(zip(*[d.tolist() for d in dims]))
    return [data[off[j]:off[j + 1]].view(wl.dtype).reshape(shapes[j]).copy() for j in range(n)]


class _Grouped(CodecBackend):
    """Shared gather over fixed row groups: subclasses read groups."""
    requires = ("pyarrow",)

    def open(self, path, wl):
        self.wl = wl
        bounds = [lo for lo, _hi in _groups(wl)] + [wl.n]
        self.starts = np.array(bounds, dtype=np.int64)
        self._open(path)

    def gather(self, idx):
        import pyarrow as pa
        g = np.searchsorted(self.starts, idx, side="right") - 1
        need, inv = np.unique(g, return_inverse=True)
        table = self._read(need.tolist())
        base = np.zeros(len(need), dtype=np.int64)
        sizes = (self.starts[need + 1] - self.starts[need])
        np.cumsum(sizes[:-1], out=base[1:])
        pos = base[inv] + (idx - self.starts[g])
        return _decode(table.take(pa.array(pos)), self.wl)


class ArrowIpc(_Grouped):
    family = "arrow-ipc"

    def write(self, path, wl):
        import pyarrow as pa
        opts = pa.ipc.IpcWriteOptions(compression=None if self.codec == "raw" else "zstd")
        first = _table(wl, 0, 1)
        with pa.OSFile(os.path.join(path, "data.arrow"), "wb") as sink:
            with pa.ipc.new_file(sink, first.schema, options=opts) as w:
                for lo, hi in _groups(wl):
                    w.write_batch(_table(wl, lo, hi))

    def _open(self, path):
        import pyarrow as pa
        self.src = pa.memory_map(os.path.join(path, "data.arrow"), "r")
        self.reader = pa.ipc.open_file(self.src)

    def _read(self, groups):
        import pyarrow as pa
        return pa.Table.from_batches([self.reader.get_batch(b) for b in groups])

    def close(self):
        self.reader = None
        self.src.close()


class Parquet(_Grouped):
    family = "parquet"

    def write(self, path, wl):
        import pyarrow.parquet as pq
        first = _table(wl, 0, 1)
        with pq.ParquetWriter(os.path.join(path, "data.parquet"), first.schema,
                              compression="none" if self.codec == "raw" else "zstd",
                              use_dictionary=False, write_statistics=False) as w:
            for lo, hi in _groups(wl):
                w.write_batch(_table(wl, lo, hi), row_group_size=hi - lo)

    def _open(self, path):
        import pyarrow.parquet as pq
        self.pf = pq.ParquetFile(os.path.join(path, "data.parquet"), memory_map=True)

    def _read(self, groups):
        return self.pf.read_row_groups(groups, use_threads=True)

    def close(self):
        self.pf.close()


BACKENDS = [lambda: ArrowIpc("raw"), lambda: ArrowIpc("zstd"),
            lambda: Parquet("raw"), lambda: Parquet("zstd")]
