"""Scale: gather time per record against batch size and record size, for
zrecord raw and zstd (store[idx], and raw into a reused out=) against numpy
memmap fancy indexing, so a user sees where each wins (a child of
bench/run.py; report.py plots it).

For each record size, one store per backend holds the same records
(token-id-like int32 values: zstd finds some redundancy); every record
is read back once and compared with the source before anything is timed,
and the first batch of every cell is compared too. A cell is the median
of several timed gathers of fresh random indices (with replacement, so a
batch may be larger than the store)."""
import os
import shutil
import time

import numpy as np

from common import SEED, ValidationError

FULL = {"record_bytes": (32, 1024, 32 << 10, 1 << 20),
        "batches": (1, 16, 256, 4096, 65536),
        "store_bytes": 256 << 20, "max_records": 1 << 20, "batch_bytes": 256 << 20,
        "min_s": 0.15, "max_reps": 200}
QUICK = {"record_bytes": (32, 4096, 1 << 20),
         "batches": (1, 64, 4096),
         "store_bytes": 8 << 20, "max_records": 1 << 16, "batch_bytes": 8 << 20,
         "min_s": 0.005, "max_reps": 5}

BACKENDS = ("zrecord-raw", "zrecord-raw-out", "zrecord-zstd", "npy-mmap-raw")


class _Reader:
    """A gather(idx) -> (n, width) int32 array over one written store."""

    def __init__(self, name, path, data):
        self.name = name
        self.out = None
        if name == "npy-mmap-raw":
            np.save(os.path.join(path, "data.npy"), data)
            self.a = np.load(os.path.join(path, "data.npy"), mmap_mode="r")
            self.s = None
            return
        from loaderx.zrecord import DenseStore
        codec = "zstd" if name == "zrecord-zstd" else "raw"
        p = os.path.join(path, "store")
        with DenseStore.create(p, np.int32, data.shape[1:], codec=codec) as s:
            s.append(data)
        self.s = DenseStore.open(p, readonly=True)

    def gather(self, idx):
        if self.s is None:
            return self.a[idx]
        if self.name.endswith("-out"):
            shape = (len(idx),) + self.s.item_shape
            if self.out is None or self.out.shape != shape:
                self.out = np.empty(shape, np.int32)
            return self.s.gather(idx, out=self.out)
        return self.s[idx]

    def close(self):
        if self.s is not None:
            self.s.close()
        self.a = self.s = self.out = None


def _check(name, got, exp, what):
    if got.dtype != exp.dtype or got.shape != exp.shape or not np.array_equal(got, exp):
        raise ValidationError(f"scale {name}: {what}: got {got.dtype}{got.shape}, expected "
                              f"{exp.dtype}{exp.shape} (or values differ)")


def run(cfg, workdir, log):
    """Returns {"record_bytes": [...], "batches": [...], "cells": [{record_bytes,
    batch, backend, ns_per_record}]}."""
    rng = np.random.default_rng(SEED + 7)
    cells = []
    for rb in cfg["record_bytes"]:
        width = rb // 4
        n = max(1, min(cfg["max_records"], cfg["store_bytes"] // rb))
        data = rng.integers(0, 50257, size=(n, width), dtype=np.int32)
        d = os.path.join(workdir, f"scale-{rb}")
        shutil.rmtree(d, ignore_errors=True)
        readers = []
        try:
            for name in BACKENDS:
                p = os.path.join(d, name)
                os.makedirs(p)
                r = _Reader(name, p, data)
                readers.append(r)
                for lo in range(0, n, 4096):  # the sweep: every record once
                    idx = np.arange(lo, min(n, lo + 4096), dtype=np.int64)
                    _check(name, r.gather(idx), data[idx], f"sweep at record {lo}")
            for batch in cfg["batches"]:
                if batch * rb > cfg["batch_bytes"]:
                    continue
                plans = [rng.integers(0, n, size=batch, dtype=np.int64)
                         for _ in range(cfg["max_reps"])]
                row = {}
                for r in readers:
                    _check(r.name, r.gather(plans[0]), data[plans[0]], f"batch of {batch}")
                    times = []
                    t_end = time.perf_counter() + cfg["min_s"]
                    for idx in plans:
                        t0 = time.perf_counter()
                        r.gather(idx)
                        times.append(time.perf_counter() - t0)
                        if len(times) >= 3 and time.perf_counter() > t_end:
                            break
                    ns = float(np.median(times)) / batch * 1e9
                    row[r.name] = ns
                    cells.append({"record_bytes": rb, "batch": batch, "backend": r.name,
                                  "ns_per_record": ns})
                log(f"  scale {rb:>8} B x {batch:>6}: " + "  ".join(
                    f"{k} {v:9.1f} ns" for k, v in row.items()))
        finally:
            for r in readers:
                r.close()
            shutil.rmtree(d, ignore_errors=True)
        del data
    return {"record_bytes": list(cfg["record_bytes"]), "batches": list(cfg["batches"]),
            "cells": cells}
