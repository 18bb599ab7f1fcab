#!/usr/bin/env python3
"""Fashion-MNIST from disk to a trained classifier, through every layer.

The main job of loaderx-in-C (README command 1):

1. Ingest Debian's ``dataset-fashion-mnist`` (gzip'd IDX files: 60,000 train
   and 10,000 test images, 28x28 uint8, with uint8 labels) into zstd
   DenseStores: images ``(28, 28)`` ``uint8``, labels scalar ``int64``.
   A second run reuses the stores (``create`` refuses an existing path, so
   the job opens what is there).
2. Measure the loader alone: a cyclic DataLoader at batch 256 over the two
   training streams, in batches/s and MiB/s of logical payload.
3. Train a small MLP (784 -> 128 -> 10, ReLU, softmax cross-entropy, SGD
   with momentum, numpy only) for a fixed number of steps from the loader.
4. Evaluate on the 10,000 test images with one finite pass (PassLoader:
   every image exactly once, in order, the last batch partial) and print
   the accuracy.

Usage:
    python3 examples/fashion_mnist.py [--data-dir DIR] [--store-dir DIR]
                                      [--steps N] [--batch-size B]
"""
import argparse
import gzip
import os
import shutil
import sys
import time

import numpy as np

from loaderx.dataloader import DataLoader, PassLoader
from loaderx.zrecord import CorruptStoreError, DenseStore, NotAStoreError

DATA_DIR = "/usr/share/datasets/fashion-mnist"
FILES = {
    "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", 60000),
    "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz", 10000),
}
CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
           "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot")
MIB = 1024 * 1024


def read_idx(path):
    """Read a gzip'd IDX file (big-endian header: magic, dims) as an ndarray.

    The magic's third byte is the element type (0x08 = uint8, the only one
    Fashion-MNIST uses) and its fourth the number of dimensions.
    Raises ValueError on a malformed file.
    """
    with gzip.open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise ValueError(f"{path}: not a uint8 IDX file")
    ndim = raw[3]
    dims = np.frombuffer(raw, dtype=">u4", count=ndim, offset=4).astype(np.int64)
    header = 4 + 4 * ndim
    if len(raw) - header != int(np.prod(dims)):
        raise ValueError(f"{path}: payload is {len(raw) - header} bytes, "
                         f"header says {tuple(dims)}")
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(tuple(dims))


def progress(label, done, total, width=30):
    """A one-line progress bar, redrawn in place on a terminal; in a log
    (stdout not a terminal) only the finished line is written."""
    tty = sys.stdout.isatty()
    if not tty and done != total:
        return
    filled = width * done // total
    bar = "#" * filled + "-" * (width - filled)
    end = "\n" if done == total else ""
    print(f"{chr(13) if tty else ''}  {label:<14} [{bar}] {done:>6}/{total}", end=end, flush=True)


def ingest(array, path, label, codec, chunk=4096):
    """Write `array` (records along axis 0) into a new DenseStore of `codec`
    (zstd for the images; raw for the labels: zstd cannot shrink an 8-byte
    record, it would store a 21-byte frame and decode it on every read).

    Writes to ``path + '.partial'`` and renames at the end, so an
    interrupted ingest never leaves a half-filled store at `path`.
    """
    tmp = path + ".partial"
    if os.path.exists(tmp):
        shutil.rmtree(tmp)
    with DenseStore.create(tmp, array.dtype, array.shape[1:], codec=codec) as ds:
        for start in range(0, len(array), chunk):
            ds.append(array[start:start + chunk])
            progress(label, min(start + chunk, len(array)), len(array))
    os.rename(tmp, path)


def dir_bytes(path):
    return sum(e.stat().st_size for e in os.scandir(path) if e.is_file())


def usable(path, count):
    """True if `path` holds a complete store of `count` records. A store this
    job wrote that no longer opens (say, one written by an older build with
    another header format) or is short is removed, so it is ingested again:
    the stores here are a cache of the IDX files."""
    if not os.path.exists(path):
        return False
    try:
        with DenseStore.open(path, readonly=True) as ds:
            if len(ds) == count:
                return True
            reason = f"{len(ds)} records, expected {count}"
    except (NotAStoreError, CorruptStoreError) as exc:
        reason = str(exc)
    print(f"  {path}: {reason}; ingesting it again")
    shutil.rmtree(path)
    return False


