#!/usr/bin/env python3
"""Where the Python side of a gather spends its time: store[idx] against
store.gather(idx, out=) against numpy memmap fancy indexing, side by side
in one process, on three shapes of batch:

  small   20,000 random rows of an int32[8] store (32-byte records)
  vision  256 random (3, 224, 224) uint8 records (147 KiB)
  tokens  256 random ragged int32 records of 16..512 tokens

    python3 bench/bench_python_gather.py [--repeat N] [--profile]

Every result is checked against the source arrays before it is timed.
--profile prints a cProfile of the store[idx] loops."""
import argparse
import os
import shutil
import sys
import tempfile
import time

import numpy as np

from loaderx.zrecord import DenseStore, RaggedStore


def best(fn, repeat):
    """Best wall time of `repeat` calls of fn (seconds)."""
    t = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        t = min(t, time.perf_counter() - t0)
    return t


def small_rows(d, repeat, n=1_000_000, batch=20_000):
    rng = np.random.default_rng(0)
    data = rng.integers(0, 1 << 30, size=(n, 8), dtype=np.int32)
    np.save(os.path.join(d, "small.npy"), data)
    mm = np.load(os.path.join(d, "small.npy"), mmap_mode="r")
    s = DenseStore.create(os.path.join(d, "small"), np.int32, (8,), codec="raw")
    s.append(data)
    idx = rng.integers(0, n, size=batch).astype(np.int64)
    out = np.empty((batch, 8), np.int32)
    assert np.array_equal(s[idx], data[idx]) and np.array_equal(mm[idx], data[idx])
    assert np.array_equal(s.gather(idx, out=out), data[idx]) if hasattr(s, "gather") else True
    rows = {"numpy memmap mm[idx]": best(lambda: mm[idx], repeat),
            "store[idx]": best(lambda: s[idx], repeat)}
    if hasattr(s, "gather"):
        rows["store.gather(idx, out=)"] = best(lambda: s.gather(idx, out=out), repeat)
    return "small: 20,000 random int32[8] rows", rows, s, idx


def vision(d, repeat, n=600, batch=256):
    rng = np.random.default_rng(1)
    data = rng.integers(0, 255, size=(n, 3, 224, 224), dtype=np.uint8)
    np.save(os.path.join(d, "vision.npy"), data)
    mm = np.load(os.path.join(d, "vision.npy"), mmap_mode="r")
    s = DenseStore.create(os.path.join(d, "vision"), np.uint8, (3, 224, 224), codec="raw")
    s.append(data)
    idx = rng.choice(n, batch, replace=False).astype(np.int64)
    out = np.empty((batch, 3, 224, 224), np.uint8)
    assert np.array_equal(s[idx], data[idx]) and np.array_equal(mm[idx], data[idx])
    rows = {"numpy memmap mm[idx]": best(lambda: mm[idx], repeat),
            "store[idx]": best(lambda: s[idx], repeat)}
    if hasattr(s, "gather"):
        assert np.array_equal(s.gather(idx, out=out), data[idx])
        rows["store.gather(idx, out=)"] = best(lambda: s.gather(idx, out=out), repeat)
    return "vision: 256 random (3, 224, 224) uint8 records", rows, s, idx


def tokens(d, repeat, n=50_000, batch=256):
    rng = np.random.default_rng(2)
    lens = rng.integers(16, 513, size=n)
    flat = rng.integers(0, 50257, size=int(lens.sum()), dtype=np.int32)
    off = np.concatenate([[0], np.cumsum(lens)])
    recs = [flat[off[i]:off[i + 1]] for i in range(n)]
    s = RaggedStore.create(os.path.join(d, "tokens"), np.int32, codec="raw")
    s.append(recs)
    idx = rng.choice(n, batch, replace=False).astype(np.int64)
    got = s[idx]
    assert all(np.array_equal(g, recs[i]) for g, i in zip(got, idx.tolist()))
    rows = {"numpy flat array, one slice per record":
            best(lambda: [np.array(flat[off[i]:off[i + 1]]) for i in idx.tolist()], repeat),
            "store[idx]": best(lambda: s[idx], repeat)}
    if hasattr(s, "gather_packed"):
        rows["store.gather_packed(idx)"] = best(lambda: s.gather_packed(idx), repeat)
    return "tokens: 256 random ragged int32 records (16..512)", rows, s, idx


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    d = tempfile.mkdtemp(prefix="pygather-")
    try:
        for make in (small_rows, vision, tokens):
            title, rows, s, idx = make(d, args.repeat)
            ref = next(iter(rows.values()))
            print(title)
            for name, t in rows.items():
                print(f"  {name:42} {t * 1e3:8.3f} ms   {ref / t:5.2f}x of {next(iter(rows))}")
            if args.profile:
                import cProfile
                import pstats
                pr = cProfile.Profile()
                pr.enable()
                for _ in range(200):
                    s[idx]
                pr.disable()
                pstats.Stats(pr).sort_stats("tottime").print_stats(8)
            s.close()
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
