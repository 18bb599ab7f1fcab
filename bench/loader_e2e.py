#!/usr/bin/env python3
"""One end-to-end loader run (a child of bench/run.py, which samples the RSS
of this process and all its descendants): iterate BATCHES batches of BATCH
random records from DIR and print one JSON line {"batches_s": ...}.

    loader_e2e.py CONTENDER DIR BATCH BATCHES [TRANSFORM]

CONTENDER: loaderx-zstd / loaderx-raw (DIR/zstd, DIR/raw stores, native
worker threads), torch (DataLoader, 4 worker processes, over DIR/data.npy
memmapped), grain (DataLoader, 4 worker processes, over
DIR/data.array_record), or held (no loader: one batch read once and handed
out again, the consumer's own cost alone). Every contender applies the same transform to each
batch in the consumer: TRANSFORM "flip" (the default), a horizontal flip
materialized as a new array, or "identity", the batch as delivered.
TRANSFORM "flip-worker" is the same horizontal flip of every record done
where each loader runs per-record work, the consumer taking the batch as
delivered: loaderx's native flip stage (DataLoader(flip={"x": 1.0}), on its
gather threads), torch's Dataset.__getitem__ in its worker processes, and a
grain MapTransform in its workers. The first WARMUP batches (worker
start-up) are not timed, and batch 0 is checked against a flip of the
records it claims to hold where the loader says which they are."""
import json
import os
import signal
import sys
import time

import numpy as np

WARMUP = 3
WORKERS = 4


def flip(batch):
    return np.ascontiguousarray(np.asarray(batch)[..., ::-1])


def identity(batch):
    return np.asarray(batch)


TRANSFORMS = {"flip": flip, "identity": identity, "flip-worker": identity}


def loaderx_iter(path, batch, worker_flip=False):
    from loaderx.dataloader import DataLoader
    from loaderx.zrecord import DenseStore
    s = DenseStore.open(path, readonly=True)
    dl = DataLoader({"x": s}, batch_size=batch, mode="iid", seed=0,
                    flip={"x": 1.0} if worker_flip else None)
    first = True
    for b in dl:
        if first and worker_flip:  # the native flip is the numpy flip of those records
            want = s[dl.last_indices][..., ::-1]
            if not np.array_equal(b["x"], want):
                raise SystemExit("loaderx: the native flip differs from numpy's")
            first = False
        yield b["x"]


def held_iter(path, batch):
    """No loader at all: one batch read once and handed out again and again.
    The consumer's own cost per batch, the ceiling of any loader under the
    same transform."""
    x = np.ascontiguousarray(np.load(path, mmap_mode="r")[:batch])
    while True:
        yield x


class _Memmap:
    """Map-style dataset over a .npy memmap (opened lazily in each worker)."""

    def __init__(self, path, worker_flip=False):
        self.path = path
        self.a = None
        self.n = np.load(path, mmap_mode="r").shape[0]
        self.worker_flip = worker_flip

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.a is None:
            self.a = np.load(self.path, mmap_mode="r")
        if self.worker_flip:  # torchvision's hflip of one sample, in the worker
            return np.ascontiguousarray(self.a[i][..., ::-1])
        return np.array(self.a[i])


def torch_iter(path, batch, worker_flip=False):
    import torch
    from torch.utils.data import DataLoader, RandomSampler
    ds = _Memmap(path, worker_flip)
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
        def __init__(self, shape, dtype, worker_flip=False):
            self.shape, self.dtype, self.worker_flip = shape, dtype, worker_flip

        def map(self, element):
            r = np.frombuffer(element, dtype=self.dtype).reshape(self.shape)
            return np.ascontiguousarray(r[..., ::-1]) if self.worker_flip else r


def grain_iter(path, batch, shape, dtype, worker_flip=False):
    src = gp.ArrayRecordDataSource([path])
    sampler = gp.IndexSampler(num_records=len(src), shard_options=gp.NoSharding(),
                              shuffle=True, num_epochs=None, seed=0)
    dl = gp.DataLoader(data_source=src, sampler=sampler,
                       operations=[Decode(shape, dtype, worker_flip),
                                   gp.Batch(batch, drop_remainder=True)],
                       worker_count=WORKERS)
    yield from dl


def main():
    who, d, batch, nb = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    tname = sys.argv[5] if len(sys.argv) > 5 else "flip"
    transform, wf = TRANSFORMS[tname], tname == "flip-worker"
    meta = json.load(open(os.path.join(d, "meta.json")))
    shape, dtype = tuple(meta["shape"]), np.dtype(meta["dtype"])
    if who.startswith("loaderx-"):
        it = loaderx_iter(os.path.join(d, who.split("-", 1)[1]), batch, wf)
    elif who == "held":
        it = held_iter(os.path.join(d, "data.npy"), batch)
    elif who == "torch":
        it = torch_iter(os.path.join(d, "data.npy"), batch, wf)
    elif who == "grain":
        it = grain_iter(os.path.join(d, "data.array_record"), batch, shape, dtype, wf)
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
    # (they would keep the parent's pipes open). torch's DataLoader installs
    # a SIGCHLD handler that raises when one of its workers dies, which would
    # turn this deliberate kill into a failed run: drop it first.
    import psutil
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for c in psutil.Process().children(recursive=True):
        c.kill()
    os._exit(0)


if __name__ == "__main__":
    main()