def prepare_stores(data_dir, store_dir):
    """Open the four stores, ingesting them first if they are missing."""
    paths = {}
    for split, (img_file, lbl_file, count) in FILES.items():
        img_path = os.path.join(store_dir, split, "images")
        lbl_path = os.path.join(store_dir, split, "labels")
        paths[split] = (img_path, lbl_path)
        ready = [usable(p, count) for p in (img_path, lbl_path)]  # checks (and clears) both
        if all(ready):
            print(f"  {split:<14} reusing the stores in {os.path.dirname(img_path)}")
            continue
        os.makedirs(os.path.join(store_dir, split), exist_ok=True)
        images = read_idx(os.path.join(data_dir, img_file))
        labels = read_idx(os.path.join(data_dir, lbl_file)).astype(np.int64)
        if images.shape != (count, 28, 28) or labels.shape != (count,):
            raise ValueError(f"{split}: unexpected shapes {images.shape}, {labels.shape}")
        for arr, path, what, codec in ((images, img_path, "images", "zstd"),
                                       (labels, lbl_path, "labels", "raw")):
            if not os.path.exists(path):
                ingest(arr, path, f"{split} {what}", codec)
    return paths


def report_sizes(paths):
    print("stores:")
    total_logical = total_disk = 0
    for split, pair in paths.items():
        for path in pair:
            with DenseStore.open(path, readonly=True) as ds:
                logical = len(ds) * ds.dtype.itemsize * int(np.prod(ds.item_shape, dtype=np.int64))
                disk = dir_bytes(path)
                print(f"  {split + '/' + os.path.basename(path):<14} {len(ds):>6} records "
                      f"{str(ds.dtype):>6} {str(ds.item_shape):<9} {ds.codec:<4} "
                      f"{logical / MIB:7.2f} MiB -> {disk / MIB:6.2f} MiB on disk "
                      f"({logical / disk:.2f}x)")
                total_logical += logical
                total_disk += disk
    print(f"  {'total':<14} {total_logical / MIB:38.2f} MiB -> {total_disk / MIB:6.2f} MiB "
          f"on disk ({total_logical / total_disk:.2f}x)")


