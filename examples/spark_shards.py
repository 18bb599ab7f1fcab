#!/usr/bin/env python3
"""Fashion-MNIST written from a Spark DataFrame as shards, then the main
job's classifier trained from them.

    python3 examples/spark_shards.py OUT_DIR [--partitions 8] [--executors 2]
        [--master local-cluster[2,1,1024]] [--steps 3000]

1. The data as it often lives: Debian's Fashion-MNIST IDX files become
   Parquet tables (image: 784 bytes as binary, label: int64), one for the
   training and one for the test split.
2. Spark reads each table as a DataFrame, repartitions it, and
   ``loaderx.shards.write_spark`` writes it as OUT_DIR/<split>/<column>/
   part-NNNNN: one shard per partition and column, written by the
   executors (by default a local cluster of two executor processes), each
   committed whole or not at all, and only the task attempts Spark
   accepted. ``shapes={"image": (28, 28)}`` makes the image column dense.
3. The shards are read back as one stream per column (ConcatStore over a
   glob), checked against the IDX files, and the same MLP, steps and
   learning-rate schedule as examples/fashion_mnist.py are trained from a
   DataLoader over them; the test accuracy is printed. The model, seed
   and schedule are the main job's, only the order the shards put the
   images in differs: at 3,000 steps one run measured 0.8814 here and
   examples/fashion_mnist.py 0.8809.

Needs pyspark and a Java runtime (requirements/test.txt, Debian's
openjdk-17-jre-headless).
"""
import argparse
import os
import sys
import time

import numpy as np

from fashion_mnist import DATA_DIR, FILES, evaluate, read_idx, train
from loaderx.shards import ConcatStore, write_spark


def to_parquet(data_dir, out):
    """The IDX files as two Parquet tables, out/<split>.parquet."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    os.makedirs(out, exist_ok=True)
    for split, (img_file, lbl_file, count) in FILES.items():
        images = read_idx(os.path.join(data_dir, img_file)).reshape(count, 784)
        labels = read_idx(os.path.join(data_dir, lbl_file)).astype(np.int64)
        t = pa.table({"image": pa.array([r.tobytes() for r in images], pa.binary()),
                      "label": labels})
        # zstd, not Parquet's usual snappy: snappy-java takes a Debian machine
        # with the musl package installed for a musl one and fails to load.
        pq.write_table(t, os.path.join(out, f"{split}.parquet"), row_group_size=8192,
                       compression="zstd")


def spark_session(master, app="loaderx spark_shards"):
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # the executors' Python
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    s = (SparkSession.builder.master(master).appName(app)
         .config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.driver.host", "127.0.0.1")
         .config("spark.driver.bindAddress", "127.0.0.1")
         .config("spark.executor.memory", "768m")
         .getOrCreate())
    s.sparkContext.setLogLevel("ERROR")
    return s


def write_splits(spark, parquet_dir, out, partitions):
    """Each split's DataFrame written as shards; returns {split: {column: ConcatStore}}."""
    opened = {}
    for split, (_, _, count) in FILES.items():
        df = spark.read.parquet(os.path.join(parquet_dir, f"{split}.parquet"))
        t0 = time.perf_counter()
        got = write_spark(df.repartition(partitions), os.path.join(out, split),
                          shapes={"image": (28, 28)}, overwrite=True)
        dt = time.perf_counter() - t0
        opened[split] = {c: ConcatStore(paths) for c, paths in got.items()}
        n = len(opened[split]["label"])
        if n != count:
            raise SystemExit(f"{split}: the shards hold {n} records, expected {count}")
        print(f"{split}: {n} records as {len(got['image'])} shards per column in {dt:.1f} s "
              f"({n / dt:,.0f} records/s) at {os.path.join(out, split)}")
    return opened


def check(stores, data_dir):
    """Every image and label is in the shards exactly once: the shards hold
    a permutation of the IDX split (repartition shuffles the rows)."""
    for split, (img_file, lbl_file, count) in FILES.items():
        want_img = read_idx(os.path.join(data_dir, img_file)).reshape(count, -1)
        want_lbl = read_idx(os.path.join(data_dir, lbl_file)).astype(np.int64)
        got_img = stores[split]["image"][np.arange(count)].reshape(count, -1)
        got_lbl = stores[split]["label"][np.arange(count)]
        rows = np.dtype((np.void, 785))  # an image and its label, compared as bytes
        want = np.hstack([want_img, want_lbl[:, None].astype(np.uint8)])
        got = np.hstack([got_img, got_lbl[:, None].astype(np.uint8)])
        if not np.array_equal(np.sort(np.ascontiguousarray(want).view(rows).ravel()),
                              np.sort(np.ascontiguousarray(got).view(rows).ravel())):
            raise SystemExit(f"{split}: the shards do not hold the IDX records exactly once")
    print("checked: every image and label exactly once, as in the IDX files")


def run(spark, out, data_dir=DATA_DIR, partitions=8, steps=3000, batch_size=256, seed=0):
    """Parquet -> Spark -> shards -> training; returns the test accuracy."""
    to_parquet(data_dir, os.path.join(out, "parquet"))
    stores = write_splits(spark, os.path.join(out, "parquet"), os.path.join(out, "shards"),
                          partitions)
    try:
        check(stores, data_dir)
        train_streams = stores["train"]
        model, _, train_time = train(train_streams, steps, batch_size, seed)
        print(f"trained {steps} steps in {train_time:.1f} s from {len(train_streams['image'].shards)}"
              " shards per column")
        return evaluate(model, stores["test"])
    finally:
        for cols in stores.values():
            for c in cols.values():
                c.close()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="directory for the Parquet tables and the shards")
    ap.add_argument("--data-dir", default=DATA_DIR, help="directory of the IDX .gz files")
    ap.add_argument("--partitions", type=int, default=8, help="Spark partitions = shards")
    ap.add_argument("--executors", type=int, default=2,
                    help="executor processes of the default local cluster")
    ap.add_argument("--master", default=None,
                    help="Spark master URL (default local-cluster[EXECUTORS,1,1024])")
    ap.add_argument("--steps", type=int, default=3000, help="training steps")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    spark = spark_session(a.master or f"local-cluster[{a.executors},1,1024]")
    try:
        accuracy = run(spark, a.out, a.data_dir, a.partitions, a.steps, a.batch_size, a.seed)
    finally:
        spark.stop()
    if accuracy < 0.80:
        sys.exit(f"spark_shards: accuracy {accuracy:.4f} is below the main job's 0.80 target")
    return 0


if __name__ == "__main__":
    sys.exit(main())
