"""Regenerate the small seed corpora in tests/fuzz/corpus/ from real files
made by loaderx (run once after a format change; the seeds are committed).

    python3 tests/fuzz/make_seeds.py

corpus/fuzz_store/legacy-* are stores as an older version wrote them (a
32-byte meta.zr); they are kept as they are, not regenerated, so the old
header stays fuzzed.
"""

import os
import struct
import sys
import tempfile

import numpy as np

from loaderx import mrec
from loaderx.zrecord import DenseStore, RaggedStore

HERE = os.path.dirname(os.path.abspath(__file__))
NAMES = ["meta.zr", "store.zr", "0.loc", "0.chunk", "1.chunk", "dict.zr", "journal.zr",
         "1.loc", "2.chunk"]


def put(kind, name, data):
    d = os.path.join(HERE, "corpus", kind)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def pack_store(path):
    out = b""
    for i, n in enumerate(NAMES):
        p = os.path.join(path, n)
        if os.path.exists(p):
            data = open(p, "rb").read()[:65535]
            out += struct.pack("<BH", i, len(data)) + data
    return out


def main():
    tmp = tempfile.mkdtemp()
    rng = np.random.default_rng(1)
    for codec in ("raw", "zstd"):
        p = os.path.join(tmp, "dense-" + codec)
        s = DenseStore.create(p, "<f4", (3, 2), codec=codec)
        s.append(rng.standard_normal((6, 3, 2)).astype("<f4"))
        s.close()
        put("fuzz_store", "dense-" + codec, pack_store(p))
        put("fuzz_identity", "dense-" + codec, open(os.path.join(p, "store.zr"), "rb").read())
        p = os.path.join(tmp, "ragged-" + codec)
        s = RaggedStore.create(p, "<i4", codec=codec)
        for k in range(5):
            s.append([np.arange(k * 3 + 1, dtype="<i4").reshape(-1, 1)])
        s.delete([1])
        s.close()
        put("fuzz_store", "ragged-" + codec, pack_store(p))
        put("fuzz_identity", "ragged-" + codec, open(os.path.join(p, "store.zr"), "rb").read())
    put("fuzz_identity", "hostile-map32", b"\xdf\xff\xff\xff\xff")

    kinds = {"system": 0, "update": 1, "index": 2, "ff": 3}
    frames = {
        "system": {"blocks": {"atoms": {"x": np.arange(6, dtype=np.float64),
                                        "element": ["H", "O", "H", "C", "N", "S"]}},
                   "meta": {"energy": -1.5, "name": "w"}},
        "update": {"blocks": {"atoms": {"x": np.ones(3, np.float64)}}, "step": 3},
    }
    for kind, fr in frames.items():
        try:
            put("fuzz_mrf1", kind, bytes([kinds[kind]]) + mrec.encode_frame(fr, kind=kind))
        except Exception as e:  # a kind that refuses these fields: skip its seed
            print("skip", kind, e, file=sys.stderr)
    p = os.path.join(tmp, "c.mrec.lmdb")
    with mrec.Writer(p, units={"length": "angstrom"}) as w:
        w.add_record(meta={"name": "a"}, system=frames["system"])
        w.add_record(meta={"name": "b"}, system=frames["system"])
    data = open(p, "rb").read()
    # Trim trailing zero pages past the last used one (LMDB maps sparse files).
    put("fuzz_mrec_lmdb", "two-records", data.rstrip(b"\0") or data[:4096])
    put("fuzz_mrec_lmdb", "two-records-full", data[:65536])
    # LMDB's structure beyond one leaf page: a branch page over several
    # leaves, overflow pages (a value past half a page), trajectories
    p = os.path.join(tmp, "t.mrec.lmdb")
    with mrec.Writer(p, units={"length": "angstrom"}, schema={"meta": {"pe": {"dtype": "f64", "fill": "NaN"}}}) as w:
        for r in range(12):
            n = 400 if r == 5 else 2 + r % 3
            w.add_record(meta={"i": r}, system={"blocks": {"atoms": {"element": ["H"] * n}}},
                         frames=[{"blocks": {"atoms": {c: np.full(n, r + k / 4) for c in "xyz"}},
                                  "meta": {"pe": -k}, "step": k} for k in range(2)])
    data = open(p, "rb").read()
    put("fuzz_mrec_lmdb", "branch-and-overflow", data.rstrip(b"\0")[:65536])


if __name__ == "__main__":
    main()
