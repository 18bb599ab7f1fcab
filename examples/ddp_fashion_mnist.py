#!/usr/bin/env python3
"""Multi-process training with loaderx: torch DistributedDataParallel on
Fashion-MNIST, two CPU processes (gloo), one rank-sharded loader per rank.

1. Ingest Debian's ``dataset-fashion-mnist`` (gzip'd IDX files) into two
   stores, ``images`` (uint8 28x28) and ``labels`` (int64), unless they
   exist (``--limit`` keeps only the first records, for quick runs).
2. Start ``--world-size`` processes. Each opens the SAME stores read-only
   (shared lock, so all ranks read them at once) and builds its own
   ``DataLoader(..., rank=r, world_size=W)``: at every step the ranks take
   disjoint slices of one global cyclic batch, so together they see every
   record once per cycle.
3. Train a small MLP for ``--steps`` steps with DDP (gradients averaged
   over the ranks). ``--state-out`` saves, per rank, the loader state, the
   model and the optimizer (SGD momentum buffers); ``--state-in`` resumes
   from them, so the run continues with exactly the batches and the
   updates it would have had. ``--log`` writes each rank's
   indices per step (``rank<r>.npy``, shape (steps, batch_size)).

    python3 examples/ddp_fashion_mnist.py --stores /tmp/fmnist_stores --steps 50
"""

import argparse
import gzip
import json
import os
import shutil
import socket
import sys

import numpy as np

DATA_DIR = "/usr/share/datasets/fashion-mnist"


def read_idx(path):
    """A gzip'd uint8 IDX file (big-endian header) as an ndarray."""
    with gzip.open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 4 or raw[:3] != b"\x00\x00\x08":
        raise ValueError(f"{path}: not a uint8 IDX file")
    ndim = raw[3]
    dims = tuple(int(d) for d in np.frombuffer(raw, ">u4", count=ndim, offset=4))
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def prepare(store_dir, data_dir, limit):
    """Create store_dir/images and store_dir/labels if missing (each built
    under a .partial name and renamed when complete)."""
    from loaderx.zrecord import DenseStore

    images = read_idx(os.path.join(data_dir, "train-images-idx3-ubyte.gz"))[:limit]
    labels = read_idx(os.path.join(data_dir, "train-labels-idx1-ubyte.gz"))[:limit]
    # Labels raw: zstd cannot shrink an 8-byte record.
    for name, arr, codec in (("images", images, "zstd"), ("labels", labels.astype(np.int64), "raw")):
        path = os.path.join(store_dir, name)
        if os.path.exists(path):
            continue
        tmp = path + ".partial"
        shutil.rmtree(tmp, ignore_errors=True)
        with DenseStore.create(tmp, arr.dtype, arr.shape[1:], codec=codec) as s:
            s.append(arr)
        os.rename(tmp, path)


def open_readonly(path, world_size):
    from loaderx.zrecord import DenseStore
    try:
        return DenseStore.open(path, readonly=True)
    except TypeError:
        if world_size > 1:
            raise RuntimeError("this loaderx has no read-only shared opens; ranks cannot "
                               "share a store") from None
        return DenseStore.open(path)  # one process: the exclusive open is enough


def worker(rank, args, port):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from loaderx.dataloader import DataLoader

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=args.world_size)
    torch.manual_seed(args.seed)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 64),
                                torch.nn.ReLU(), torch.nn.Linear(64, 10))
    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)

    def to_tensors(batch):  # runs on the loader's transform threads
        x = torch.from_numpy(batch["x"]).float().div_(255.0)
        return x, torch.from_numpy(batch["y"])

    streams = {"x": open_readonly(os.path.join(args.stores, "images"), args.world_size),
               "y": open_readonly(os.path.join(args.stores, "labels"), args.world_size)}
    if args.state_in:
        with open(f"{args.state_in}.rank{rank}.json") as f:
            saved = json.load(f)
        ckpt = torch.load(f"{args.state_in}.rank{rank}.pt")
        # The momentum buffers are state too: without them the resumed
        # updates differ from an uninterrupted run's.
        ddp.module.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optimizer"])
        loader = DataLoader.from_state(streams, saved["loader"], transform=to_tensors,
                                       num_workers=1, prefetch=2)
    else:
        loader = DataLoader(streams, batch_size=args.batch_size, mode="cyclic",
                            seed=args.seed, rank=rank, world_size=args.world_size,
                            transform=to_tensors, num_workers=1, prefetch=2)
    seen = []
    for step in range(args.steps):
        x, y = next(loader)
        seen.append(loader.last_indices.copy())
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(ddp(x), y)
        loss.backward()  # DDP averages the gradients over the ranks here
        opt.step()
        if rank == 0 and (step % 10 == 0 or step == args.steps - 1):
            print(f"step {loader.step - 1}: loss {loss.item():.4f}", flush=True)
    if args.state_out:
        with open(f"{args.state_out}.rank{rank}.json", "w") as f:
            json.dump({"loader": loader.state()}, f)
        torch.save({"model": ddp.module.state_dict(), "optimizer": opt.state_dict()},
                   f"{args.state_out}.rank{rank}.pt")
    if args.log:
        os.makedirs(args.log, exist_ok=True)
        np.save(os.path.join(args.log, f"rank{rank}.npy"), np.stack(seen))
    loader.close()
    for s in streams.values():
        s.close()
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv=None):
    # The docstring's first paragraph (its first line alone stops mid-sentence).
    intro = " ".join(__doc__.split("\n\n")[0].split())
    ap = argparse.ArgumentParser(description=intro)
    ap.add_argument("--stores", required=True, help="directory for the two stores")
    ap.add_argument("--data", default=DATA_DIR)
    ap.add_argument("--limit", type=int, default=60000, help="records to ingest")
    ap.add_argument("--world-size", type=int, default=2)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--batch-size", type=int, default=64, help="per rank")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--state-in", help="resume from this prefix (.rank<r>.json/.pt: "
                    "loader state, model and optimizer)")
    ap.add_argument("--state-out", help="save the state under this prefix")
    ap.add_argument("--log", help="directory for per-rank index logs")
    args = ap.parse_args(argv)

    import torch.multiprocessing as mp

    os.makedirs(args.stores, exist_ok=True)
    prepare(args.stores, args.data, args.limit)
    mp.spawn(worker, args=(args, free_port()), nprocs=args.world_size, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
