"""Stores at a URL: the loader reading from nginx and from an S3 server
(SeaweedFS), cold (empty cache) and warm, against the same store read
locally, Mosaic Streaming and LitData reading their own formats of the same
records from the same S3 server, and a plain parallel range download of
the same bytes (what the link delivers). Unthrottled (loopback) and
throttled (the fault proxy's shared rate limit: tc netem on loopback would
slow every process of the machine, other people's included).

    python3 bench/bench_remote.py [--records N] [--rate MBPS] [--out FILE.json]

Every contender reads one full epoch of the same N records in a random
order (its own shuffle), batch 64, in one process (loaderx with two native
worker threads; the peers in-process, which ran fastest for them here);
each checks records against the source. Cold epochs are timed from the
open with an empty cache, warm ones re-read with another order. Prints a Markdown table
(records/s and MB/s of record bytes) and writes the figures as JSON.
Servers run on 127.0.0.1 and stop at the end.
"""
import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "python"))
from remote_servers import FaultProxy, Nginx, SeaweedFS  # noqa: E402

SHAPE = (3, 64, 64)  # 12 KiB records, raw
BATCH = 64
BUCKET = "bench"


def records(n):
    rng = np.random.default_rng(7)
    return rng.integers(0, 256, (n,) + SHAPE, dtype=np.uint8)


# ---------------------------------------------------------------- ours

def run_loader(src, data, epochs, env):
    """One DataLoader epoch at a time over `src` (path or URL): records/s per epoch."""
    from loaderx.dataloader import DataLoader
    from loaderx.zrecord import DenseStore
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        # Epoch 0 is timed from the open (cold: nothing cached yet), its
        # first batch checked against the records; epoch 1 re-reads
        # (warm: a new loader, another order, over the cached blocks).
        rates = []
        t0 = time.perf_counter()
        s = DenseStore.open(src, readonly=True)
        steps = len(s) // BATCH
        for e in range(epochs):
            if e:
                t0 = time.perf_counter()
            loader = DataLoader({"x": s}, batch_size=BATCH, mode="cyclic", seed=1 + e,
                                num_workers=2)
            first = next(loader)
            np.testing.assert_array_equal(first["x"],
                                          data[np.asarray(loader.last_indices).reshape(-1)])
            for _ in range(steps - 1):
                next(loader)
            dt = time.perf_counter() - t0
            loader.close()
            rates.append(steps * BATCH / dt)
        s.close()
        return rates
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def write_ours(root, data):
    from loaderx.zrecord import DenseStore
    s = DenseStore.create(root / "ours", "u1", SHAPE, codec="raw")
    s.append(data)
    s.close()
    return root / "ours"


# --------------------------------------------------------------- peers

def s3_client(endpoint, s3):
    import boto3
    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=s3.ACCESS,
                        aws_secret_access_key=s3.SECRET, region_name="us-east-1")


def upload_dir(client, local, prefix):
    for p in sorted(Path(local).rglob("*")):
        if p.is_file():
            client.upload_file(str(p), BUCKET, f"{prefix}/{p.relative_to(local)}")


def write_mosaic(root, data):
    from streaming import MDSWriter
    out = root / "mds"
    with MDSWriter(out=str(out), columns={"x": "bytes"}, compression=None,
                   size_limit=8 << 20) as w:
        for i in range(len(data)):
            w.write({"x": data[i].tobytes()})
    return out


def _collate_x(batch):
    return [r["x"] for r in batch]


def run_mosaic(data, endpoint, s3, epochs):
    import torch
    from streaming import StreamingDataset
    from streaming.base.util import clean_stale_shared_memory
    os.environ["S3_ENDPOINT_URL"] = endpoint
    os.environ["AWS_ACCESS_KEY_ID"] = s3.ACCESS
    os.environ["AWS_SECRET_ACCESS_KEY"] = s3.SECRET
    cache = tempfile.mkdtemp(prefix="mds-cache-")
    rates = []
    try:
        clean_stale_shared_memory()
        t0 = time.perf_counter()
        ds = StreamingDataset(remote=f"s3://{BUCKET}/mds", local=cache, shuffle=True,
                              shuffle_seed=1, batch_size=BATCH)
        for e in range(epochs):
            if e:
                t0 = time.perf_counter()
            # In-process: with worker processes its epochs ran at ~100
            # records/s here (a process start and shared-memory set-up each).
            dl = torch.utils.data.DataLoader(ds, batch_size=BATCH, num_workers=0,
                                             collate_fn=_collate_x)
            n = 0
            for b in dl:
                n += len(b)
            rates.append(n / (time.perf_counter() - t0))
        # checked after timing: indexing downloads the shard
        first = ds[0]["x"]
        assert bytes(first) == data[0].tobytes()
        return rates
    finally:
        shutil.rmtree(cache, ignore_errors=True)
        clean_stale_shared_memory()


def _lit_item(npy, i):
    """LitData's optimize runs this in a spawned worker: module level, and
    the records from a memory-mapped .npy."""
    return {"x": np.load(npy, mmap_mode="r")[i].tobytes()}


def write_litdata(root, data):
    import functools
    import litdata as ld
    out = root / "lit"
    npy = root / "records.npy"
    np.save(npy, data)
    ld.optimize(fn=functools.partial(_lit_item, str(npy)), inputs=list(range(len(data))),
                output_dir=str(out), chunk_bytes="8MB", num_workers=1, mode="overwrite")
    return out


