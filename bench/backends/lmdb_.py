"""LMDB through py-lmdb: key = 8-byte big-endian record index, value = the
record bytes (ragged: shape prefix + payload). Gather is one read
transaction and Cursor.getmulti over the batch's keys."""
import os

from common import Backend, dense_from_bytes, pack_record, unpack_record


class Lmdb(Backend):
    name = "lmdb-raw"
    requires = ("lmdb",)

    def write(self, path, wl):
        import lmdb
        # Values over half a page take whole overflow pages: up to one extra
        # page per record. The map is sparse; only used pages take disk.
        size = 2 * wl.logical_bytes + wl.n * 8192 + (64 << 20)
        env = lmdb.open(os.path.join(path, "db"), map_size=size, sync=False,
                        metasync=False, writemap=False, readahead=False)
        dense = wl.kind == "dense"
        step = 1024
        for lo in range(0, wl.n, step):
            with env.begin(write=True) as txn:
                for i in range(lo, min(wl.n, lo + step)):
                    v = wl.data[i].tobytes() if dense else pack_record(wl.data[i])
                    txn.put(i.to_bytes(8, "big"), v, append=True)
        env.close()

    def open(self, path, wl):
        import lmdb
        self.wl = wl
        self.env = lmdb.open(os.path.join(path, "db"), readonly=True, lock=False,
                             readahead=False)

    def gather(self, idx):
        keys = [i.to_bytes(8, "big") for i in idx.tolist()]
        wl = self.wl
        with self.env.begin(buffers=True) as txn:
            pairs = txn.cursor().getmulti(keys)
            if wl.kind == "dense":
                return dense_from_bytes([v for _k, v in pairs], wl)
            return [unpack_record(v, wl.dtype) for _k, v in pairs]

    def close(self):
        self.env.close()


BACKENDS = [Lmdb]
