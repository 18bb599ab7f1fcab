"""Parallel ingest on a real engine: one dataset written as N shards by a
dask.distributed LocalCluster of worker processes, read back as one stream;
a worker killed mid-task leaves its shard absent (or committed), never
half-written, and rerunning the task replaces it."""

import os
import signal
import subprocess
import sys

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")
import dask  # noqa: E402  (after the skip: dask comes with distributed)

from loaderx.shards import ConcatStore, write_shard  # noqa: E402
from loaderx.zrecord import DenseStore  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "..", "examples", "dask_shards.py")


def rec(idx):
    idx = np.asarray(idx, dtype=np.int64)
    return (idx[:, None] * 1000 + np.arange(37)).astype("<i8")  # 296-byte records


def shard_task(out, k, lo, hi, kill=None):
    """Write shard k = records [lo, hi). kill='mid': die (SIGKILL) after
    appending half of them; kill='after': die right after the commit."""
    path = os.path.join(out, f"part-{k:03d}")

    def write(store):
        mid = (lo + hi) // 2
        store.append(rec(np.arange(lo, mid)))
        store.sync()  # even durable records of an unfinished shard must not count
        if kill == "mid":
            os.kill(os.getpid(), signal.SIGKILL)
        store.append(rec(np.arange(mid, hi)))

    write_shard(path, lambda p: DenseStore.create(p, "<i8", (37,), codec="zstd"), write)
    if kill == "after":
        os.kill(os.getpid(), signal.SIGKILL)
    return path


def check_all(out, n):
    with ConcatStore(os.path.join(out, "part-*")) as c:
        assert len(c) == n
        np.testing.assert_array_equal(c[np.arange(n)], rec(np.arange(n)))


@pytest.fixture(scope="module")
def cluster():
    # A killed worker must fail its task at once (no silent retry), so that
    # the test sees the state a kill leaves and reruns the task itself.
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                      dashboard_address=None) as lc:
            with distributed.Client(lc) as client:
                yield client


def test_parallel_shards_read_as_one_stream(cluster, tmp_path):
    out = str(tmp_path)
    bounds = np.linspace(0, 5000, 9).astype(int)
    futs = [cluster.submit(shard_task, out, k, int(bounds[k]), int(bounds[k + 1]), pure=False)
            for k in range(8)]
    paths = cluster.gather(futs)
    assert sorted(paths) == [os.path.join(out, f"part-{k:03d}") for k in range(8)]
    assert not [p for p in os.listdir(out) if p.endswith(".partial")]
    check_all(out, 5000)
    # the tasks really ran in worker processes, not here
    pids = cluster.run(os.getpid)
    assert len(pids) == 2 and os.getpid() not in pids.values()


def test_killed_worker_leaves_no_half_shard_and_rerun_replaces_it(cluster, tmp_path):
    out = str(tmp_path)
    for k, (lo, hi) in enumerate([(0, 300), (300, 700)]):
        cluster.submit(shard_task, out, k, lo, hi, pure=False).result()
    # shard 2 dies half-way: nothing at part-002, only its .partial
    fut = cluster.submit(shard_task, out, 2, 700, 1000, "mid", pure=False)
    with pytest.raises(distributed.KilledWorker):
        fut.result(timeout=120)
    assert not os.path.exists(os.path.join(out, "part-002"))
    assert os.path.isdir(os.path.join(out, "part-002.partial"))
    # the dataset then reads as the committed shards only, never a half shard
    check_all(out, 700)
    # rerunning the task replaces the leftover and commits the shard
    cluster.submit(shard_task, out, 2, 700, 1000, pure=False).result(timeout=120)
    assert not os.path.exists(os.path.join(out, "part-002.partial"))
    check_all(out, 1000)
    # killed right after its commit: the shard is complete; a rerun replaces it
    fut = cluster.submit(shard_task, out, 3, 1000, 1200, "after", pure=False)
    with pytest.raises(distributed.KilledWorker):
        fut.result(timeout=120)
    check_all(out, 1200)
    cluster.submit(shard_task, out, 3, 1000, 1200, pure=False).result(timeout=120)
    check_all(out, 1200)


def test_example_runs(tmp_path):
    p = subprocess.run([sys.executable, EXAMPLE, str(tmp_path / "ds"), "--records", "3000",
                        "--shards", "5", "--workers", "2", "--steps", "5"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "verified 3000 records as one dataset" in p.stdout
    assert "every record as written" in p.stdout
