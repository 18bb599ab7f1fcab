#!/usr/bin/env python3
"""One end-to-end loader run (a child of bench/run.py, which samples the RSS
of this process and all its descendants): iterate BATCHES batches of BATCH
random records from DIR and print one JSON line {"batches_s": ...}.

    loader_e2e.py CONTENDER DIR BATCH BATCHES [TRANSFORM]

CONTENDER: loaderx-zstd / loaderx-raw (DIR/zstd, DIR/raw stores, native
worker threads), torch (DataLoader, 4 worker processes, over DIR/data.npy
memmapped), grain (DataLoader, 4 worker processes, over
DIR/data.array_record). Every contender applies the same transform to each
batch in the consumer: TRANSFORM "flip" (the default), a horizontal flip
materialized as a new array, or "identity", the batch as delivered.
The first WARMUP batches (worker start-up) are not timed."""
import json
import os
import sys
import time

import numpy as np

WARMUP = 3
WORKERS = 4


def flip(batch):
    return np.ascontiguousarray(np.asarray(batch)[..., ::-1])


def identity(batch):
    return np.asarray(batch)


TRANSFORMS = {"flip": flip, "identity": identity}


def loaderx_iter(path, batch):
    from loaderx.dataloader import DataLoader
    from loaderx.zrecord import DenseStore
    s = DenseStore.open(path, readonly=True)
    dl = DataLoader({"x": s}, batch_size=batch, mode="iid", seed=0)
    for b in dl:
        yield b["x"]


class _Memmap:
    """Map-style dataset over a .npy memmap (opened lazily in each worker)."""

    def __init__(self, path):
        self.path = path
        self.a = None
        self.n = np.load(path, mmap_mode="r").shape[0]

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.a is None:
            self.a = np.load(self.path, mmap_mode="r")
        return np.array(self.a[i])


def torch_iter(path, batch):
    import torch
    from torch.utils.data import DataLoader, RandomSampler
    ds = _Memmap(path)
    dl = DataLoader(ds, batch_size=batch, num_workers=WORKERS, persistent_workers=True,
                    sampler=RandomSampler(ds, replacement=True, num_samples=1 << 30),
                    prefetch_factor=2)
    for b in dl:
        yield b.numpy()
    del torch


# grain's worker processes unpickle the operations by class name, so the
# decode op must be a module-level class; grain is imported only for its
# own run (its import would inflate the others' RSS).
if len(sys.argv) > 1 and sys.argv[1] == "grain":
    import grain.python as gp

    class Decode(gp.MapTransform):
        def __init__(self, shape, dtype):
            self.shape, self.dtype = shape, dtype

        def map(self, element):
            return np.frombuffer(element, dtype=self.dtype).reshape(self.shape)


def grain_iter(path, batch, shape, dtype):
    src = gp.ArrayRecordDataSource([path])
    sampler = gp.IndexSampler(num_records=len(src), shard_options=gp.NoSharding(),
                              shuffle=True, num_epochs=None, seed=0)
    dl = gp.DataLoader(data_source=src, sampler=sampler,
                       operations=[Decode(shape, dtype), gp.Batch(batch, drop_remainder=True)],
                       worker_count=WORKERS)
    yield from dl


def main():
    who, d, batch, nb = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    transform = TRANSFORMS[sys.argv[5] if len(sys.argv) > 5 else "flip"]
    meta = json.load(open(os.path.join(d, "meta.json")))
    shape, dtype = tuple(meta["shape"]), np.dtype(meta["dtype"])
    if who.startswith("loaderx-"):
        it = loaderx_iter(os.path.join(d, who.split("-", 1)[1]), batch)
    elif who == "torch":
        it = torch_iter(os.path.join(d, "data.npy"), batch)
    elif who == "grain":
        it = grain_iter(os.path.join(d, "data.array_record"), batch, shape, dtype)
    else:
        raise SystemExit(f"unknown contender {who}")
    t0 = None
    for k, b in enumerate(it):
        out = transform(b)
        if out.shape != (batch,) + shape or out.dtype != dtype:
            raise SystemExit(f"{who}: batch {k} is {out.dtype}{out.shape}, expected "
                             f"{dtype}{(batch,) + shape}")
        if k + 1 == WARMUP:
            t0 = time.perf_counter()
        if k + 1 == WARMUP + nb:
            break
    dt = time.perf_counter() - t0
    print(json.dumps({"batches_s": nb / dt}), flush=True)
    # End worker processes now rather than waiting for pools to wind down
    # (they would keep the parent's pipes open).
    import psutil
    for c in psutil.Process().children(recursive=True):
        c.kill()
    os._exit(0)


if __name__ == "__main__":
    main()