def run_litdata(data, endpoint, s3, epochs):
    import litdata as ld
    import litdata.streaming.downloader as lddl
    # LitData's obstore path refuses a plain-http endpoint (it does not pass
    # allow_http); its own boto3 path, which it uses wherever obstore is
    # unusable, reads the same objects.
    lddl._OBSTORE_AVAILABLE = False
    cache = tempfile.mkdtemp(prefix="lit-cache-")
    rates = []
    try:
        opts = {"endpoint_url": endpoint, "aws_access_key_id": s3.ACCESS,
                "aws_secret_access_key": s3.SECRET}
        t0 = time.perf_counter()
        ds = ld.StreamingDataset(f"s3://{BUCKET}/lit", cache_dir=cache, shuffle=True, seed=1,
                                 storage_options=opts)
        # In-process, so the boto3 switch above holds (workers re-import).
        dl = ld.StreamingDataLoader(ds, batch_size=BATCH, num_workers=0)
        for e in range(epochs):
            if e:
                t0 = time.perf_counter()
            n = 0
            for b in dl:
                n += len(b["x"])
            rates.append(n / (time.perf_counter() - t0))
            assert n > 0
        return rates
    finally:
        shutil.rmtree(cache, ignore_errors=True)


# ------------------------------------------------- the link's own rate

def plain_download(base_url, names_sizes, threads=16, part=8 << 20):
    """Bytes/s of a plain parallel range download of the files (unsigned HTTP)."""
    jobs = [(n, lo, min(size, lo + part)) for n, size in names_sizes for lo in range(0, size, part)]

    def get(job):
        n, lo, hi = job
        req = urllib.request.Request(f"{base_url}/{n}", headers={"Range": f"bytes={lo}-{hi - 1}"})
        with urllib.request.urlopen(req) as r:
            return len(r.read())
    t0 = time.perf_counter()
    with ThreadPoolExecutor(threads) as ex:
        total = sum(ex.map(get, jobs))
    return total / (time.perf_counter() - t0)


# ------------------------------------------------------------------ run

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=4096)
    ap.add_argument("--rate", type=float, default=40.0, help="throttle, MB/s (0: skip)")
    ap.add_argument("--out", default="bench/remote.json")
    ap.add_argument("--skip-peers", action="store_true")
    ap.add_argument("--only", default="local,nginx,s3,mosaic,litdata",
                    help="comma list of contenders to run")
    a = ap.parse_args()
    data = records(a.records)
    rec_bytes = data[0].nbytes
    work = Path(tempfile.mkdtemp(prefix="zr-bench-remote-"))
    res = {"records": a.records, "record_bytes": rec_bytes, "batch": BATCH,
           "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}",
           "rows": []}

    def row(name, where, rates, note=""):
        r = {"contender": name, "where": where, "rec_s": rates,
             "mb_s": [x * rec_bytes / 1e6 for x in rates], "note": note}
        res["rows"].append(r)
        print(f"{name:28s} {where:12s} " + "  ".join(f"{x:9.0f} rec/s" for x in rates), flush=True)

    try:
        root = work / "srv"
        root.mkdir()
        ours = write_ours(root, data)
        files = [(p.name, p.stat().st_size) for p in ours.iterdir() if p.suffix in (".chunk", ".loc")]
        peers = not a.skip_peers
        if peers:
            try:
                mds = write_mosaic(work, data)
                lit = write_litdata(work, data)
            except ImportError as e:
                print(f"peers skipped: {e} (pip install -r requirements/bench-remote.txt)")
                peers = False
        only = set(a.only.split(","))
        if "local" in only:
            row("loaderx local", "local disk", run_loader(str(ours), data, 2, {}))
        with Nginx(root) as ng, SeaweedFS(work / "weed") as s3:
            s3.make_bucket(BUCKET)
            env_s3 = s3.env()
            os.environ.update(env_s3)
            from loaderx.shards import push
            push(str(ours), f"s3://{BUCKET}/ours")
            if peers:
                c = s3_client(s3.endpoint, s3)
                upload_dir(c, mds, "mds")
                upload_dir(c, lit, "lit")
            for label, rate in (("unthrottled", 0), ("throttled", a.rate)):
                if label == "throttled" and not rate:
                    continue
                with FaultProxy(ng.port, rate=int(rate * 1e6)) as pn, \
                        FaultProxy(s3.port, rate=int(rate * 1e6)) as ps:
                    http_base = pn.url if rate else ng.url
                    s3_ep = ps.url if rate else s3.endpoint
                    link = plain_download(f"{http_base}/ours", files)
                    res.setdefault("link", {})[label] = link
                    print(f"{label}: plain parallel range download {link / 1e6:.1f} MB/s", flush=True)
                    cache = work / f"cache-{label}"
                    env = {"ZR_CACHE_DIR": str(cache), "ZR_CACHE_BYTES": "1G"}
                    if "nginx" in only:
                        row(f"loaderx nginx ({label})", "cold, warm",
                            run_loader(f"{http_base}/ours", data, 2, env))
                    shutil.rmtree(cache, ignore_errors=True)
                    env_e = dict(env, AWS_ENDPOINT_URL=s3_ep)
                    if "s3" in only:
                        row(f"loaderx S3 ({label})", "cold, warm",
                            run_loader(f"s3://{BUCKET}/ours", data, 2, env_e))
                    shutil.rmtree(cache, ignore_errors=True)
                    if peers:
                        for name, fn in (("Mosaic Streaming", run_mosaic), ("LitData", run_litdata)):
                            if name.split()[0].lower() not in only:
                                continue
                            try:
                                row(f"{name} S3 ({label})", "cold, warm", fn(data, s3_ep, s3, 2))
                            except Exception as e:  # report, never hide
                                print(f"{name} failed: {type(e).__name__}: {e}", flush=True)
                                res["rows"].append({"contender": name, "where": label,
                                                    "error": f"{type(e).__name__}: {e}"})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    Path(a.out).write_text(json.dumps(res, indent=1))
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
