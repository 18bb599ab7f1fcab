#!/usr/bin/env python3
"""Benchmark (not a test): ingest of an image folder, in records/s, against
the peers' own writers, interleaved repeat by repeat.

    python3 bench/bench_ingest.py [--n 2500] [--repeats 3] [--dir DIR] [--json FILE]

The folder is the benchmark's dense vision set (CHW uint8 images of 147 KiB,
bench/common.py) written out by this script as one raw file per image. Each
repeat runs, in an order rotated every repeat, over the same folder (cached
after its first read, so every method starts from the same cache state):

- ``zr-raw`` / ``zr-zstd``: ``zr ingest --codec raw|zstd FOLDER STORE``, the
  command as a user runs it (process start included; the store is synced
  before the command returns);
- ``litdata`` / ``litdata-zstd``: LitData's ``optimize`` with a function
  returning each file's bytes, every CPU as its workers, compression none
  or zstd (LitData writes its chunks without fsync);
- ``mds`` / ``mds-zstd``: Mosaic Streaming's ``MDSWriter``, one ``bytes``
  column, compression none or zstd (no fsync), when the package imports.

A peer whose package is missing is reported as skipped with the reason.
Prints records/s per method (median and range) and the per-repeat ratios of
each zr method against each peer, with the load average."""
import argparse
import contextlib
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)


def find_zr():
    for bd in (os.environ.get("BUILD_DIR"), "build"):
        if bd:
            p = bd if os.path.isabs(bd) else os.path.join(ROOT, bd)
            p = os.path.join(p, "tools", "zr")
            if os.path.isfile(p) and os.access(p, os.X_OK):
                return p
    p = shutil.which("zr")
    if not p:
        raise RuntimeError("cannot find the zr tool (build it, or put it on PATH)")
    return p


def write_folder(d, n):
    from common import vision_dense
    data = vision_dense(n)
    os.makedirs(d, exist_ok=True)
    for i in range(n):
        with open(os.path.join(d, f"img{i:06d}.raw"), "wb") as f:
            f.write(data[i].tobytes())
    return data[0].nbytes


def read_bytes(path):
    with open(path, "rb") as f:
        return {"image": f.read()}


def m_zr(folder, out, codec, zr):
    t0 = time.perf_counter()
    subprocess.run([zr, "ingest", "-q", "--codec", codec, folder, os.path.join(out, "store")],
                   check=True, capture_output=True)
    return time.perf_counter() - t0


def m_litdata(folder, out, compression):
    from litdata import optimize
    files = sorted(os.path.join(folder, f) for f in os.listdir(folder))
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        optimize(fn=read_bytes, inputs=files, output_dir=os.path.join(out, "ld"),
                 chunk_bytes="64MB", compression=compression, num_workers=os.cpu_count() or 1)
    return time.perf_counter() - t0


def m_mds(folder, out, compression):
    from streaming import MDSWriter
    files = sorted(os.path.join(folder, f) for f in os.listdir(folder))
    t0 = time.perf_counter()
    with MDSWriter(out=os.path.join(out, "mds"), columns={"image": "bytes"},
                   compression=compression, size_limit=64 << 20) as w:
        for p in files:
            with open(p, "rb") as f:
                w.write({"image": f.read()})
    return time.perf_counter() - t0


def available(name):
    """None when the peer's package imports, else the reason it does not."""
    mod = {"litdata": "litdata", "mds": "streaming"}[name]
    try:
        __import__(mod)
        return None
    except Exception as exc:  # an import error of the package or of its dependencies
        return f"{type(exc).__name__}: {exc}".splitlines()[0]


def measure(n=2500, repeats=3, dir=None, log=print):
    base = dir or tempfile.mkdtemp(prefix="zr_bench_ingest_")
    os.makedirs(base, exist_ok=True)
    zr = find_zr()
    methods = {"zr-raw": lambda f, o: m_zr(f, o, "raw", zr),
               "zr-zstd": lambda f, o: m_zr(f, o, "zstd", zr)}
    skipped = {}
    for peer, fns in (("litdata", {"litdata": lambda f, o: m_litdata(f, o, None),
                                   "litdata-zstd": lambda f, o: m_litdata(f, o, "zstd")}),
                      ("mds", {"mds": lambda f, o: m_mds(f, o, None),
                               "mds-zstd": lambda f, o: m_mds(f, o, "zstd")})):
        why = available(peer)
        if why:
            skipped[peer] = why
        else:
            methods.update(fns)
    names = list(methods)
    try:
        folder = os.path.join(base, "images")
        rec = write_folder(folder, n)
        log(f"ingest: {n} files of {rec} B; methods {', '.join(names)}"
            + "".join(f"; {k} skipped ({v})" for k, v in skipped.items()))
        per = {m: [] for m in names}
        loads = []
        for r in range(repeats):
            order = names[r % len(names):] + names[:r % len(names)]
            for m in order:
                out = os.path.join(base, f"out-{m}")
                shutil.rmtree(out, ignore_errors=True)
                os.makedirs(out)
                per[m].append(n / methods[m](folder, out))
                shutil.rmtree(out, ignore_errors=True)
            loads.append(os.getloadavg()[0])
        res = {"n": n, "record_bytes": rec, "loads": loads, "skipped": skipped,
               "records_s": per, "ratios": {}}
        for m in names:
            v = per[m]
            log(f"  {m:13s} {statistics.median(v):9.0f} records/s [{min(v):.0f}..{max(v):.0f}]")
        for ours, peers in (("zr-raw", ("litdata", "mds")), ("zr-zstd", ("litdata-zstd", "mds-zstd"))):
            for p in peers:
                if p in per:
                    rs = [a / b for a, b in zip(per[ours], per[p])]
                    res["ratios"][f"{ours}/{p}"] = rs
                    log(f"  {ours}/{p}: median {statistics.median(rs):.2f}x "
                        f"[{min(rs):.2f}..{max(rs):.2f}]")
        log("  load average (1 min) after each repeat: " + ", ".join(f"{x:.1f}" for x in loads))
        return res
    finally:
        if not dir:
            shutil.rmtree(base, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2500)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    res = measure(a.n, a.repeats, a.dir, log=lambda s: print(s, flush=True))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
