"""One writer process appending while reader processes verify every record
they can see; the writer is killed with SIGKILL at random points and
restarted. Used by test_readers_writer.py; run it alone for longer runs:

    python tests/python/readers_stress.py DIR SECONDS [READERS]

It prints one JSON line: records verified by the readers, writer kills,
committed lengths. Exit status 0 only when every reader saw exactly the
right bytes and, after a final refresh, exactly the committed records.

Record i of every store is a pure function of i, so a reader checks any
record it sees without talking to the writer.
"""

import json
import multiprocessing as mp
import os
import random
import signal
import sys
import time

import numpy as np

from loaderx.utils import train_dict
from loaderx.zrecord import DenseStore, RaggedStore

SHAPE = (4, 6)
# (name, kind, codec): dense and ragged, each codec.
STORES = [(f"{k}_{c}", k, c) for k in ("dense", "ragged") for c in ("raw", "zstd", "zstd_dict")]


def dense_record(i):
    return ((np.arange(24, dtype=np.int64) * 31 + i * 2654435761) % 65521).astype(
        np.float32).reshape(SHAPE)


def ragged_record(i):
    n = 1 + (i * 7) % 53
    return (np.arange(n, dtype=np.int64) + i * 1000003).astype(np.int32)


def record(kind, i):
    return dense_record(i) if kind == "dense" else ragged_record(i)


def create_stores(root):
    dict_dense = train_dict(np.stack([dense_record(i) for i in range(2000)]), tier="fast")
    dict_ragged = train_dict([ragged_record(i) for i in range(2000)], tier="fast")
    for name, kind, codec in STORES:
        p = os.path.join(root, name)
        d = (dict_dense if kind == "dense" else dict_ragged) if codec == "zstd_dict" else None
        if kind == "dense":
            s = DenseStore.create(p, np.float32, SHAPE, codec=codec, dict_bytes=d)
        else:
            s = RaggedStore.create(p, np.int32, codec=codec, dict_bytes=d)
        s.close()


def open_kind(root, name, kind, readonly):
    cls = DenseStore if kind == "dense" else RaggedStore
    return cls.open(os.path.join(root, name), readonly=readonly)


def writer_main(root, seed, ready):
    """Append batches of 1..48 records to every store, forever (killed).
    Sets `ready` once the first round is committed."""
    rng = random.Random(seed)
    stores = [(open_kind(root, n, k, False), k) for n, k, _ in STORES]
    rounds = 0
    while True:
        for s, kind in stores:
            n0, k = len(s), rng.randint(1, 48)
            if kind == "dense":
                s.append(np.stack([dense_record(i) for i in range(n0, n0 + k)]))
            else:
                s.append([ragged_record(i) for i in range(n0, n0 + k)])
            if rng.random() < 0.05:
                s.sync()
        rounds += 1
        if rounds == 1:
            ready.set()


def verify(s, kind, lo, hi, where):
    """Gather [lo, hi) of store s and compare with the expected records."""
    if hi <= lo:
        return 0
    got = s[lo:hi]
    for j, i in enumerate(range(lo, hi)):
        want = record(kind, i)
        g = got[j]
        if g.shape != want.shape or g.dtype != want.dtype or not np.array_equal(g, want):
            raise AssertionError(f"{where}: record {i} is wrong: got {g!r}, want {want!r}")
    return hi - lo


def reader_main(root, stop, final_q, out_q, seed):
    rng = random.Random(seed)
    verified, refreshes = 0, 0
    try:
        stores = [(open_kind(root, n, k, True), k, n) for n, k, _ in STORES]
        seen = [len(s) for s, _, _ in stores]
        for (s, k, n), m in zip(stores, seen):
            verified += verify(s, k, 0, m, f"{n} at open")
        while not stop.is_set():
            for j, (s, k, n) in enumerate(stores):
                m = s.refresh()
                refreshes += 1
                if m < seen[j]:
                    raise AssertionError(f"{n}: length went back from {seen[j]} to {m}")
                verified += verify(s, k, seen[j], m, n)
                if m:  # and a few old ones again, at random
                    for _ in range(3):
                        i = rng.randrange(m)
                        verified += verify(s, k, i, i + 1, f"{n} (again)")
                # Never past the frontier: the next index does not exist yet.
                try:
                    s[m]
                    raise AssertionError(f"{n}: record {m} readable past length {m}")
                except IndexError:
                    pass
                seen[j] = m
        committed = final_q.get(timeout=120)
        for s, k, n in stores:
            m = s.refresh()
            if m != committed[n]:
                raise AssertionError(f"{n}: after refresh length {m}, committed {committed[n]}")
            verified += verify(s, k, 0, m, f"{n} final")
            s.close()
        out_q.put({"ok": True, "verified": verified, "refreshes": refreshes})
    except BaseException as exc:  # reported to the parent
        out_q.put({"ok": False, "error": f"{type(exc).__name__}: {exc}", "verified": verified})


def run(root, seconds, readers=4, seed=None, min_kills=3):
    seed = int(time.time()) if seed is None else seed
    rng = random.Random(seed)
    create_stores(root)
    ctx = mp.get_context("spawn")
    stop, out_q = ctx.Event(), ctx.Queue()
    final_qs = [ctx.Queue() for _ in range(readers)]
    procs = [ctx.Process(target=reader_main, args=(root, stop, final_qs[r], out_q, seed + r))
             for r in range(readers)]
    for p in procs:
        p.start()
    kills, deadline = 0, time.monotonic() + seconds
    while time.monotonic() < deadline or kills < min_kills:
        ready = ctx.Event()
        w = ctx.Process(target=writer_main, args=(root, rng.randrange(1 << 30), ready))
        w.start()
        # Mostly mid-append (after the first committed round), sometimes
        # while it opens and recovers.
        if rng.random() < 0.85:
            ready.wait(120)
        time.sleep(rng.uniform(0.0, 1.0))
        os.kill(w.pid, signal.SIGKILL)
        w.join()
        kills += 1
    stop.set()
    # The committed state: what a fresh open sees after the last kill.
    committed = {}
    for name, kind, _ in STORES:
        with open_kind(root, name, kind, True) as s:
            committed[name] = len(s)
    for q in final_qs:
        q.put(committed)
    results = [out_q.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(60)
    return {"seed": seed, "seconds": seconds, "readers": readers, "kills": kills,
            "verified": sum(r["verified"] for r in results),
            "refreshes": sum(r.get("refreshes", 0) for r in results),
            "committed": committed,
            "errors": [r["error"] for r in results if not r["ok"]]}


if __name__ == "__main__":
    res = run(sys.argv[1], float(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 4)
    print(json.dumps(res))
    sys.exit(0 if not res["errors"] else 1)
