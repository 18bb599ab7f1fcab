#!/usr/bin/env python3
"""The benchmark harness: every table of docs/BENCHMARKS.md in one run.

    python3 bench/run.py            # full run (~20 min on 2 cores), writes docs/BENCHMARKS.md
    python3 bench/run.py --quick    # small sizes, a few seconds: the harness's own test
    python3 bench/run.py --install  # first pip-install the pinned peers (requirements/bench.txt)

Workloads (same generator and seed for every backend): dense vision,
ragged vision, fixed token blocks, ragged token records (real GPT-2 BPE
tokens of linux-doc-6.1, prepared once by bench/prepare.py), small rows
(int32[8], 32-byte records, 20,000 per batch), the scale grid (time per
record against batch size and record size, bench/scale.py), the sampler,
the loader end to end (flip and identity transforms), the machine's limits
(memcpy, zstd decompression) and hyperfine command benchmarks. Every backend is required: a missing
package is an error unless the backend is excluded with --exclude NAME.
Results go to OUT/BENCHMARKS.md, OUT/img/*.png and a JSON file."""
import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import backends  # noqa: E402
import prepare  # noqa: E402
import report  # noqa: E402
import scale  # noqa: E402
from common import (MiB, MissingBackend, Workload, measure_backend, small_rows,  # noqa: E402
                    sweep_and_validate, time_gathers, token_blocks, token_records,
                    vision_dense, vision_ragged)

FULL = {"vision_n": 2500, "vision_batches": 50, "token_n": 200_000, "token_batches": 100,
        "batch": 256, "limit_mib": 256, "sampler_s": 1.0, "loader_batches": 40,
        "bind_n": 1024, "bind_rounds": 100, "bind_calls": 100_000, "loader_rounds": 2,
        "hf_runs": 10, "small_n": 1_000_000, "small_batch": 20_000, "small_batches": 50,
        "scale": scale.FULL, "il_vision_n": 1000, "il_batches": 40, "il_rounds": 5,
        "write_repeats": 5}
QUICK = {"vision_n": 40, "vision_batches": 3, "token_n": 2000, "token_batches": 3,
         "batch": 16, "limit_mib": 16, "sampler_s": 0.02, "loader_batches": 3,
         "bind_n": 256, "bind_rounds": 3, "bind_calls": 2000, "loader_rounds": 1,
         "hf_runs": 2, "small_n": 20_000, "small_batch": 2000, "small_batches": 3,
         "scale": scale.QUICK, "il_vision_n": 40, "il_batches": 3, "il_rounds": 2,
         "write_repeats": 1}

# The small-row workload measures per-record overhead against numpy's own
# fancy index: the peers that store one record per key or chunk would spend
# minutes writing a million 32-byte records and say nothing more.
SMALL_ROWS_BACKENDS = ("zrecord-raw", "zrecord-raw-out", "zrecord-zstd", "npy-mmap-raw")


def log(msg):
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------ machine

def machine():
    info = {"python": platform.python_version(), "numpy": np.__version__,
            "kernel": platform.release(), "cpus": os.cpu_count()}
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        kv = dict(line.split(":", 1) for line in lscpu.splitlines() if ":" in line)
        kv = {k.strip(): v.strip() for k, v in kv.items()}
        info["cpu"] = kv.get("Model name", "?")
        info["caches"] = ", ".join(f"{k.split()[0]} {kv[k]}" for k in
                                   ("L1d cache", "L2 cache", "L3 cache") if k in kv)
    except OSError:
        info["cpu"] = platform.processor()
    with open("/proc/meminfo") as f:
        info["memory_gib"] = int(f.readline().split()[1]) / (1 << 20)
    try:
        with open("/etc/os-release") as f:
            os_rel = dict(line.rstrip().split("=", 1) for line in f if "=" in line)
        info["os"] = os_rel.get("PRETTY_NAME", "?").strip('"')
    except OSError:
        info["os"] = platform.platform()
    return info


