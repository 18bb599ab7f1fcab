#!/usr/bin/env python3
"""Benchmark (not a test): datasets written where they live.

    python3 bench/bench_sources.py [--dir /var/tmp/zr_bench_sources] [--rounds 3]
        [--records 60000] [--shards 8] [--workers 2] [--skip writers,parquet]

1. Spark and dask writing the same dataset: ``--records`` records, each a
   (28, 28) uint8 image and an int64 label, a pure function of its index
   (examples/dask_shards.py), as ``--shards`` shards per column, by
   ``--workers`` worker processes each: a dask.distributed LocalCluster
   (one task per shard, write_shard) against a Spark local cluster of as
   many executors (one partition per shard, loaderx.shards.write_spark).
   Clusters are started once, outside the timing; the two writers then
   alternate for ``--rounds`` rounds and the median of each is reported in
   records/s, with the shard count, after every record is checked.
2. ``zr ingest`` of a Parquet file against pyarrow's own read of the same
   file: a dense table (the same images and labels, fixed-size lists) and
   a ragged one (int32 token lists of 16..512), Parquet's default
   compression. Timed as whole commands (a fresh interpreter each, like
   zr ingest's), alternating, median of ``--rounds``: ``python3 -c
   "pyarrow.parquet.read_table(F)"`` and ``zr ingest F STORE`` with the
   raw and the zstd codec; also loaderx.shards.from_arrow in-process.

Prints one Markdown table per part, as docs/BENCHMARKS.md shows them.
"""
import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
from dask_shards import image, label, split, write_shards  # noqa: E402

SPARK_SCHEMA = "image binary, label long"


def spark_rows(batches):
    """mapInArrow: ids -> the same records as dask_shards.image/label."""
    import pyarrow as pa

    for b in batches:
        idx = b.column("id").to_numpy()
        imgs = image(idx).reshape(len(idx), 784)
        yield pa.RecordBatch.from_pydict(
            {"image": pa.array([r.tobytes() for r in imgs], pa.binary()), "label": label(idx)})


def check(out_images, out_labels, records):
    from loaderx.shards import ConcatStore

    with ConcatStore(out_images) as im, ConcatStore(out_labels) as lb:
        assert len(im) == records and len(lb) == records, (len(im), len(lb))
        idx = np.arange(records)
        got_lbl = lb[idx]
        assert np.array_equal(np.sort(got_lbl), np.sort(label(idx)))
        ids = np.arange(0, records, 997)
        assert np.array_equal(im[ids], image(ids))  # partition order is row order here
        return len(im.shards)


