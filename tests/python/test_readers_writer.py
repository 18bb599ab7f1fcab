"""Readers beside one writer, across real processes (as LMDB): appends never
disturb a reader, refresh() shows later commits, delete/compact need the
store to themselves, zr info beside a writer, the training example beside
zr info and a second reader."""

import multiprocessing as mp
import os
import pickle
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from loaderx.errors import StoreBusy
from loaderx.zrecord import DenseStore, RaggedStore

sys.path.insert(0, os.path.dirname(__file__))
import readers_stress  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "..", "examples", "fashion_mnist.py")
FASHION_MNIST = "/usr/share/datasets/fashion-mnist"


def test_writer_killed_readers_verify(tmp_path):
    """One writer (raw, zstd, zstd_dict; dense and ragged) SIGKILLed at
    random points and restarted, 4 reader processes gathering and checking
    every record they see; after a final refresh each sees exactly the
    committed records. ZR_READERS_SECONDS sets the duration."""
    seconds = float(os.environ.get("ZR_READERS_SECONDS", "10"))
    res = readers_stress.run(str(tmp_path / "s"), seconds, readers=4)
    print(f"\nreaders: {res['verified']} records verified by {res['readers']} readers, "
          f"{res['refreshes']} refreshes, {res['kills']} writer kills, committed "
          f"{res['committed']} (seed {res['seed']})")
    assert res["errors"] == []
    assert res["kills"] >= 3
    assert all(n > 0 for n in res["committed"].values())
    assert res["verified"] >= 4 * sum(res["committed"].values())


def _hold_reader(path, ready, release):
    with DenseStore.open(path, readonly=True) as s:
        assert len(s) == 100
        ready.set()
        release.wait(60)


def test_maintenance_refused_beside_reader_process(tmp_path):
    p = str(tmp_path / "d")
    w = DenseStore.create(p, np.int32, (3,))
    w.append(np.arange(300, dtype=np.int32).reshape(100, 3))
    ctx = mp.get_context("spawn")
    ready, release = ctx.Event(), ctx.Event()
    child = ctx.Process(target=_hold_reader, args=(p, ready, release))
    child.start()
    assert ready.wait(60)
    before = sorted(os.listdir(p)), [os.path.getsize(os.path.join(p, f)) for f in sorted(os.listdir(p))]
    with pytest.raises(StoreBusy, match="read-only handles"):
        w.delete([0, 5])
    with pytest.raises(StoreBusy, match="nothing was changed"):
        w.compact()
    after = sorted(os.listdir(p)), [os.path.getsize(os.path.join(p, f)) for f in sorted(os.listdir(p))]
    assert before == after and len(w) == 100 and (w[5] == [15, 16, 17]).all()
    w.append(np.zeros((1, 3), np.int32))  # appends go on beside the reader
    release.set()
    child.join(60)
    assert child.exitcode == 0
    w.delete([0])
    w.compact()
    assert len(w) == 100
    w.close()


def _maint_loop(path, seconds, q):
    """Delete + compact over and over; count the runs a reader refused."""
    ran = refused = 0
    end = time.monotonic() + seconds
    with DenseStore.open(path) as s:
        while time.monotonic() < end:
            try:
                s.delete(list(range(0, 200, 2)))
                s.compact()
                ran += 1
            except StoreBusy:
                refused += 1
            s.append(np.ones((100, 256), np.uint8) * (ran % 251))
    q.put((ran, refused))


def test_reader_refused_while_maintenance_runs(tmp_path):
    p = str(tmp_path / "m")
    with DenseStore.create(p, np.uint8, (256,), codec="raw") as s:
        s.append(np.ones((4000, 256), np.uint8))
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    child = ctx.Process(target=_maint_loop, args=(p, 4.0, q))
    child.start()
    busy = opened = 0
    deadline = time.monotonic() + 30
    while child.is_alive() and time.monotonic() < deadline:
        try:
            with DenseStore.open(p, readonly=True) as r:
                n = len(r)
                assert n >= 3900 and r[n - 1].shape == (256,)
                opened += 1
        except StoreBusy as exc:
            assert "delete or compact" in str(exc)
            busy += 1
        time.sleep(0.002)  # leave the maintenance windows without readers
    ran, refused = q.get(timeout=60)
    child.join(60)
    assert child.exitcode == 0
    assert busy > 0, "no read-only open met a running delete/compact"
    assert opened > 0 and ran > 0
    print(f"\nmaintenance: {ran} delete+compact runs, {refused} refused beside readers; "
          f"reader opens: {opened} ok, {busy} refused while maintenance ran")


def _pickled_child(blob, q):
    s = pickle.loads(blob)
    q.put((s.readonly, len(s), int(s[len(s) - 1][0])))
    s.close()


def test_writable_store_pickles_as_reader(tmp_path):
    p = str(tmp_path / "w")
    with RaggedStore.create(p, np.int64) as w:
        w.append([np.arange(i + 1) for i in range(10)])
        blob = pickle.dumps(w)
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        c = ctx.Process(target=_pickled_child, args=(blob, q))
        c.start()
        assert q.get(timeout=60) == (True, 10, 0)
        c.join(60)
        assert c.exitcode == 0
        w.append([np.arange(3)])  # the parent keeps writing
        r = pickle.loads(blob)  # in this process too: a reader beside the writer
        assert r.readonly and len(r) == 11
        r.close()


