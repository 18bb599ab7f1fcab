#!/usr/bin/env python3
"""The main job's classifier trained from shards in an object store.

The training images and labels of Fashion-MNIST (the stores that
examples/fashion_mnist.py ingests) are split into three shards each,
pushed to ``URL/train-images`` and ``URL/train-labels`` as shard sets
(each shard's meta.zr, then the set's manifest, last), and the same MLP is
trained twice with the same seed and steps: from the local stores and from
the URL through a DataLoader over the two ConcatStores, with a cache cap
smaller than the data. Both evaluations run over the local test split; the
loader hands out the same batches whatever the source, so the two
accuracies must be equal.

Usage:
    python3 examples/fashion_mnist_remote.py URL [--store-dir DIR] [--steps N]
        [--cache-bytes BYTES] [--cache-dir DIR]

URL is http(s)://... (a server that accepts PUT) or s3://bucket/prefix;
S3 settings come from the AWS environment variables or profile files.
Exits 1 when the two runs differ (losses or accuracy) or the accuracy
falls below --min-accuracy (0.80).
"""
import argparse
import os
import shutil
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fashion_mnist as fm  # noqa: E402
from loaderx.dataloader import DataLoader, PassLoader  # noqa: E402
from loaderx.shards import ConcatStore, push  # noqa: E402
from loaderx.zrecord import DenseStore  # noqa: E402


def shard(src, dst_dir, name, parts=3):
    """Split the store `src` into `parts` local shards under dst_dir."""
    paths = []
    with DenseStore.open(src, readonly=True) as s:
        n = len(s)
        for k in range(parts):
            lo, hi = n * k // parts, n * (k + 1) // parts
            p = os.path.join(dst_dir, f"{name}-{k}")
            with DenseStore.create(p, s.dtype, s.item_shape, codec="zstd") as out:
                out.append(s[lo:hi])
            paths.append(p)
    return paths


def train(streams, steps, batch_size, seed):
    model = fm.MLP(seed=seed)
    with DataLoader(streams, batch_size=batch_size, mode="cyclic", seed=seed,
                    transform=fm.to_features) as loader:
        losses = []
        for step in range(steps):
            batch = next(loader)
            lr = 0.05 if step < steps * 2 // 3 else 0.01
            losses.append(model.step(batch["x"], batch["y"], lr))
    return model, losses


def accuracy(model, test_paths):
    correct = seen = 0
    with DenseStore.open(test_paths[0], readonly=True) as ti, \
            DenseStore.open(test_paths[1], readonly=True) as tl:
        for batch in PassLoader({"image": ti, "label": tl}, batch_size=1000,
                                transform=fm.to_features):
            correct += int((model.predict(batch["x"]) == batch["y"]).sum())
            seen += len(batch["y"])
    return correct / seen


def cache_bytes(root):
    d = os.path.join(root, "zr-remote-v1", "b")
    return sum(e.stat().st_size for e in os.scandir(d)) if os.path.isdir(d) else 0


def main(argv=None):
    cache = os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache"))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("url")
    ap.add_argument("--data-dir", default=fm.DATA_DIR)
    ap.add_argument("--store-dir", default=os.path.join(cache, "loaderx", "fashion-mnist"))
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cache-bytes", default="16M", help="the cache cap (smaller than the data)")
    ap.add_argument("--cache-block", default="16K")
    ap.add_argument("--cache-dir", default=None, help="default: a fresh temporary folder")
    ap.add_argument("--min-accuracy", type=float, default=0.80)
    args = ap.parse_args(argv)
    paths = fm.prepare_stores(args.data_dir, args.store_dir)
    work = tempfile.mkdtemp(prefix="fmnist-shards-")
    cache_dir = args.cache_dir or tempfile.mkdtemp(prefix="fmnist-cache-")
    try:
        img_shards = shard(paths["train"][0], work, "images")
        lbl_shards = shard(paths["train"][1], work, "labels")
        data_bytes = sum(fm.dir_bytes(p) for p in img_shards + lbl_shards)
        url = args.url.rstrip("/")
        t0 = time.perf_counter()
        push(img_shards, url + "/train-images")
        push(lbl_shards, url + "/train-labels")
        print(f"pushed 2 x 3 shards ({data_bytes / fm.MIB:.1f} MiB) to {url} in "
              f"{time.perf_counter() - t0:.1f} s")

        t0 = time.perf_counter()
        local = {"image": ConcatStore(img_shards), "label": ConcatStore(lbl_shards)}
        model_l, loss_l = train(local, args.steps, args.batch_size, args.seed)
        acc_l = accuracy(model_l, paths["test"])
        print(f"local disk: {args.steps} steps in {time.perf_counter() - t0:.1f} s, "
              f"loss {np.mean(loss_l[-100:]):.4f}, test accuracy {acc_l:.4f}")
        for s in local.values():
            s.close()

        os.environ["ZR_CACHE_DIR"] = cache_dir
        os.environ["ZR_CACHE_BYTES"] = args.cache_bytes
        os.environ["ZR_CACHE_BLOCK"] = args.cache_block
        t0 = time.perf_counter()
        remote = {"image": ConcatStore(url + "/train-images"),
                  "label": ConcatStore(url + "/train-labels")}
        assert len(remote["image"]) == 60000
        model_r, loss_r = train(remote, args.steps, args.batch_size, args.seed)
        acc_r = accuracy(model_r, paths["test"])
        used = cache_bytes(cache_dir)
        print(f"{url}: {args.steps} steps in {time.perf_counter() - t0:.1f} s, "
              f"loss {np.mean(loss_r[-100:]):.4f}, test accuracy {acc_r:.4f}; cache cap "
              f"{args.cache_bytes} for {data_bytes / fm.MIB:.1f} MiB of data, "
              f"{used / fm.MIB:.1f} MiB cached at the end")
        for s in remote.values():
            s.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if args.cache_dir is None:
            shutil.rmtree(cache_dir, ignore_errors=True)
    if acc_r != acc_l or loss_r != loss_l:
        print(f"fashion_mnist_remote: the runs differ: accuracy {acc_r} vs {acc_l}")
        return 1
    if acc_r < args.min_accuracy:
        print(f"fashion_mnist_remote: accuracy {acc_r:.4f} is below {args.min_accuracy}")
        return 1
    print("same batches, same losses, same accuracy from the object store as from local disk")
    return 0


if __name__ == "__main__":
    sys.exit(main())
