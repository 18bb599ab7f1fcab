#!/usr/bin/env python3
"""Benchmark (not a test): where append time goes, against its peers,
interleaved repeat by repeat so that every method meets the same load.

    python3 bench/bench_write.py [--workload vision,blocks] [--repeats 5]
        [--vision-n 2500] [--blocks-n 200000] [--dir DIR] [--json FILE]

Per workload (the benchmark's dense vision, 2,500 CHW uint8 images of
147 KiB, and its fixed token blocks, int32[512] = 2 KiB), each repeat runs,
in an order rotated every repeat:

- ``npy``: ``np.save`` of the array (what bench/run.py's npy-mmap-raw
  writes), and ``npy+fsync``: the same followed by ``os.fsync`` of the file
  and its directory, the durability that ``close()`` of a store gives;
- ``zr-raw``: ``DenseStore.create`` + ``append`` in 64 MiB slices (as
  bench/run.py does) + ``close()``; the append part and the close (its
  sync) are also reported apart;
- ``zr-zstd``: the same with codec='zstd';
- ``zstd-mt``: python-zstandard compressing the same records one frame
  each (level 3, content checksum, as the store's codec) with every thread
  (``multi_compress_to_buffer(threads=-1)``): zstd's own multi-threaded
  compression, nothing written.

Prints the median and the range of each figure (MiB/s of logical bytes),
and the ratios of each repeat's pair, with the load average."""
import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

MiB = 1 << 20


def fsync_path(p):
    fd = os.open(p, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def m_npy(data, d, fsync):
    p = os.path.join(d, "data.npy")
    t0 = time.perf_counter()
    np.save(p, data)
    if fsync:
        fsync_path(p)
        fsync_path(d)
    return {"total": time.perf_counter() - t0}


def m_zr(data, d, codec):
    from loaderx.zrecord import DenseStore
    p = os.path.join(d, "store")
    t0 = time.perf_counter()
    s = DenseStore.create(p, data.dtype, data.shape[1:], codec=codec)
    step = max(1, (64 << 20) // data[0].nbytes)
    for lo in range(0, len(data), step):
        s.append(data[lo:lo + step])
    t1 = time.perf_counter()
    s.close()
    t2 = time.perf_counter()
    return {"total": t2 - t0, "append": t1 - t0, "close": t2 - t1}


def m_zstd_mt(data, d):
    import zstandard
    n = len(data)
    rec = data[0].nbytes
    flat = np.ascontiguousarray(data).reshape(-1)
    segs = np.empty((n, 2), dtype=np.uint64)
    segs[:, 0] = np.arange(n, dtype=np.uint64) * rec
    segs[:, 1] = rec
    buf = zstandard.BufferWithSegments(flat, segs.tobytes())
    cctx = zstandard.ZstdCompressor(level=3, write_checksum=True, write_content_size=True)
    t0 = time.perf_counter()
    out = cctx.multi_compress_to_buffer(buf, threads=-1)
    t = time.perf_counter() - t0
    del out
    return {"total": t}


METHODS = {
    "npy": lambda data, d: m_npy(data, d, False),
    "npy+fsync": lambda data, d: m_npy(data, d, True),
    "zr-raw": lambda data, d: m_zr(data, d, "raw"),
    "zr-zstd": lambda data, d: m_zr(data, d, "zstd"),
    "zstd-mt": m_zstd_mt,
}


def workload(name, args):
    if name == "vision":
        from common import vision_dense
        return vision_dense(args.vision_n)
    if name == "blocks":
        import prepare
        from common import token_blocks
        tokens, _ = prepare.load()
        return token_blocks(tokens, args.blocks_n)
    raise SystemExit(f"unknown workload {name!r}")


def load():
    return os.getloadavg()[0]


def measure(workloads=("vision", "blocks"), methods=tuple(METHODS), repeats=5, vision_n=2500,
            blocks_n=200_000, dir=None):
    """run() with keyword options; returns its results dict (per workload:
    MiB/s of every method and repeat, the per-repeat ratios, the loads)."""
    return run(argparse.Namespace(workload=",".join(workloads), methods=",".join(methods),
                                  repeats=repeats, vision_n=vision_n, blocks_n=blocks_n,
                                  dir=dir, json=None))


def run(args):
    methods = args.methods.split(",")
    base = args.dir or tempfile.mkdtemp(prefix="zr_bench_write_")
    os.makedirs(base, exist_ok=True)
    results = {}
    try:
        for wname in args.workload.split(","):
            data = workload(wname, args)
            mib = data.nbytes / MiB
            print(f"== {wname}: {len(data)} records of {data[0].nbytes} B, {mib:.1f} MiB",
                  flush=True)
            per = {m: [] for m in methods}
            loads = []
            for r in range(args.repeats):
                order = methods[r % len(methods):] + methods[:r % len(methods)]
                for m in order:
                    d = os.path.join(base, f"{wname}-{m}")
                    shutil.rmtree(d, ignore_errors=True)
                    os.makedirs(d)
                    per[m].append(METHODS[m](data, d))
                    shutil.rmtree(d, ignore_errors=True)
                loads.append(load())
            res = {"mib": mib, "loads": loads, "methods": {}}
            for m in methods:
                rows = per[m]
                res["methods"][m] = {k: [mib / row[k] if k == "total" else row[k] for row in rows]
                                     for k in rows[0]}
                tot = res["methods"][m]["total"]
                extra = ""
                if "append" in rows[0]:
                    ap = [row["append"] for row in rows]
                    cl = [row["close"] for row in rows]
                    extra = (f"  append {statistics.median(ap) * 1e3:.0f} ms, "
                             f"close {statistics.median(cl) * 1e3:.0f} ms")
                print(f"  {m:10s} {statistics.median(tot):8.0f} MiB/s "
                      f"[{min(tot):.0f}..{max(tot):.0f}]{extra}", flush=True)

            def ratio(a, b):
                if a not in per or b not in per:
                    return
                rs = [res["methods"][a]["total"][i] / res["methods"][b]["total"][i]
                      for i in range(args.repeats)]
                res.setdefault("ratios", {})[f"{a}/{b}"] = rs
                print(f"  {a}/{b}: median {statistics.median(rs):.2f}x "
                      f"[{min(rs):.2f}..{max(rs):.2f}]", flush=True)
            ratio("zr-raw", "npy")
            ratio("zr-raw", "npy+fsync")
            ratio("zr-zstd", "zstd-mt")
            print(f"  load average (1 min) after each repeat: "
                  + ", ".join(f"{x:.1f}" for x in loads), flush=True)
            results[wname] = res
            del data
    finally:
        if not args.dir:
            shutil.rmtree(base, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", default="vision,blocks")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--vision-n", type=int, default=2500)
    ap.add_argument("--blocks-n", type=int, default=200_000)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--json", default=None)
    run(ap.parse_args())


if __name__ == "__main__":
    main()