class MLP:
    """784 -> hidden -> 10 with ReLU; float32 weights, He initialisation."""

    def __init__(self, hidden=128, seed=0):
        rng = np.random.default_rng(seed)
        self.w1 = (rng.standard_normal((784, hidden)) * np.sqrt(2 / 784)).astype(np.float32)
        self.b1 = np.zeros(hidden, np.float32)
        self.w2 = (rng.standard_normal((hidden, 10)) * np.sqrt(2 / hidden)).astype(np.float32)
        self.b2 = np.zeros(10, np.float32)
        self.params = [self.w1, self.b1, self.w2, self.b2]
        self.velocity = [np.zeros_like(p) for p in self.params]

    def logits(self, x):
        h = np.maximum(x @ self.w1 + self.b1, 0)
        return h @ self.w2 + self.b2, h

    def step(self, x, y, lr, momentum=0.9):
        """One SGD step on a batch x (B, 784) float32, y (B,) int64; returns the loss."""
        z, h = self.logits(x)
        z -= z.max(axis=1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(axis=1, keepdims=True)
        n = len(y)
        loss = -np.log(p[np.arange(n), y] + 1e-12).mean()
        dz = p
        dz[np.arange(n), y] -= 1
        dz /= n
        dh = (dz @ self.w2.T) * (h > 0)
        grads = [x.T @ dh, dh.sum(0), h.T @ dz, dz.sum(0)]
        for param, vel, grad in zip(self.params, self.velocity, grads):
            vel *= momentum
            vel -= lr * grad
            param += vel
        return float(loss)

    def predict(self, x):
        return self.logits(x)[0].argmax(axis=1)


def to_features(batch):
    """The loader's transform: uint8 (B, 28, 28) images -> float32 (B, 784) in [0, 1]."""
    x = batch["image"].reshape(len(batch["image"]), -1).astype(np.float32)
    x *= 1.0 / 255.0
    return {"x": x, "y": batch["label"]}


def train(streams, steps, batch_size, seed, log=print):
    """Train an MLP for `steps` SGD steps from a cyclic DataLoader over
    `streams` ({"image": (28, 28) uint8, "label": int64} stores); returns
    (model, loader state, seconds)."""
    model = MLP(seed=seed)
    loader = DataLoader(streams, batch_size=batch_size, mode="cyclic", seed=seed,
                        transform=to_features)
    t0 = time.perf_counter()
    losses = []
    for step in range(steps):
        batch = next(loader)
        lr = 0.05 if step < steps * 2 // 3 else 0.01
        losses.append(model.step(batch["x"], batch["y"], lr))
        if (step + 1) % 500 == 0 or step + 1 == steps:
            log(f"  step {step + 1:>5}/{steps}: loss {np.mean(losses[-500:]):.4f}")
    train_time = time.perf_counter() - t0
    state = loader.state()
    loader.close()
    return model, state, train_time


def evaluate(model, test, log=print):
    """Accuracy on one pass over the `test` streams, each image exactly once
    (the endless loader would wrap around and count some images twice)."""
    correct = np.zeros(10, dtype=np.int64)
    total = np.zeros(10, dtype=np.int64)
    seen = 0
    passes = PassLoader(test, batch_size=1000, transform=to_features)
    for batch in passes:
        pred = model.predict(batch["x"])
        y = batch["y"]
        np.add.at(total, y, 1)
        np.add.at(correct, y[pred == y], 1)
        seen += len(y)
    assert seen == len(test["label"]), (seen, len(test["label"]))
    accuracy = float(correct.sum() / total.sum())
    per_class = correct / np.maximum(total, 1)
    worst = int(np.argmin(per_class))
    log(f"test accuracy: {accuracy:.4f} on {seen} images in {len(passes)} batches "
        f"(weakest class: {CLASSES[worst]} {per_class[worst]:.2f})")
    return accuracy


def main(argv=None):
    cache = os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache"))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", default=DATA_DIR, help="directory of the IDX .gz files")
    ap.add_argument("--store-dir", default=os.path.join(cache, "loaderx", "fashion-mnist"),
                    help="where the stores live (reused when present)")
    ap.add_argument("--steps", type=int, default=3000, help="training steps")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    missing = [f for split in FILES.values() for f in split[:2]
               if not os.path.exists(os.path.join(args.data_dir, f))]
    if missing:
        sys.exit(f"fashion_mnist: {args.data_dir} lacks {', '.join(missing)} "
                 "(install Debian's dataset-fashion-mnist)")

    print(f"Fashion-MNIST -> loaderx stores in {args.store_dir}")
    t0 = time.perf_counter()
    paths = prepare_stores(args.data_dir, args.store_dir)
    print(f"stores ready in {time.perf_counter() - t0:.2f} s")
    report_sizes(paths)

    # The loader only reads: read-only opens, so other jobs can read (and
    # one can write) the same stores at the same time.
    train_images = DenseStore.open(paths["train"][0], readonly=True)
    train_labels = DenseStore.open(paths["train"][1], readonly=True)
    streams = {"image": train_images, "label": train_labels}
    batch_bytes = args.batch_size * (28 * 28 + 8)

    # The loader alone: gather + hand-out, no model.
    n = 500
    with DataLoader(streams, batch_size=args.batch_size, mode="cyclic", seed=args.seed) as loader:
        next(loader)  # warm up: workers started, first batches in flight
        t0 = time.perf_counter()
        for _ in range(n):
            batch = next(loader)
        dt = time.perf_counter() - t0
    assert batch["image"].shape == (args.batch_size, 28, 28) and batch["label"].shape == (args.batch_size,)
    print(f"loader: {n / dt:,.0f} batches/s, {n * batch_bytes / MIB / dt:,.1f} MiB/s "
          f"(batch {args.batch_size}: images (B, 28, 28) uint8 + labels (B,) int64)")

    model, state, train_time = train(streams, args.steps, args.batch_size, args.seed)
    print(f"trained {args.steps} steps in {train_time:.1f} s "
          f"({args.steps / train_time:,.0f} steps/s); loader state {state}")

    with DenseStore.open(paths["test"][0], readonly=True) as ti, \
            DenseStore.open(paths["test"][1], readonly=True) as tl:
        accuracy = evaluate(model, {"image": ti, "label": tl})
    train_images.close()
    train_labels.close()
    if accuracy < 0.80:
        sys.exit(f"fashion_mnist: accuracy {accuracy:.4f} is below the 0.80 target")
    return 0


if __name__ == "__main__":
    sys.exit(main())
