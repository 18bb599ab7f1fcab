#!/usr/bin/env python3
"""Benchmark (not a test): many stores as one dataset.

    python3 bench/bench_shards.py [--dir /var/tmp/zr_bench_shards] [--rounds 30]
        [--mib 96] [--shards 16] [--steps 40]

1. Gather: the same records as one store and as 16 concatenated shards
   (ConcatStore), raw and zstd, 147 KiB (224x224x3 uint8) and 2 KiB
   (512 float32) records, on identical random index plans, results checked
   equal before timing.
2. Loader: DataLoader batches over a two-source Mixture (two stores of
   different lengths, weights 1:1) against the single-source DataLoader
   over the first store (2 KiB and 147 KiB raw records, batch 256 and 64).

Every pair is timed in alternation (A B, B A, A B, ...) over --rounds rounds
on a warm page cache, and the median of each side is compared. The ratio
printed is concatenated (or mixture) speed / single-store speed, from
wall-clock time and from the process's CPU time (which a loaded machine
disturbs less): >= 0.9 is the goal. Stores are kept in --dir between runs (delete it to rebuild).
"""
import argparse
import os
import statistics
import time

import numpy as np

from loaderx.dataloader import DataLoader
from loaderx.shards import ConcatStore, Mixture
from loaderx.zrecord import DenseStore

SHAPES = {"147KiB": ((224, 224, 3), np.uint8), "2KiB": ((512,), np.float32)}


def records(shape, dtype, lo, hi):
    """Compressible records [lo, hi), a pure function of the index: smooth
    ramps plus a little hashed noise."""
    size = int(np.prod(shape))
    idx = np.arange(lo, hi, dtype=np.int64)[:, None]
    j = np.arange(size, dtype=np.int64)[None, :]
    x = j % 97 + idx % 13 + ((idx * 7919 + j * 104729) >> 5) % 4
    return x.astype(dtype).reshape((hi - lo,) + shape)