def _append_forever(path):
    with DenseStore.open(path) as s:
        i = len(s)
        while True:
            s.append(np.full((50, 8), i, np.int64))
            i += 50
            time.sleep(0.01)


def test_zr_info_and_verify_beside_writer(tmp_path):
    p = str(tmp_path / "z")
    with DenseStore.create(p, np.int64, (8,)) as s:
        s.append(np.zeros((50, 8), np.int64))
    ctx = mp.get_context("spawn")
    w = ctx.Process(target=_append_forever, args=(p,))
    w.start()
    try:
        with DenseStore.open(p, readonly=True) as r:  # until it appends
            deadline = time.monotonic() + 120
            while r.refresh() == 50 and time.monotonic() < deadline:
                time.sleep(0.05)
        seen = []
        for _ in range(5):
            info = subprocess.run(["zr", "info", p], capture_output=True, text=True, timeout=60)
            assert info.returncode == 0, info.stderr
            m = re.search(r"records:\s+(\d+) \(committed when read", info.stdout)
            assert m, info.stdout
            seen.append(int(m.group(1)))
            ver = subprocess.run(["zr", "verify", p], capture_output=True, text=True, timeout=60)
            assert ver.returncode == 0, ver.stdout + ver.stderr
            assert re.search(r"(\d+) records checked, 0 bad \(ok\); committed length \1 when opened",
                             ver.stdout), ver.stdout
            time.sleep(0.1)
        assert w.is_alive()
        assert seen == sorted(seen) and seen[-1] > seen[0] and all(n % 50 == 0 for n in seen)
    finally:
        os.kill(w.pid, signal.SIGKILL)
        w.join()


def _second_reader(path, go, q):
    go.wait(600)  # started early, so it answers at once when asked
    with DenseStore.open(path, readonly=True) as s:
        x = s[[0, len(s) - 1]]
        q.put((len(s), x.shape, str(x.dtype)))


@pytest.mark.skipif(not os.path.isdir(FASHION_MNIST),
                    reason=f"{FASHION_MNIST} missing (dataset-fashion-mnist)")
def test_training_example_beside_info_and_reader(tmp_path):
    """The README's training example opens its stores writable (the
    default); zr info and a second read-only process work beside it."""
    stores = tmp_path / "stores"
    images = str(stores / "train" / "images")
    ctx = mp.get_context("spawn")
    go, q = ctx.Event(), ctx.Queue()
    r = ctx.Process(target=_second_reader, args=(images, go, q))
    r.start()
    ex = subprocess.Popen([sys.executable, "-u", EXAMPLE, "--store-dir", str(stores), "--steps", "3000"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = []
    try:
        for line in ex.stdout:  # the stores are open while the loader runs
            out.append(line)
            if line.startswith("loader:"):
                break
        assert ex.poll() is None, "".join(out)
        info = subprocess.run(["zr", "info", images], capture_output=True, text=True, timeout=60)
        assert info.returncode == 0, info.stderr
        assert re.search(r"records:\s+60000\b", info.stdout), info.stdout
        assert ex.poll() is None, "the example ended before zr info was done"
        go.set()
        assert q.get(timeout=60) == (60000, (2, 28, 28), "uint8")
        r.join(60)
        assert r.exitcode == 0
        assert ex.poll() is None, "the example ended before the readers were done"
        rest, _ = ex.communicate(timeout=600)
    finally:
        go.set()
        if ex.poll() is None:
            ex.kill()
            ex.wait()
        if r.is_alive():
            r.kill()
    text = "".join(out) + rest
    assert ex.returncode == 0, text
    assert "test accuracy:" in text


def test_loader_length_fixed_at_creation(tmp_path):
    """A DataLoader draws from the length its streams had when it was
    created; appends beside it (same process or a reader's refresh) enter
    only a new loader."""
    from loaderx.dataloader import DataLoader
    p = str(tmp_path / "l")
    w = DenseStore.create(p, np.int64, ())
    w.append(np.arange(100, dtype=np.int64))
    r = DenseStore.open(p, readonly=True)
    loaders = [DataLoader({"x": w}, batch_size=16, mode="iid", seed=3, num_workers=2),
               DataLoader({"x": r}, batch_size=16, mode="iid", seed=3, num_workers=2)]
    its = [iter(ld) for ld in loaders]
    w.append(np.arange(1000, 1100, dtype=np.int64))
    assert r.refresh() == 200
    for _ in range(30):
        for it in its:
            assert int(next(it)["x"].max()) < 100
    for ld in loaders:
        ld.close()
    with DataLoader({"x": r}, batch_size=64, mode="iid", seed=3) as ld:
        assert max(int(next(iter(ld))["x"].max()) for _ in range(10)) >= 1000
    r.close()
    w.close()
