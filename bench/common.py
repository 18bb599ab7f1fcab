"""Shared pieces of the benchmark harness: workloads (one generator and one
seed for every backend), index plans, the Backend base class, validation,
timing and disk accounting. Backends live in bench/backends/, one module
per family; bench/run.py drives them."""
import os
import shutil
import struct
import time

import numpy as np

MiB = 1 << 20
SEED = 20240607


class MissingBackend(RuntimeError):
    """A planned backend whose package cannot be imported."""


# ---------------------------------------------------------------- workloads

class Workload:
    """Records of one workload plus its random batch plans.

    kind: "dense" (data is one ndarray (N, *shape)) or "ragged" (data is a
    list of ndarrays, each of its own shape). backends: the names of the
    backends that run on it (None: every backend of its kind)."""

    def __init__(self, name, title, kind, data, batch, nbatches, seed=SEED, backends=None):
        self.name, self.title, self.kind, self.data = name, title, kind, data
        self.backends = backends
        self.n = len(data)
        self.dtype = data.dtype if kind == "dense" else data[0].dtype
        if kind == "dense":
            self.logical_bytes = data.nbytes
            self.record_bytes = np.full(self.n, data[0].nbytes, dtype=np.int64)
        else:
            self.record_bytes = np.array([a.nbytes for a in data], dtype=np.int64)
            self.logical_bytes = int(self.record_bytes.sum())
        rng = np.random.default_rng(seed + 1)
        batch = min(batch, self.n)
        self.plans = [rng.choice(self.n, batch, replace=False).astype(np.int64)
                      for _ in range(nbatches)]
        self.batch = batch

    def plan_bytes(self, idx):
        return int(self.record_bytes[idx].sum())

    def expected(self, idx):
        if self.kind == "dense":
            return self.data[idx]
        return [self.data[i] for i in idx]

    def describe(self):
        mean = self.logical_bytes / self.n
        return (f"{self.n:,} records, {self.logical_bytes / MiB:.1f} MiB logical "
                f"(mean {mean / 1024:.1f} KiB/record), {len(self.plans)} random batches "
                f"of {self.batch}")


def image(rng, h, w):
    """One CHW uint8 image of the spatial model: a few smooth low-frequency
    waves and a soft blob per channel, quantized, plus sparse +-1 noise,
    so that neighbouring pixels correlate and zstd has real work."""
    y = np.linspace(0.0, 1.0, h, dtype=np.float32)[:, None]
    x = np.linspace(0.0, 1.0, w, dtype=np.float32)[None, :]
    out = np.empty((3, h, w), dtype=np.uint8)
    cy, cx, r = rng.uniform(0.2, 0.8), rng.uniform(0.2, 0.8), rng.uniform(0.1, 0.4)
    blob = np.exp(-((y - cy) ** 2 + (x - cx) ** 2) / (2 * r * r))
    for c in range(3):
        f = rng.uniform(0.5, 4.0, size=4).astype(np.float32)
        p = rng.uniform(0, 2 * np.pi, size=4).astype(np.float32)
        field = (np.sin(f[0] * 2 * np.pi * x + p[0]) * np.cos(f[1] * 2 * np.pi * y + p[1])
                 + 0.5 * np.sin(f[2] * 2 * np.pi * (x + y) + p[2])
                 + 0.25 * np.cos(f[3] * 2 * np.pi * (x - y) + p[3]))
        v = 128 + 60 * field + rng.uniform(-60, 60) * blob
        v = np.round(v / 4) * 4
        noise = rng.integers(-1, 2, size=(h, w)) * (rng.random((h, w)) < 0.03)
        out[c] = np.clip(v + noise, 0, 255).astype(np.uint8)
    return out


def vision_dense(n, side=224, seed=SEED):
    rng = np.random.default_rng(seed)
    data = np.empty((n, 3, side, side), dtype=np.uint8)
    for i in range(n):
        data[i] = image(rng, side, side)
    return data


