"""What the 16-byte record-table entry costs a raw dense store, to decide
whether such a store should drop it (its offsets are arithmetic: record i
at i * record_size). Gathers random batches of int64 labels (8-byte records)
from a raw store and, as the lower bound an arithmetic layout could reach,
from a numpy memmap of the same bytes; prints ns per record, their ratio,
and the bytes on disk per record. Both warm (page-cached).
Usage: python3 bench/bench_raw_table.py [--records N] [--batch B] [--rounds R]"""
import argparse
import os
import sys
import tempfile

import numpy as np

from loaderx.zrecord import DenseStore

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_python_gather import best  # noqa: E402  (best wall time of n calls)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=4_000_000)
    ap.add_argument("--batch", type=int, default=65536)
    ap.add_argument("--rounds", type=int, default=20)
    a = ap.parse_args()
    d = tempfile.mkdtemp()
    labels = (np.arange(a.records, dtype=np.int64) * 7919) % 1000
    with DenseStore.create(os.path.join(d, "raw"), "int64", (), codec="raw") as st:
        st.append(labels)
    st = DenseStore.open(os.path.join(d, "raw"), readonly=True)
    mm_path = os.path.join(d, "labels.bin")
    labels.tofile(mm_path)
    mm = np.memmap(mm_path, dtype=np.int64, mode="r")
    rng = np.random.default_rng(0)
    batches = [np.sort(rng.integers(0, a.records, a.batch)) for _ in range(8)]
    out = np.empty(a.batch, np.int64)
    for b in batches:  # warm both, and check they agree
        st.gather(b, out=out)
        assert np.array_equal(out, mm[b])
    k = [0]

    def store():
        st.gather(batches[k[0] % 8], out=out)
        k[0] += 1

    def memmap():
        np.take(mm, batches[k[0] % 8], out=out)
        k[0] += 1

    t_store = best(store, a.rounds) * 1e9 / a.batch
    t_mm = best(memmap, a.rounds) * 1e9 / a.batch
    disk = sum(e.stat().st_size for e in os.scandir(os.path.join(d, "raw")) if e.is_file())
    print(f"raw store gather: {t_store:.1f} ns/record; memmap take: {t_mm:.1f} ns/record; "
          f"ratio {t_store / t_mm:.2f}x")
    print(f"raw store on disk: {disk / a.records:.1f} bytes/record for 8-byte records "
          f"(memmap: 8.0)")


if __name__ == "__main__":
    main()