# ------------------------------------------------------------------- limits

def memcpy_limit(mib, threads):
    """memcpy bandwidth (GiB/s, read+write counted once) with `threads`
    threads each copying its own slice (numpy releases the GIL)."""
    n = mib * MiB
    src = np.ones(n, dtype=np.uint8)
    dst = np.empty_like(src)
    parts = [(k * n // threads, (k + 1) * n // threads) for k in range(threads)]

    def work(lo, hi):
        np.copyto(dst[lo:hi], src[lo:hi])

    best = 0.0
    for _ in range(5):
        ts = [threading.Thread(target=work, args=p) for p in parts]
        t0 = time.perf_counter()
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        best = max(best, n / (time.perf_counter() - t0))
    return best / MiB


def zstd_frames(wl):
    """wl's records compressed like zrecord's zstd codec (level 3, content
    checksum), one frame each."""
    import zstandard
    cctx = zstandard.ZstdCompressor(level=3, write_checksum=True)
    return [cctx.compress(wl.data[i].tobytes()) for i in range(wl.n)]


def zstd_pass(frames, wl, threads):
    """Seconds for one pass of zstd's own decoder (python-zstandard's C
    multi-frame decoder, checksums verified) over wl's planned batches."""
    import zstandard
    dctx = zstandard.ZstdDecompressor()
    t0 = time.perf_counter()
    for idx in wl.plans:
        dctx.multi_decompress_to_buffer([frames[i] for i in idx.tolist()], threads=threads)
    return time.perf_counter() - t0


def zstd_limit(wl, threads, frames=None):
    """zstd's own decompression speed (logical MiB/s) on the planned
    records of wl: the best of two passes."""
    frames = frames or zstd_frames(wl)
    best = min(zstd_pass(frames, wl, threads) for _ in range(2))
    return sum(wl.plan_bytes(p) for p in wl.plans) / MiB / best


def side_by_side(wl, backend, workdir, limit_mibs, rounds=3):
    """A share-of-a-limit goal measured side by side: `rounds` alternating
    passes of `backend`'s gather over wl's plans (on a freshly written,
    validated store) and of limit_mibs() (one measurement of the limit, in
    MiB/s); the best of each. A table row and a limit measured minutes apart
    carry the host's drift between them."""
    path = os.path.join(workdir, f"{wl.name}-side-by-side")
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    backend.write(path, wl)
    backend.open(path, wl)
    try:
        sweep_and_validate(backend, wl)  # checks every record, and warms the cache
        ours = limit = 0.0
        for _ in range(rounds):
            t, _lat = time_gathers(backend, wl)
            ours = max(ours, sum(wl.plan_bytes(p) for p in wl.plans) / MiB / t)
            limit = max(limit, limit_mibs())
    finally:
        backend.close()
        shutil.rmtree(path, ignore_errors=True)
    return {"workload": wl.name, "backend": backend.name, "rounds": rounds,
            "gather_mibs": ours, "limit_mibs": limit, "share": ours / limit}


def interleaved(cfg, workdir):
    """The second read method, beside the tables' one pass per store: the
    zrecord-raw store's `store[idx]` (a fresh array each call) and numpy's
    `arr[idx]` on `np.load(mmap_mode="r")`, both written and validated
    first, then timed batch by batch in turn (which goes first alternates
    every batch), so both start every batch from the same cache state and
    meet the same load; `il_rounds` passes over `il_batches` random batches.
    Dense vision uses `il_vision_n` records (1,000: a store small enough to
    stay cached, as a user's first epochs over a small set), the token
    blocks and small rows the tables' counts. Per workload: the ratio of
    each pass (numpy's time / ours), its median and range."""
    from backends.numpy_mmap import NpyMmap
    from backends.zrecord import Zrecord
    tok, _ = prepare.load()
    specs = [("vision_dense", lambda: Workload(
                 "vision_dense", "", "dense", vision_dense(cfg["il_vision_n"]), cfg["batch"],
                 cfg["il_batches"])),
             ("token_blocks", lambda: Workload(
                 "token_blocks", "", "dense", token_blocks(tok, cfg["token_n"]), cfg["batch"],
                 cfg["il_batches"])),
             ("small_rows", lambda: Workload(
                 "small_rows", "", "dense", small_rows(cfg["small_n"]), cfg["small_batch"],
                 cfg["il_batches"]))]
    out = {}
    for name, make in specs:
        wl = make()
        pair = [Zrecord("raw"), NpyMmap()]
        paths = []
        try:
            for b in pair:
                path = os.path.join(workdir, f"{name}-interleaved-{b.name}")
                shutil.rmtree(path, ignore_errors=True)
                os.makedirs(path)
                paths.append(path)
                b.write(path, wl)
                b.open(path, wl)
                sweep_and_validate(b, wl)
            ratios, mibs = [], ([], [])
            nbytes = sum(wl.plan_bytes(p) for p in wl.plans)
            for _ in range(cfg["il_rounds"]):
                t = [0.0, 0.0]
                for k, idx in enumerate(wl.plans):
                    for j in ((0, 1) if k % 2 == 0 else (1, 0)):
                        t0 = time.perf_counter()
                        pair[j].gather(idx)
                        t[j] += time.perf_counter() - t0
                ratios.append(t[1] / t[0])
                mibs[0].append(nbytes / MiB / t[0])
                mibs[1].append(nbytes / MiB / t[1])
        finally:
            for b in pair:
                try:
                    b.close()
                except Exception:  # noqa: BLE001 - never opened
                    pass
            for path in paths:
                shutil.rmtree(path, ignore_errors=True)
        r = out[name] = {"records": wl.n, "record_bytes": int(wl.data[0].nbytes),
                         "batches": len(wl.plans), "batch": int(len(wl.plans[0])),
                         "rounds": cfg["il_rounds"], "ratios": ratios,
                         "ratio": float(np.median(ratios)), "zrecord_mibs": mibs[0],
                         "npy_mibs": mibs[1], "load": os.getloadavg()[0]}
        log(f"  interleaved {name}: zrecord-raw store[idx] vs numpy memmap arr[idx]: median "
            f"{r['ratio']:.2f}x [{min(ratios):.2f}..{max(ratios):.2f}] over {len(ratios)} "
            f"passes (load {r['load']:.1f})")
        del wl
    return out


def writes(cfg, workdir):
    """The write goals, side by side (bench/bench_write.py, every method in
    turn, repeat by repeat)."""
    import bench_write
    q = cfg is QUICK
    return bench_write.measure(repeats=cfg["write_repeats"],
                               vision_n=cfg["vision_n"] if q else 2500,
                               blocks_n=cfg["token_n"], dir=os.path.join(workdir, "writes"))


def ingest(cfg, workdir):
    """zr ingest of an image folder against LitData's optimize and Mosaic's
    MDSWriter, records/s (bench/bench_ingest.py, every method in turn)."""
    import bench_ingest
    return bench_ingest.measure(n=cfg["vision_n"] if cfg is QUICK else 2500,
                                repeats=cfg["write_repeats"] if cfg is QUICK else 3,
                                dir=os.path.join(workdir, "ingest"), log=log)


# ---------------------------------------------------------------- workloads

def workloads(cfg):
    tok, lens = prepare.load()
    nv, nt, b = cfg["vision_n"], cfg["token_n"], cfg["batch"]
    yield lambda: Workload("vision_dense", "Dense vision: CHW uint8 (3, 224, 224)", "dense",
                           vision_dense(nv), b, cfg["vision_batches"])
    yield lambda: Workload("vision_ragged", "Ragged vision: CHW uint8 (3, H, W), H, W "
                           "lognormal in 64..512", "ragged", vision_ragged(nv), b,
                           cfg["vision_batches"])
    yield lambda: Workload("token_blocks", "Fixed token blocks: int32[512] GPT-2 BPE",
                           "dense", token_blocks(tok, nt), b, cfg["token_batches"])
    yield lambda: Workload("token_ragged", "Ragged token records: int32, 16..512 tokens",
                           "ragged", token_records(tok, lens, nt), b, cfg["token_batches"])
    yield lambda: Workload("small_rows", "Small rows: int32[8] (32-byte records), "
                           f"{cfg['small_batch']:,} random rows per batch", "dense",
                           small_rows(cfg["small_n"]), cfg["small_batch"],
                           cfg["small_batches"], backends=SMALL_ROWS_BACKENDS)


def shares(cfg, chosen, wl, workdir):
    """The two share goals of dense vision, each side by side with its limit:
    zrecord-raw against all-thread memcpy, zrecord-zstd against zstd's own
    all-thread decoder."""
    threads = os.cpu_count() or 1
    frames = zstd_frames(wl)
    mib = sum(wl.plan_bytes(p) for p in wl.plans) / MiB
    limits = {"memcpy_share": lambda: memcpy_limit(cfg["limit_mib"], threads),
              "zstd_share": lambda: mib / zstd_pass(frames, wl, threads)}
    out = {}
    for key, name in (("memcpy_share", "zrecord-raw"), ("zstd_share", "zrecord-zstd")):
        b = [x for x in chosen if x.name == name]
        if b:
            r = out[key] = side_by_side(wl, b[0], workdir, limits[key])
            log(f"  {key}, side by side: {name} {r['gather_mibs']:.0f} vs "
                f"{r['limit_mibs']:.0f} MiB/s ({r['share']:.0%})")
    return out


def run_stores(cfg, chosen, workdir):
    tables = []
    limits = {}
    for make in workloads(cfg):
        wl = make()
        log(f"{wl.name}: {wl.describe()}")
        rows = []
        for b in chosen:
            if wl.kind not in b.kinds or (b.only and wl.name not in b.only):
                continue
            if wl.backends is not None and b.name not in wl.backends:
                continue
            t0 = time.perf_counter()
            r = measure_backend(b, wl, workdir)
            log(f"  {b.name:26} gather {r['gather_mibs']:8.0f} MiB/s  write "
                f"{r['write_mibs']:7.0f} MiB/s  ratio {r['ratio']:5.2f}  "
                f"({time.perf_counter() - t0:.1f} s)")
            r["compressed"] = b.compressed
            rows.append(r)
        frames = zstd_frames(wl)
        zl = {"zstd_1t": zstd_limit(wl, 1, frames),
              "zstd_all": zstd_limit(wl, os.cpu_count() or 1, frames)}
        del frames
        limits[wl.name] = zl
        if wl.name == "vision_dense":
            zl.update(shares(cfg, chosen, wl, workdir))
        log(f"  zstd limit: {zl['zstd_1t']:.0f} MiB/s (1 thread), {zl['zstd_all']:.0f} MiB/s (all)")
        tables.append({"name": wl.name, "title": wl.title, "describe": wl.describe(),
                       "record_kib": wl.logical_bytes / wl.n / 1024, "rows": rows, "limits": zl})
        del wl
    return tables, limits


# ------------------------------------------------------------------ sampler

def run_sampler(cfg):
    import bench_sampler
    from loaderx import _zr
    from loaderx.zsampler import Sampler
    rows = []
    for batch in (256, 1024, 8192):
        rng = np.random.default_rng(0)
        s = Sampler(bench_sampler.SPACE, batch, mode="iid", seed=0)
        ref, ours = bench_sampler.paired_rates(
            [lambda k: rng.integers(0, bench_sampler.SPACE, size=batch), s.indices],
            batch, cfg["sampler_s"])
        rows.append({"batch": batch, "loaderx": ours, "numpy": ref, "ratio": ours / ref,
                     "kernel": _zr.zsm_simd()})
    return rows


# ------------------------------------------------------------------- loader

def tree_rss(proc):
    import psutil
    total = 0
    for p in [proc] + proc.children(recursive=True):
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


def run_loader(cfg, workdir, exclude):
    from loaderx.zrecord import DenseStore
    d = os.path.join(workdir, "loader")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    data = vision_dense(cfg["vision_n"])
    np.save(os.path.join(d, "data.npy"), data)
    for codec in ("raw", "zstd"):
        with DenseStore.create(os.path.join(d, codec), data.dtype, data.shape[1:],
                               codec=codec) as s:
            s.append(data)
    if "grain" not in exclude:  # grain reads an ArrayRecord file
        from array_record.python.array_record_module import ArrayRecordWriter
        w = ArrayRecordWriter(os.path.join(d, "data.array_record"), "group_size:1")
        for r in data:
            w.write(r.tobytes())
        w.close()
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump({"shape": list(data.shape[1:]), "dtype": data.dtype.str}, f)
    del data
    best = {}
    runs = [(who, "flip") for who in ("held", "loaderx-zstd", "loaderx-raw", "torch", "grain")]
    runs += [("loaderx-raw", "identity"), ("torch", "identity")]
    runs += [(who, "flip-worker") for who in ("loaderx-raw", "torch", "grain")]
    # "held" is the consumer's cost alone: the ceiling of the flip row. Every
    # contender runs in each of cfg["loader_rounds"] rounds (the whole list in
    # turn, so each round sees the host as its peers do); its best rate and
    # its largest peak RSS are kept.
    for _round in range(cfg["loader_rounds"]):
        for who, tf in runs:
            if who in exclude:
                continue
            r = run_loader_once(cfg, d, who, tf)
            key = (who, tf)
            if key in best:
                r = {"loader": who, "transform": tf,
                     "batches_s": max(r["batches_s"], best[key]["batches_s"]),
                     "peak_rss": max(r["peak_rss"], best[key]["peak_rss"])}
            best[key] = r
    shutil.rmtree(d, ignore_errors=True)
    return list(best.values())


def run_loader_once(cfg, d, who, tf):
    """One loader_e2e.py child: its batches/s and the peak RSS of its
    process tree."""
    import psutil
    proc = psutil.Popen([sys.executable, os.path.join(HERE, "loader_e2e.py"), who, d,
                         str(cfg["batch"]), str(cfg["loader_batches"]), tf],
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, tree_rss(proc))
        time.sleep(0.02)
    out, err = proc.communicate()
    if proc.returncode != 0 or not out.strip():
        raise RuntimeError(f"loader {who} failed ({proc.returncode}): {err[-2000:]}")
    r = json.loads(out.strip().splitlines()[-1])
    log(f"  loader {who:14} {tf:11} {r['batches_s']:7.1f} batches/s  peak RSS "
        f"{peak / MiB:7.0f} MiB")
    return {"loader": who, "transform": tf, "batches_s": r["batches_s"], "peak_rss": peak}


# ----------------------------------------------------------------- bindings

def run_bindings(cfg):
    """bench/bindings/run.sh (C, Lua and Go gathers of 256 x 147 KiB into a
    reused buffer, best of 5 interleaved passes) against the C install of
    PREFIX (default: .prefix of this checkout, as scripts/setup.sh --prefix
    makes it). {"skipped": why} when that install, lua5.4 or go is missing."""
    prefix = os.path.abspath(os.environ.get("PREFIX") or os.path.join(ROOT, ".prefix"))
    multiarch = subprocess.run(["gcc", "-print-multiarch"], capture_output=True,
                               text=True).stdout.strip()
    libdir = os.path.join(prefix, "lib", multiarch)
    need = {"the C install (scripts/setup.sh --prefix .prefix)":
            os.path.isfile(os.path.join(libdir, "pkgconfig", "zloader.pc")),
            "lua5.4": shutil.which("lua5.4"), "go": shutil.which("go"),
            "cc": shutil.which("cc")}
    missing = [k for k, v in need.items() if not v]
    if missing:
        return {"skipped": "missing " + ", ".join(missing)}
    env = dict(os.environ, N=str(cfg["bind_n"]), ROUNDS=str(cfg["bind_rounds"]),
               CALLS=str(cfg["bind_calls"]),
               PKG_CONFIG_PATH=os.pathsep.join(
                   [os.path.join(libdir, "pkgconfig"), os.environ.get("PKG_CONFIG_PATH", "")]),
               LD_LIBRARY_PATH=os.pathsep.join([libdir, os.environ.get("LD_LIBRARY_PATH", "")]),
               LUA_CPATH=os.path.join(prefix, "lib", "lua", "5.4", "?.so") + ";;",
               PATH=os.pathsep.join([os.path.dirname(sys.executable), os.environ["PATH"]]))
    r = subprocess.run(["bash", os.path.join(HERE, "bindings", "run.sh")], env=env,
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"bench/bindings/run.sh failed ({r.returncode}): {r.stderr[-2000:]}")
    rows, calls, part = [], [], None
    for line in r.stdout.splitlines():
        f = line.split()
        if line.startswith("binding") and "ms/gather" in line:
            part = rows
        elif line.startswith("binding") and "us/call" in line:
            part = calls
        elif line.startswith("#") or not f:
            continue
        elif part is rows:
            rows.append({"binding": f[0], "ms": float(f[1]), "mbs": float(f[2]),
                         "vs_c": float(f[3])})
        elif part is calls:
            calls.append({"binding": f[0], "us": float(f[1]), "over_c_us": float(f[2])})
    if not {"c", "lua", "go"} <= {x["binding"] for x in rows}:
        raise RuntimeError(f"bench/bindings/run.sh: no C/Lua/Go rows in:\n{r.stdout}")
    for x in rows:
        log(f"  {x['binding']:12} {x['ms']:8.3f} ms/gather  {x['vs_c']:.3f}x C")
    return {"records": cfg["bind_n"], "rounds": cfg["bind_rounds"], "calls": cfg["bind_calls"],
            "gather": rows, "call": calls}


# ---------------------------------------------------------------- hyperfine

def find_binary(name, rel):
    for bd in (os.environ.get("BUILD_DIR"), "build"):
        if bd:
            p = os.path.join(ROOT, bd, rel) if not os.path.isabs(bd) else os.path.join(bd, rel)
            if os.path.isfile(p) and os.access(p, os.X_OK):
                return p
    if name and shutil.which(name):
        return shutil.which(name)
    raise RuntimeError(f"cannot find {rel}: the benchmark programs are built with the test "
                       "suites (bash scripts/setup.sh --tests), or set BUILD_DIR to a build "
                       "directory that has them")


def run_hyperfine(cfg, workdir):
    if not shutil.which("hyperfine"):
        raise RuntimeError("hyperfine is not installed (Debian package hyperfine)")
    zr = find_binary("zr", "tools/zr")
    if os.path.isdir(zr):
        zr = os.path.join(zr, "zr")
    gb = find_binary(None, "bench/c/gather_bench")
    d = os.path.join(workdir, "hf")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    np.save(os.path.join(d, "data.npy"), vision_dense(cfg["vision_n"]))
    # PYTHON: the scripts' helpers need numpy, which this interpreter has and
    # the python3 first on PATH may not.
    env = dict(os.environ, ZR=zr, GATHER_BENCH=gb, RUNS=str(cfg["hf_runs"]), PYTHON=sys.executable)
    for codec in ("raw", "zstd"):
        subprocess.run([zr, "ingest", os.path.join(d, "data.npy"),
                        os.path.join(d, f"store-{codec}"), "--codec", codec],
                       check=True, capture_output=True)
    results = []
    for name in ("info", "verify", "ingest", "gather", "export", "recode", "compact"):
        out = os.path.join(d, f"{name}.json")
        subprocess.run(["bash", os.path.join(HERE, "hyperfine", f"{name}.sh"), d, out],
                       check=True, env=env, capture_output=True)
        with open(out) as f:
            for r in json.load(f)["results"]:
                results.append({"script": f"bench/hyperfine/{name}.sh", "command": r["command"],
                                "mean_s": r["mean"], "stddev_s": r.get("stddev") or 0.0,
                                "runs": len(r["times"])})
    npy_mib = os.path.getsize(os.path.join(d, "data.npy")) / MiB
    shutil.rmtree(d, ignore_errors=True)
    return {"npy_mib": npy_mib, "results": results}


# --------------------------------------------------------------------- main

BENCH_REQUIREMENTS = os.path.join(ROOT, "requirements", "bench.txt")


def pinned(path):
    """{distribution name: pinned version} of a requirements file and the
    files it includes with -r."""
    pins = {}
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line.startswith("-r "):
                pins.update(pinned(os.path.join(os.path.dirname(path), line[3:].strip())))
            elif "==" in line:
                name, version = line.split("==", 1)
                pins[name.strip().lower()] = version.strip()
    return pins


def check_requirements(install):
    """Check the peers of requirements/bench.txt against what this Python
    has; with install=True, pip-install the list into it first. Returns the
    lines to report: a missing package is then named by its backend's own
    check (MissingBackend, with the --exclude hint); another version than
    the pinned one is a warning (the tables are for the pinned ones)."""
    import importlib.metadata as md
    if install:
        log(f"installing the benchmark peers into {sys.prefix}: "
            f"pip install -r {os.path.relpath(BENCH_REQUIREMENTS)}")
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-r", BENCH_REQUIREMENTS],
                       check=True)
    notes = []
    for name, want in sorted(pinned(BENCH_REQUIREMENTS).items()):
        try:
            have = md.version(name)
        except md.PackageNotFoundError:
            notes.append(f"{name}=={want} is not installed")
            continue
        if have != want:
            notes.append(f"{name} {have} is installed, the tables are for {want}")
    if notes:
        log("benchmark peers (requirements/bench.txt): " + "; ".join(notes) +
            f". Install them with `{os.path.basename(sys.executable)} -m pip install -r "
            f"{os.path.relpath(BENCH_REQUIREMENTS)}` or run with --install.")
    return notes


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--install", action="store_true",
                    help="first pip-install the pinned peers of requirements/bench.txt "
                    "into this Python")
    ap.add_argument("--quick", action="store_true", help="small sizes (seconds): a smoke test")
    ap.add_argument("--exclude", action="append", default=[], metavar="NAME",
                    help="leave out a backend or loader by name (repeatable)")
    ap.add_argument("--out", default=None, help="report directory (default: docs/, or a "
                    "temporary directory with --quick)")
    ap.add_argument("--workdir", default=None, help="scratch directory for the stores")
    ap.add_argument("--json", default=None, help="also write the raw results here")
    ap.add_argument("--only", default=None, metavar="SECTIONS",
                    help="run only these sections, comma-separated: 'writes' (the write "
                    "goals, bench/bench_write.py), 'ingest' (an image folder against "
                    "LitData and MDSWriter, bench/bench_ingest.py) and/or 'interleaved' (the "
                    "second read method); prints their goal rows and writes --json, not the "
                    "report")
    args = ap.parse_args()
    cfg = QUICK if args.quick else FULL
    if args.only:
        return run_only(cfg, args)
    out = args.out or (tempfile.mkdtemp(prefix="bench-out-") if args.quick
                       else os.path.join(ROOT, "docs"))
    workdir = args.workdir or tempfile.mkdtemp(prefix="loaderx-bench-",
                                               dir=prepare.cache_dir() if not args.quick else None)
    os.makedirs(workdir, exist_ok=True)
    check_requirements(args.install)
    exclude = set(args.exclude)
    chosen = []
    for make in backends.ALL:
        b = make()
        if b.name in exclude:
            continue
        b.check()  # MissingBackend names the package and --exclude
        chosen.append(b)
    # The command benchmarks come last: fail now, not after the tables.
    if not shutil.which("hyperfine"):
        raise RuntimeError("hyperfine is not installed (Debian package hyperfine)")
    find_binary("zr", "tools/zr")
    find_binary(None, "bench/c/gather_bench")
    try:
        res = measure_all(cfg, chosen, workdir, exclude, args.quick)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    report.write(res, out)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    log(f"done in {res['elapsed_s']:.0f} s: {os.path.join(out, 'BENCHMARKS.md')}")