def small_rows(n, width=8, seed=SEED):
    """n int32[width] rows (32-byte records for width 8): token-id-like
    values, so zstd has something to find."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, 50257, size=(n, width), dtype=np.int32)


def vision_ragged(n, seed=SEED, lo=64, hi=512):
    rng = np.random.default_rng(seed)
    hw = np.clip(np.round(rng.lognormal(np.log(224), 0.45, size=(n, 2))), lo, hi).astype(int)
    return [image(rng, int(h), int(w)) for h, w in hw]


def token_blocks(tokens, n, width=512):
    """n int32[width] blocks packed from the token stream (wrapping round
    the corpus when it is shorter than n*width tokens)."""
    need = n * width
    reps = -(-need // tokens.size)
    flat = np.tile(np.asarray(tokens), reps)[:need] if reps > 1 else np.array(tokens[:need])
    return flat.astype(np.int32).reshape(n, width)


def token_records(tokens, lengths, n, lo=16, hi=512):
    """n ragged int32 records: paragraph boundaries kept, a fragment under
    `lo` tokens merged into the next, paragraphs split at `hi`. Wraps round
    the corpus when it yields fewer than n records."""
    tokens = np.asarray(tokens)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    out, pending = [], None
    while len(out) < n:
        for s, k in zip(starts.tolist(), np.asarray(lengths).tolist()):
            cur = tokens[s:s + k]
            if pending is not None:
                cur = np.concatenate([pending, cur])
                pending = None
            pos = 0
            while cur.size - pos > hi:
                out.append(cur[pos:pos + hi])
                pos += hi
            rest = cur[pos:]
            if rest.size < lo:
                pending = rest
            else:
                out.append(rest)
            if len(out) >= n:
                break
    return [np.array(a, dtype=np.int32) for a in out[:n]]


# ----------------------------------------------------------------- backends

class Backend:
    """One storage backend under test. Subclasses set `name`, `kinds`
    (workload kinds supported), `requires` (modules that must import) and
    implement write/open/gather/close. `path` is a directory the backend
    owns (created empty by the harness)."""

    name = "?"
    kinds = ("dense", "ragged")
    requires = ()
    compressed = False
    only = None  # workload names this backend runs on (None: all of its kinds)

    def check(self):
        import importlib
        for mod in self.requires:
            try:
                importlib.import_module(mod)
            except Exception as exc:  # ImportError or a broken binary wheel
                raise MissingBackend(f"backend {self.name}: cannot import {mod} ({exc}); "
                                     f"install requirements/bench.txt (bench/run.py --install) or pass "
                                     f"--exclude {self.name}")

    def write(self, path, wl):
        raise NotImplementedError

    def open(self, path, wl):
        raise NotImplementedError

    def gather(self, idx):
        raise NotImplementedError

    def close(self):
        pass


class CodecBackend(Backend):
    """A backend family with a codec in its name: `family`-`codec`."""

    family = "?"

    def __init__(self, codec):
        self.codec = codec
        self.compressed = codec != "raw"
        self.name = f"{self.family}-{codec}"


def sorted_unique(idx):
    """(sorted unique indices, inverse) so that uniq[inverse] == idx: for
    libraries that want increasing selections."""
    uniq, inv = np.unique(idx, return_inverse=True)
    return uniq, inv


def pack_record(a):
    """bytes of [u32 ndim][u32 dims...][payload] (the peers' shape prefix)."""
    return struct.pack(f"<I{a.ndim}I", a.ndim, *a.shape) + a.tobytes()


def unpack_record(buf, dtype):
    """Inverse of pack_record; returns an array owning its memory."""
    mv = memoryview(buf)
    nd = struct.unpack_from("<I", mv, 0)[0]
    shape = struct.unpack_from(f"<{nd}I", mv, 4)
    return np.frombuffer(mv[4 + 4 * nd:], dtype=dtype).reshape(shape).copy()


def dense_from_bytes(recs, wl):
    """(len(recs), *shape) array of wl's dtype from a sequence of bytes-like
    records (one copy each)."""
    out = np.empty((len(recs),) + wl.data.shape[1:], dtype=wl.dtype)
    flat = out.reshape(len(recs), -1).view(np.uint8)
    for j, v in enumerate(recs):
        flat[j] = np.frombuffer(v, dtype=np.uint8)
    return out


def flat_ragged(data):
    """(flat payload, offsets in elements (n+1), shapes (n, ndim)) of a
    ragged list whose records share ndim."""
    sizes = np.array([a.size for a in data], dtype=np.int64)
    offsets = np.zeros(len(data) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    flat = np.concatenate([a.reshape(-1) for a in data])
    shapes = np.array([a.shape for a in data], dtype=np.int64)
    return flat, offsets, shapes


def split_flat(parts, shapes):
    return [p.reshape(tuple(s)) for p, s in zip(parts, shapes)]


# ------------------------------------------------------- validation, timing

class ValidationError(AssertionError):
    pass


def check_result(name, wl, idx, got):
    exp_n = len(idx)
    if wl.kind == "dense":
        exp = wl.data[idx]
        if not isinstance(got, np.ndarray):
            raise ValidationError(f"{name}: gather returned {type(got).__name__}, not ndarray")
        if got.dtype != exp.dtype or got.shape != exp.shape:
            raise ValidationError(f"{name}: got {got.dtype}{got.shape}, expected "
                                  f"{exp.dtype}{exp.shape}")
        if not np.array_equal(got, exp):
            bad = int(np.flatnonzero(~np.all((got == exp).reshape(exp_n, -1), axis=1))[0])
            raise ValidationError(f"{name}: values differ at batch position {bad} "
                                  f"(record {int(idx[bad])})")
        return
    if not isinstance(got, list) or len(got) != exp_n:
        raise ValidationError(f"{name}: expected a list of {exp_n} arrays, got "
                              f"{type(got).__name__} of {len(got)}")
    for j, i in enumerate(idx.tolist()):
        e, g = wl.data[i], got[j]
        if not isinstance(g, np.ndarray) or g.dtype != e.dtype or g.shape != e.shape:
            raise ValidationError(f"{name}: batch position {j} (record {i}): got "
                                  f"{getattr(g, 'dtype', type(g))}{getattr(g, 'shape', '')}, "
                                  f"expected {e.dtype}{e.shape}")
        if not np.array_equal(g, e):
            raise ValidationError(f"{name}: values of record {i} differ")


def sweep_and_validate(backend, wl, sweep_batch=4096):
    """Read every record once (in order, in batches) and every planned
    batch, checking dtype, shape, order and values against the source."""
    for lo in range(0, wl.n, sweep_batch):
        idx = np.arange(lo, min(wl.n, lo + sweep_batch), dtype=np.int64)
        check_result(backend.name, wl, idx, backend.gather(idx))
    for idx in wl.plans:
        check_result(backend.name, wl, idx, backend.gather(idx))


def time_gathers(backend, wl):
    """One timed pass over the plans (the cache is warm: the sweep read
    everything). Returns (seconds, per-batch latencies)."""
    lat = []
    t0 = time.perf_counter()
    for idx in wl.plans:
        t = time.perf_counter()
        backend.gather(idx)
        lat.append(time.perf_counter() - t)
    return time.perf_counter() - t0, np.array(lat)


def disk_bytes(path):
    """Allocated bytes (st_blocks * 512) of every file under path."""
    if os.path.isfile(path):
        return os.stat(path).st_blocks * 512
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_blocks * 512
            except FileNotFoundError:
                pass
    return total


def measure_backend(backend, wl, workdir):
    """Write, validate and time one backend on one workload; returns a
    result dict (the columns of the tables)."""
    path = os.path.join(workdir, f"{wl.name}-{backend.name}")
    if os.path.exists(path):
        shutil.rmtree(path)
    os.makedirs(path)
    t0 = time.perf_counter()
    backend.write(path, wl)
    t_write = time.perf_counter() - t0
    disk = disk_bytes(path)
    backend.open(path, wl)
    try:
        sweep_and_validate(backend, wl)
        secs, lat = time_gathers(backend, wl)
    finally:
        backend.close()
    shutil.rmtree(path, ignore_errors=True)
    nrec = sum(len(p) for p in wl.plans)
    nbytes = sum(wl.plan_bytes(p) for p in wl.plans)
    return {"backend": backend.name, "write_mibs": wl.logical_bytes / MiB / t_write,
            "gather_mibs": nbytes / MiB / secs, "krec_s": nrec / secs / 1e3,
            "p95_ms": float(np.percentile(lat, 95) * 1e3), "disk": disk,
            "ratio": wl.logical_bytes / disk if disk else float("nan")}