def build(root, name, shape, dtype, codec, n, shards):
    """One store <name>-one and <shards> shards <name>-NN of the same n records."""
    one = os.path.join(root, f"{name}-one")
    parts = [os.path.join(root, f"{name}-{k:02d}") for k in range(shards)]
    if not os.path.exists(os.path.join(parts[-1], "store.zr")):
        edges = np.linspace(0, n, shards + 1).astype(int)
        step = max(1, (32 << 20) // (int(np.prod(shape)) * np.dtype(dtype).itemsize))
        with DenseStore.create(one, dtype, shape, codec=codec) as s:
            for lo in range(0, n, step):
                s.append(records(shape, dtype, lo, min(n, lo + step)))
        for k, p in enumerate(parts):
            with DenseStore.create(p, dtype, shape, codec=codec) as s:
                for lo in range(edges[k], edges[k + 1], step):
                    s.append(records(shape, dtype, lo, min(edges[k + 1], lo + step)))
    return one, parts


def sizes(rsize, mib, shards):
    """(records per dataset copy, batch size) for records of rsize bytes."""
    batch = 64 if rsize > 65536 else 256
    return max(shards * 8, 2 * batch, (mib << 20) // rsize), batch


def alternate(fa, fb, rounds):
    """Time fa and fb in alternation: (wall a, wall b, cpu a, cpu b), the
    medians over the rounds of wall-clock seconds and of this process's CPU
    seconds (all threads). On a loaded machine a preempted round inflates
    its wall time but not its CPU time, so both are reported."""
    wa, wb, ca, cb = [], [], [], []
    fa()
    fb()  # warm up both (page cache, pools)
    for r in range(rounds):
        # A B, then B A: the scheduler's time slice tends to run out
        # during the second of a pair, so the order alternates too.
        pairs = ((fa, wa, ca), (fb, wb, cb))
        for f, wall, cpu in pairs if r % 2 == 0 else pairs[::-1]:
            c = time.process_time()
            t = time.perf_counter()
            f()
            wall.append(time.perf_counter() - t)
            cpu.append(time.process_time() - c)
    med = statistics.median
    return med(wa), med(wb), med(ca), med(cb)


def bench_gather(root, mib, shards, rounds):
    print(f"gather: one store vs {shards} concatenated shards (warm cache, "
          f"median of {rounds} alternated rounds)")
    print(f"  {'records':8} {'codec':5} {'batch':>5} {'one MiB/s':>10} {'shards MiB/s':>12} "
          f"{'ratio':>6} {'cpu ratio':>9}")
    results = []
    for label, (shape, dtype) in SHAPES.items():
        rsize = int(np.prod(shape)) * np.dtype(dtype).itemsize
        n, batch = sizes(rsize, mib, shards)
        for codec in ("raw", "zstd"):
            one_p, parts = build(root, f"{label}-{codec}", shape, dtype, codec, n, shards)
            one = DenseStore.open(one_p, readonly=True)
            cat = ConcatStore(parts)
            assert len(one) == len(cat) == n
            rng = np.random.default_rng(1)
            plans = [rng.integers(0, n, batch).astype(np.int64) for _ in range(16)]
            for p in plans[:2]:
                assert np.array_equal(one[p], cat[p]), "results differ"

            def run_one():
                for p in plans:
                    one[p]

            def run_cat():
                for p in plans:
                    cat[p]

            t1, tc, b1, bc = alternate(run_one, run_cat, rounds)
            mb = len(plans) * batch * rsize / (1 << 20)
            ratio = t1 / tc
            results.append((f"gather {label} {codec}", ratio))
            print(f"  {label:8} {codec:5} {batch:5d} {mb / t1:10.0f} {mb / tc:12.0f} {ratio:6.2f} "
                  f"{b1 / bc:9.2f}")
            one.close()
            cat.close()
    return results


def bench_mixture(root, mib, shards, rounds, steps=40):
    print(f"loader: single-source DataLoader vs a two-source Mixture (steps per round {steps})")
    print(f"  {'records':8} {'batch':>5} {'single b/s':>10} {'mixture b/s':>11} {'ratio':>6} "
          f"{'cpu ratio':>9}")
    results = []
    for label, (shape, dtype) in SHAPES.items():
        rsize = int(np.prod(shape)) * np.dtype(dtype).itemsize
        n, batch = sizes(rsize, mib, shards)
        a_p, _ = build(root, f"{label}-raw", shape, dtype, "raw", n, shards)
        a = DenseStore.open(a_p, readonly=True)
        b_p = os.path.join(root, f"{label}-raw-second")  # the second source: another store
        if not os.path.exists(os.path.join(b_p, "store.zr")):
            with DenseStore.create(b_p + ".partial", dtype, shape, codec="raw") as s:
                s.append(records(shape, dtype, n, n + n // 2))
            os.rename(b_p + ".partial", b_p)
        b = DenseStore.open(b_p, readonly=True)
        mix = Mixture({"a": {"x": a}, "b": {"x": b}}, weights=[0.5, 0.5])
        single = DataLoader({"x": a}, batch_size=batch, seed=0)
        mixed = DataLoader(mix, batch_size=batch, seed=0)

        def run_single():
            for _ in range(steps):
                next(single)

        def run_mixed():
            for _ in range(steps):
                next(mixed)

        ts, tm, bs, bm = alternate(run_single, run_mixed, rounds)
        ratio = ts / tm
        results.append((f"loader {label} mixture", ratio))
        print(f"  {label:8} {batch:5d} {steps / ts:10.0f} {steps / tm:11.0f} {ratio:6.2f} "
              f"{bs / bm:9.2f}")
        single.close()
        mixed.close()
        mix.close()
        b.close()
        a.close()
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default="/var/tmp/zr_bench_shards")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--mib", type=int, default=96, help="MiB of records per dataset copy")
    ap.add_argument("--shards", type=int, default=16)
    ap.add_argument("--steps", type=int, default=40, help="loader steps per round")
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    res = bench_gather(a.dir, a.mib, a.shards, a.rounds)
    res += bench_mixture(a.dir, a.mib, a.shards, a.rounds, a.steps)
    worst = min(r for _, r in res)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; "
          f"worst median ratio {worst:.2f} (goal >= 0.90): " +
          ", ".join(f"{k} {r:.2f}" for k, r in res))


if __name__ == "__main__":
    main()
