"""A loader closed under its consumer (by one of its stores, or directly)
answers next() with ClosedError, never a hang and never a stale prefetched
batch.

The cases that used to hang run in a child interpreter, with a generous
timeout that is only a hang guard (nothing here asserts on timing).
"""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from loaderx.dataloader import DataLoader
from loaderx.errors import ClosedError
from loaderx.zrecord import DenseStore

HANG_GUARD = 120  # seconds; a passing run takes well under one


def _make(path, n=256):
    with DenseStore.create(str(path), "float32", (4,)) as st:
        st.append(np.arange(n * 4, dtype=np.float32).reshape(n, 4))


def _run_child(body, path):
    """Run `body` (with `path` bound) in a fresh interpreter; return its
    stdout lines. Fails (does not hang) if the child does not finish."""
    code = "path = %r\n" % str(path) + PRELUDE + textwrap.dedent(body)
    try:
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=HANG_GUARD)
    except subprocess.TimeoutExpired:
        pytest.fail("the loader hung (child did not finish within the hang guard)")
    assert res.returncode == 0, res.stderr
    return res.stdout.split()


PRELUDE = """
import threading, time
from loaderx.zrecord import DenseStore
from loaderx.dataloader import DataLoader
from loaderx.errors import ClosedError
"""


@pytest.mark.parametrize("transform", [False, True])
def test_next_after_store_close_raises_closed(tmp_path, transform):
    _make(tmp_path / "x")
    out = _run_child("""
        st = DenseStore.open(path, readonly=True)
        L = DataLoader({"x": st}, batch_size=8, num_workers=2, prefetch=4,
                       transform=(lambda b: b) if %s else None)
        next(L)
        # Let the workers (and transform threads) park prefetched batches.
        time.sleep(0.3)
        st.close()
        print("closed", L.closed)
        for _ in range(3):  # every further call, not only the first
            try:
                next(L)
                print("batch")
            except ClosedError:
                print("ClosedError")
    """ % transform, tmp_path / "x")
    assert out == ["closed", "True", "ClosedError", "ClosedError", "ClosedError"]


def test_blocked_consumer_woken_by_store_close(tmp_path):
    # The consumer waits in next() for a slow transform while the store is
    # closed from another thread: it must get ClosedError.
    _make(tmp_path / "x")
    out = _run_child("""
        st = DenseStore.open(path, readonly=True)
        started = threading.Event()
        def slow(b):
            started.set()
            time.sleep(0.5)
            return b
        L = DataLoader({"x": st}, batch_size=8, num_workers=2, prefetch=2, transform=slow)
        res = []
        def consumer():
            try:
                next(L); next(L); next(L); next(L); next(L)
                res.append("batches")
            except ClosedError:
                res.append("ClosedError")
        t = threading.Thread(target=consumer)
        t.start()
        started.wait()
        st.close()
        t.join()
        print(res[0], L.closed)
    """, tmp_path / "x")
    assert out == ["ClosedError", "True"]


def test_next_after_loader_close(tmp_path):
    _make(tmp_path / "x")
    with DenseStore.open(str(tmp_path / "x"), readonly=True) as st:
        for tf in (None, lambda b: b):
            L = DataLoader({"x": st}, batch_size=8, num_workers=2, prefetch=4, transform=tf)
            next(L)
            L.close()
            assert L.closed
            with pytest.raises(ClosedError):
                next(L)
        # The store itself stays usable after its loaders were closed.
        assert len(st) == 256