def bench_writers(a):
    from distributed import Client, LocalCluster
    from pyspark import cloudpickle
    from pyspark.sql import SparkSession

    from loaderx.shards import write_spark

    # The record functions go to the executors by value (they import
    # neither this script nor the examples).
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    cloudpickle.register_pickle_by_value(sys.modules["dask_shards"])
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    t0 = time.perf_counter()
    spark = (SparkSession.builder.master(f"local-cluster[{a.workers},1,1024]")
             .appName("bench_sources").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.executor.memory", "768m").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark_up = time.perf_counter() - t0
    t0 = time.perf_counter()
    cluster = LocalCluster(n_workers=a.workers, threads_per_worker=1, processes=True,
                           dashboard_address=None)
    client = Client(cluster)
    dask_up = time.perf_counter() - t0
    times = {"dask": [], "spark": []}
    shards = {}
    try:
        for r in range(a.rounds):
            for name in (("dask", "spark") if r % 2 == 0 else ("spark", "dask")):
                out = os.path.join(a.dir, f"{name}-{r}")
                shutil.rmtree(out, ignore_errors=True)
                t0 = time.perf_counter()
                if name == "dask":
                    os.makedirs(out)
                    futs = [client.submit(write_shards, out, k, lo, hi, pure=False)
                            for k, lo, hi in split(a.records, a.shards)]
                    client.gather(futs)
                    dt = time.perf_counter() - t0
                    shards[name] = check(os.path.join(out, "images-*"),
                                         os.path.join(out, "labels-*"), a.records)
                else:
                    df = spark.range(0, a.records, numPartitions=a.shards).mapInArrow(
                        spark_rows, SPARK_SCHEMA)
                    write_spark(df, out, shapes={"image": (28, 28)}, codec={"image": "zstd",
                                                                           "label": "raw"})
                    dt = time.perf_counter() - t0
                    shards[name] = check(os.path.join(out, "image", "*"),
                                         os.path.join(out, "label", "*"), a.records)
                times[name].append(dt)
                shutil.rmtree(out)
                print(f"  round {r}: {name} {dt:.2f} s", file=sys.stderr)
    finally:
        client.close()
        cluster.close()
        spark.stop()
    print(f"\n{a.records} records ((28, 28) uint8 zstd + int64 raw), {a.workers} workers, "
          f"median of {a.rounds}; clusters started before the timing (Spark {spark_up:.1f} s, "
          f"dask {dask_up:.1f} s)\n")
    print("| writer | records/s | median s | shards per column | vs dask |")
    print("|---|---:|---:|---:|---:|")
    med = {k: statistics.median(v) for k, v in times.items()}
    for name in ("dask", "spark"):
        print(f"| {name} | {a.records / med[name]:,.0f} | {med[name]:.2f} | {shards[name]} | "
              f"{med['dask'] / med[name]:.2f}x |")


def parquet_files(a):
    import pyarrow as pa
    import pyarrow.parquet as pq

    dense = os.path.join(a.dir, "dense.parquet")
    ragged = os.path.join(a.dir, "ragged.parquet")
    if not os.path.exists(dense):
        idx = np.arange(a.records)
        t = pa.table({"image": pa.FixedSizeListArray.from_arrays(
                          pa.array(image(idx).reshape(-1)), 784),
                      "label": label(idx)})
        pq.write_table(t, dense)
    if not os.path.exists(ragged):
        rng = np.random.default_rng(0)
        lens = rng.integers(16, 513, size=a.records)
        flat = rng.integers(0, 50257, size=int(lens.sum())).astype(np.int32)
        off = np.zeros(a.records + 1, dtype=np.int32)
        np.cumsum(lens, out=off[1:])
        pq.write_table(pa.table({"tokens": pa.ListArray.from_arrays(off, flat)}), ragged)
    return {"dense": dense, "ragged": ragged}


def timed(cmd):
    """(wall s, CPU s of the child: user + system, all its threads)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def timed_here(fn):
    """(wall s, CPU s of this process, all its threads) of fn()."""
    c0, t0 = time.process_time(), time.perf_counter()
    fn()
    return time.perf_counter() - t0, time.process_time() - c0


def bench_parquet(a):
    import pyarrow.parquet as pq

    from loaderx.shards import from_arrow

    files = parquet_files(a)
    zr = shutil.which("zr")
    if zr is None:
        raise SystemExit("bench_sources: zr is not on PATH")
    read = [sys.executable, "-c", "import sys, pyarrow.parquet as pq; pq.read_table(sys.argv[1])"]
    rows = []
    for kind, path in files.items():
        logical = pq.read_table(path).nbytes
        size = os.path.getsize(path)
        cases = {"pyarrow read_table (command)": lambda: timed(read + [path])}
        for codec in ("raw", "zstd"):
            def ingest(codec=codec):
                st = os.path.join(a.dir, f"st-{kind}-{codec}")
                shutil.rmtree(st, ignore_errors=True)
                dt = timed([zr, "ingest", "-q", "--codec", codec, path, st])
                shutil.rmtree(st)
                return dt
            cases[f"zr ingest --codec {codec}"] = ingest

        def in_process_read():
            return timed_here(lambda: pq.read_table(path))

        def in_process_from_arrow():
            out = os.path.join(a.dir, f"fa-{kind}")
            got = timed_here(lambda: from_arrow(path, out, codec="zstd", overwrite=True))
            shutil.rmtree(out)
            return got

        cases["pyarrow read_table (in process)"] = in_process_read
        cases["from_arrow zstd (in process)"] = in_process_from_arrow
        times = {k: [] for k in cases}
        for r in range(a.rounds):
            for k in (list(cases) if r % 2 == 0 else list(cases)[::-1]):
                times[k].append(cases[k]())
        med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
               for k, v in times.items()}
        for k, (wall, cpu) in med.items():
            ref = med["pyarrow read_table (in process)" if "in process" in k
                      else "pyarrow read_table (command)"]
            rows.append((kind, size, logical, k, wall, cpu, ref[0] / wall, ref[1] / cpu))
        print(f"  {kind}: done", file=sys.stderr)
    print(f"\n{a.records} records per file, median of {a.rounds} alternating runs; CPU = user + "
          "system time of every thread\n")
    print("| file | what | wall s | CPU s | MiB/s of decoded values per CPU s | "
          "pyarrow's read / this, wall | same, CPU |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for kind, size, logical, k, wall, cpu, rw, rc in rows:
        print(f"| {kind} ({size / 2**20:.0f} MiB on disk, {logical / 2**20:.0f} MiB decoded) | "
              f"{k} | {wall:.2f} | {cpu:.2f} | {logical / 2**20 / cpu:,.0f} | {rw:.2f}x | "
              f"{rc:.2f}x |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default="/var/tmp/zr_bench_sources")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--records", type=int, default=60000)
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--skip", default="", help="comma-separated: writers, parquet")
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    skip = set(filter(None, a.skip.split(",")))
    if "writers" not in skip:
        bench_writers(a)
    if "parquet" not in skip:
        bench_parquet(a)


if __name__ == "__main__":
    main()
