"""Write one dataset as many shards in parallel with dask.distributed, then
train from the shards as one dataset.

    python examples/dask_shards.py OUT_DIR [--shards 8] [--records 20000] [--workers 2]

A store has one writer, so a dataset too big for one writer is written as
many stores: here every dask task (on a LocalCluster of worker processes)
creates and fills its own pair of shards, images-NNNN and labels-NNNN.
Each shard is written at <shard>.partial and renamed to <shard> only once
it is complete and durable (loaderx.shards.write_shard), so a worker killed
in the middle leaves its shard absent, never half-written; running the task
again replaces it. The reader then opens the shards as one stream
(ConcatStore over a glob), checks every record, and feeds a DataLoader.

Records are synthetic and a pure function of their global index (a
28 x 28 uint8 image and an int64 label), so every byte can be checked.
"""

import argparse
import os
import time

import numpy as np


def image(i):
    """Record i of the dataset: a (28, 28) uint8 image that encodes i."""
    i = np.asarray(i, dtype=np.int64)
    base = (np.arange(28 * 28, dtype=np.int64) * 7).reshape(28, 28)
    return ((base + i[..., None, None] * 13) % 251).astype(np.uint8)


def label(i):
    return np.asarray(i, dtype=np.int64) % 10


def write_shards(out, k, lo, hi):
    """One task: shard k holds records [lo, hi) as images-k and labels-k."""
    from loaderx.shards import write_shard
    from loaderx.zrecord import DenseStore

    idx = np.arange(lo, hi)
    write_shard(os.path.join(out, f"images-{k:04d}"),
                lambda p: DenseStore.create(p, "|u1", (28, 28), codec="zstd"),
                lambda s: s.append(image(idx)))
    write_shard(os.path.join(out, f"labels-{k:04d}"),
                lambda p: DenseStore.create(p, "<i8", (), codec="raw"),
                lambda s: s.append(label(idx)))
    return k, hi - lo


def split(records, shards):
    """[lo, hi) of each shard: as equal as possible."""
    edges = np.linspace(0, records, shards + 1).astype(np.int64)
    return [(k, int(edges[k]), int(edges[k + 1])) for k in range(shards)]


def ingest(out, records, shards, workers):
    from distributed import Client, LocalCluster

    os.makedirs(out, exist_ok=True)
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        parts = split(records, shards)
        futures = [client.submit(write_shards, out, k, lo, hi, pure=False) for k, lo, hi in parts]
        done = client.gather(futures)
    assert sum(n for _, n in done) == records


def verify(out, records):
    """Open the shards as one stream and check every record; returns the
    two concatenations (images, labels)."""
    from loaderx.shards import ConcatStore

    images = ConcatStore(os.path.join(out, "images-*"))
    labels = ConcatStore(os.path.join(out, "labels-*"))
    if len(images) != records or len(labels) != records:
        raise SystemExit(f"expected {records} records, the shards hold {len(images)} images and "
                         f"{len(labels)} labels")
    step = 4096
    for lo in range(0, records, step):
        idx = np.arange(lo, min(lo + step, records))
        if not np.array_equal(images[idx], image(idx)) or not np.array_equal(labels[idx], label(idx)):
            raise SystemExit(f"records {lo}..{idx[-1]} differ from what was written")
    return images, labels


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="directory for the shards (created)")
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--records", type=int, default=20000)
    ap.add_argument("--workers", type=int, default=2, help="dask worker processes")
    ap.add_argument("--steps", type=int, default=20, help="loader steps to run at the end")
    a = ap.parse_args()

    t0 = time.perf_counter()
    ingest(a.out, a.records, a.shards, a.workers)
    t1 = time.perf_counter()
    images, labels = verify(a.out, a.records)
    print(f"wrote {a.records} records as {a.shards} shards with {a.workers} dask workers in "
          f"{t1 - t0:.1f} s; verified {len(images)} records as one dataset")

    from loaderx.dataloader import DataLoader

    with DataLoader({"image": images, "label": labels}, batch_size=64, seed=0) as dl:
        for _ in range(a.steps):
            b = next(dl)
            assert np.array_equal(b["image"], image(dl.last_indices))
            assert np.array_equal(b["label"], label(dl.last_indices))
    print(f"loader: {a.steps} batches of 64 over the shards, every record as written")
    images.close()
    labels.close()


if __name__ == "__main__":
    main()
