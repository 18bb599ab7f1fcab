"""ArrayRecord through array-record's Python module: one record per entry
(dense: the raw bytes; ragged: shape prefix + payload), group_size:1 so
each record is its own compression group; raw (uncompressed) and zstd.
Gather is ArrayRecordReader.read(indices) (parallel reads, in order)."""
import os

from common import CodecBackend, dense_from_bytes, pack_record, unpack_record


class ArrayRecord(CodecBackend):
    family = "arrayrecord"
    requires = ("array_record.python.array_record_module",)


    def write(self, path, wl):
        from array_record.python.array_record_module import ArrayRecordWriter
        opts = ("uncompressed" if self.codec == "raw" else "zstd:3") + ",group_size:1"
        w = ArrayRecordWriter(os.path.join(path, "data.array_record"), opts)
        dense = wl.kind == "dense"
        for i in range(wl.n):
            w.write(wl.data[i].tobytes() if dense else pack_record(wl.data[i]))
        w.close()

    def open(self, path, wl):
        from array_record.python.array_record_module import ArrayRecordReader
        self.wl = wl
        self.r = ArrayRecordReader(os.path.join(path, "data.array_record"),
                                   "readahead_buffer_size:0")

    def gather(self, idx):
        wl = self.wl
        recs = self.r.read(idx.tolist())
        if wl.kind == "dense":
            return dense_from_bytes(recs, wl)
        return [unpack_record(v, wl.dtype) for v in recs]

    def close(self):
        self.r.close()


BACKENDS = [lambda: ArrayRecord("raw"), lambda: ArrayRecord("zstd")]