def run_only(cfg, args):
    sections = set(args.only.split(","))
    unknown = sections - {"writes", "ingest", "interleaved"}
    if unknown:
        raise SystemExit(f"bench: --only: unknown section(s) {sorted(unknown)}")
    workdir = args.workdir or tempfile.mkdtemp(prefix="loaderx-bench-")
    os.makedirs(workdir, exist_ok=True)
    res = {"quick": args.quick, "machine": machine(), "tables": []}
    try:
        if "writes" in sections:
            log("writes: append vs np.save, np.save + fsync and zstd's own compression")
            res["writes"] = writes(cfg, workdir)
        if "ingest" in sections:
            log("ingest: an image folder, zr ingest vs LitData optimize and MDSWriter")
            res["ingest"] = ingest(cfg, workdir)
        if "interleaved" in sections:
            log("interleaved reads")
            res["interleaved"] = interleaved(cfg, workdir)
    finally:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    for g, thr, v, ok, margin in report.new_goals(res):
        print(f"{g} | {thr} | {v} | {'yes' if ok else 'no' if ok is not None else '-'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)


def measure_all(cfg, chosen, workdir, exclude, quick):
    t_start = time.perf_counter()
    res = {"quick": quick, "config": cfg, "machine": machine(), "excluded": sorted(exclude)}
    log("limits: memcpy")
    res["memcpy"] = {"1t": memcpy_limit(cfg["limit_mib"], 1),
                     "all": memcpy_limit(cfg["limit_mib"], os.cpu_count() or 1)}
    res["tables"], _ = run_stores(cfg, chosen, workdir)
    log("writes: append vs np.save, np.save + fsync and zstd's own compression")
    res["writes"] = writes(cfg, workdir)
    log("ingest: an image folder, zr ingest vs LitData optimize and MDSWriter")
    res["ingest"] = ingest(cfg, workdir)
    log("interleaved reads")
    res["interleaved"] = interleaved(cfg, workdir)
    log("scale: time per record against batch size and record size")
    res["scale"] = scale.run(cfg["scale"], workdir, log)
    log("sampler")
    res["sampler"] = run_sampler(cfg)
    log("loader end to end")
    res["loader"] = run_loader(cfg, workdir, exclude)
    log("bindings: Lua and Go vs C")
    res["bindings"] = run_bindings(cfg)
    log("hyperfine")
    res["hyperfine"] = run_hyperfine(cfg, workdir)
    # -- Readahead on a throttled device: bench/bench_readahead.py, self-contained
    # (root and loop devices, else {"skipped": reason}; bench_readahead.markdown renders it).
    import bench_readahead
    log("readahead on a throttled device")
    res["readahead"] = ({"skipped": "--quick (the throttled-device run takes minutes)"}
                        if quick else bench_readahead.measure(log=log))
    res["elapsed_s"] = time.perf_counter() - t_start
    return res


if __name__ == "__main__":
    try:
        main()
    except MissingBackend as exc:
        sys.exit(f"bench: missing backend: {exc}")
