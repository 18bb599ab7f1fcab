"""The Python side of the cross-language determinism test: for every case
of cases.txt, the loader's steps as `<step> <indices> <sha256>` lines into
OUT/<case>.python (see run.sh). Usage: cross.py CASES STORES OUT"""

import glob
import hashlib
import os
import sys

import numpy as np

from loaderx.dataloader import DataLoader, PassLoader
from loaderx.shards import ConcatStore, Mixture
from loaderx.zrecord import open_store

INTS = ("batch_size", "seed", "rank", "world_size", "steps", "pass", "shuffle", "drop_last",
        "epoch", "even_batches", "window", "pack_length", "pack_window", "concat",
        "num_workers")


def parse(path):
    cases = []
    for line in open(path):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, *kv = line.split()
        c = dict(x.split("=", 1) for x in kv)
        for k in INTS:
            if k in c:
                c[k] = int(c[k])
        cases.append((name, c))
    return cases


def line(step, indices, batch):
    h = hashlib.sha256()
    for k in sorted(batch):
        v = batch[k]
        if k == "mask" and v.dtype == np.bool_:
            continue  # an even_batches pass's mask: Valid, not batch bytes
        h.update(np.ascontiguousarray(v).tobytes())
    return f"{step} {','.join(str(int(i)) for i in indices)} {h.hexdigest()}\n"


def run(c, stores, opened):
    names = c["streams"].split(",")
    if "mixture" in c:
        sources = {}
        weights = []
        for part in c["mixture"].split(","):
            src, w = part.split(":")
            sources[src] = {n: os.path.join(stores, f"{src}.{n}") for n in names}
            weights.append(float(w))
        streams = Mixture(sources, weights)
        opened.append(streams)
    elif c.get("concat"):
        streams = {n: ConcatStore(sorted(glob.glob(os.path.join(stores, n + ".shard*"))))
                   for n in names}
        opened.extend(streams.values())
    else:
        streams = {n: open_store(os.path.join(stores, n), readonly=True) for n in names}
        opened.extend(streams.values())
    kw = dict(batch_size=c["batch_size"], seed=c.get("seed", 0), rank=c.get("rank", 0),
              world_size=c.get("world_size", 1), num_workers=c.get("num_workers", 1))
    mode = c.get("mode", "cyclic")
    if mode == "pack":
        kw.update(pack_length=c["pack_length"])
        for k in ("pack_policy", "pack_window", "pack_overlong"):
            if k in c:
                kw[k] = c[k]
    out = []
    if c.get("pass"):
        p = PassLoader(streams, shuffle=bool(c.get("shuffle")), epoch=c.get("epoch", 0),
                       drop_last=bool(c.get("drop_last")),
                       even_batches=bool(c.get("even_batches")), **kw)
        it = iter(p)
        try:
            for b in it:
                out.append(line(it.step - 1, it.last_indices, b))
        finally:
            p.close()
        return out
    if mode == "bucket":
        lengths = np.fromfile(os.path.join(stores, "lengths.u32"), dtype="<u4")
        kw.update(lengths=lengths, window=c["window"])
    with DataLoader(streams, mode=mode, **kw) as dl:
        for _ in range(c["steps"]):
            b = next(dl)
            out.append(line(dl.step - 1, dl.last_indices, b))
    return out


def main(cases, stores, outdir):
    for name, c in parse(cases):
        opened = []
        try:
            lines = run(c, stores, opened)
        finally:
            for s in reversed(opened):
                s.close()
        with open(os.path.join(outdir, name + ".python"), "w") as f:
            f.writelines(lines)


if __name__ == "__main__":
    main(*sys.argv[1:4])
