"""open(readonly=True): readers beside one writer, across handles and processes."""

import multiprocessing as mp

import numpy as np
import pytest

from loaderx.errors import StoreBusy
from loaderx.zrecord import DenseStore, open_store


def _child_read(path, q):
    try:
        with DenseStore.open(path, readonly=True) as s:
            q.put(int(s[:].sum()))
    except Exception as exc:  # reported to the parent
        q.put(repr(exc))


def _child_write(path, q):
    try:
        DenseStore.open(path)
        q.put("opened")
    except StoreBusy:
        q.put("busy")


def test_readers_beside_one_writer(store_dir):
    p = store_dir / "d"
    s = DenseStore.create(p, np.int64, ())
    s.append(np.arange(100, dtype=np.int64))
    # As LMDB: one writer plus any number of readers, in any processes.
    r1 = DenseStore.open(p, readonly=True)
    r2 = open_store(p, readonly=True)
    assert r1.readonly and r2.readonly
    with pytest.raises(StoreBusy, match="another writable handle"):
        DenseStore.open(p)
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_child_read, args=(str(p), q)) for _ in range(2)]
    procs.append(ctx.Process(target=_child_write, args=(str(p), q)))
    for pr in procs:
        pr.start()
    results = sorted(str(q.get(timeout=60)) for _ in procs)
    for pr in procs:
        pr.join(60)
    assert results == sorted([str(4950), str(4950), "busy"])
    # Readers keep their view until refresh().
    s.append(np.arange(100, 110, dtype=np.int64))
    assert len(r1) == 100 and len(s) == 110
    with pytest.raises(IndexError):
        r1[100]
    assert r1.refresh() == 110 and len(r1) == 110
    assert (r1[100:] == np.arange(100, 110)).all()
    assert s.refresh() == 110  # the writer: its own view already
    # delete/compact need the store to themselves: refused, nothing changed.
    with pytest.raises(StoreBusy, match="read-only handles"):
        s.delete(0)
    with pytest.raises(StoreBusy, match="read-only handles"):
        s.compact()
    assert len(s) == 110 and int(s[0]) == 0
    s.close()
    with pytest.raises(NotImplementedError, match="read-only"):
        r1.append(np.zeros(1, dtype=np.int64))
    with pytest.raises(NotImplementedError, match="read-only"):
        r1.delete(0)
    with pytest.raises(NotImplementedError, match="read-only"):
        r1.compact()
    r1.close()
    r2.close()
    with DenseStore.open(p) as w:
        assert not w.readonly
        assert len(w) == 110
