#!/usr/bin/env python3
"""Benchmark (not a test): loader throughput on a cold page cache, with and
without readahead hints (posix_fadvise WILLNEED on the records of steps
ahead). Before each run every file of the store is evicted from the page
cache (POSIX_FADV_DONTNEED), so records come from the disk.

    python3 bench/bench_readahead.py [--dir /var/tmp/zr_bench] [--mib 512]
        [--record 4096] [--batch 256] [--steps 200] [--readahead 16]

Reports batches per second for readahead 0 (off) and --readahead, the
ratio, and the peak RSS of the process (bounded by the prefetch slots,
not by the store size). The store is kept between runs (delete --dir).
"""
import argparse
import os
import resource
import time

import numpy as np

from loaderx.dataloader import DataLoader
from loaderx.zrecord import DenseStore


def evict(path):
    for name in os.listdir(path):
        fd = os.open(os.path.join(path, name), os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def build(path, n, record):
    if os.path.exists(os.path.join(path, "store.zr")):
        return
    rng = np.random.default_rng(0)
    with DenseStore.create(path, np.uint8, (record,), codec="raw") as s:
        step = max(1, (64 << 20) // record)
        for i in range(0, n, step):
            k = min(step, n - i)
            s.append(rng.integers(0, 256, size=(k, record), dtype=np.uint8))


def run(path, args, readahead):
    evict(path)
    with DenseStore.open(path) as s:
        dl = DataLoader({"x": s}, batch_size=args.batch, mode="iid", seed=1,
                        num_workers=args.workers, prefetch=args.prefetch,
                        readahead=readahead)
        t0 = time.perf_counter()
        for _ in range(args.steps):
            next(dl)
        dt = time.perf_counter() - t0
        dl.close()
    return args.steps / dt


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default="/var/tmp/zr_bench_readahead")
    ap.add_argument("--mib", type=int, default=512)
    ap.add_argument("--record", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--prefetch", type=int, default=4)
    ap.add_argument("--readahead", type=int, default=16)
    args = ap.parse_args()
    n = (args.mib << 20) // args.record
    path = os.path.join(args.dir, f"store_{n}x{args.record}")
    os.makedirs(args.dir, exist_ok=True)
    build(path, n, args.record)
    off = run(path, args, 0)
    on = run(path, args, args.readahead)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"store {n} x {args.record} B ({args.mib} MiB), iid batch {args.batch}, "
          f"{args.steps} steps, workers {args.workers}, prefetch {args.prefetch}")
    print(f"readahead off: {off:8.1f} batches/s")
    print(f"readahead {args.readahead:3d}: {on:8.1f} batches/s")
    print(f"ratio: {on / off:.2f}x   peak RSS: {rss:.0f} MiB")


if __name__ == "__main__":
    main()
