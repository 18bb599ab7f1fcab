"""Finite passes (PassLoader): every record exactly once, in index order or
shuffled by (seed, epoch), the last batch partial unless drop_last, len(),
rank sharding with each record on exactly one rank; the same gather and
transform machinery as the endless loader."""

import os
import subprocess
import sys

import numpy as np
import pytest

from loaderx.dataloader import DataLoader, PassLoader
from loaderx.zrecord import DenseStore, RaggedStore

N = 97


@pytest.fixture
def streams(tmp_path):
    with DenseStore.create(str(tmp_path / "x"), "int64", ()) as st:
        st.append(np.arange(N, dtype=np.int64))
    with RaggedStore.create(str(tmp_path / "r"), "int32") as st:
        st.append([np.full(i % 4 + 1, i, dtype=np.int32) for i in range(N)])
    x = DenseStore.open(str(tmp_path / "x"), readonly=True)
    r = RaggedStore.open(str(tmp_path / "r"), readonly=True)
    yield {"x": x, "r": r}
    x.close()
    r.close()


def test_index_order_each_record_once_last_partial(streams):
    # Before: the endless 'sequential' mode wraps (7 records at batch 3
    # gives [6, 0, 1]) and len() is a TypeError.
    p = PassLoader(streams, batch_size=10, num_workers=2)
    assert len(p) == 10 and p.num_records == N
    batches = list(p)
    assert len(batches) == 10
    assert [len(b["x"]) for b in batches] == [10] * 9 + [7]
    got = np.concatenate([b["x"] for b in batches])
    assert got.tolist() == list(range(N))
    for b in batches:
        for i, rec in zip(b["x"], b["r"]):
            assert rec.tolist() == [i] * (i % 4 + 1)
    # re-iterable: a second pass is the same
    assert np.concatenate([b["x"] for b in p]).tolist() == list(range(N))


def test_drop_last(streams):
    p = PassLoader(streams, batch_size=10, drop_last=True)
    assert len(p) == 9 and p.num_records == 90
    got = np.concatenate([b["x"] for b in p])
    assert got.tolist() == list(range(90))


def test_shuffle_by_seed_and_epoch(streams):
    def order(**kw):
        return np.concatenate([b["x"] for b in PassLoader(streams, batch_size=8, **kw)])

    a = order(shuffle=True, seed=1)
    assert sorted(a.tolist()) == list(range(N)) and a.tolist() != list(range(N))
    assert np.array_equal(a, order(shuffle=True, seed=1, num_workers=3, prefetch=7))
    assert not np.array_equal(a, order(shuffle=True, seed=2))
    b = order(shuffle=True, seed=1, epoch=1)
    assert sorted(b.tolist()) == list(range(N)) and not np.array_equal(a, b)
    p = PassLoader(streams, batch_size=8, shuffle=True, seed=1)
    p.set_epoch(1)
    assert np.array_equal(np.concatenate([x["x"] for x in p]), b)


@pytest.mark.parametrize("world", [2, 3, 4])
@pytest.mark.parametrize("drop_last", [False, True])
def test_ranks_each_record_on_exactly_one_rank(streams, world, drop_last):
    seen, lens = [], []
    for rank in range(world):
        p = PassLoader(streams, batch_size=8, rank=rank, world_size=world, shuffle=True,
                       seed=4, drop_last=drop_last)
        got = [b["x"] for b in p]
        assert len(got) == len(p)
        assert sum(len(g) for g in got) == p.num_records
        lens.append(len(p))
        seen += np.concatenate(got).tolist() if got else []
    g = 8 * world
    want = (N // g) * g if drop_last else N
    assert len(seen) == want and len(set(seen)) == want
    assert max(lens) - min(lens) <= 1
    # the ranks together are the single-rank pass at the global batch
    one = np.concatenate([b["x"] for b in PassLoader(streams, batch_size=g, shuffle=True, seed=4,
                                                     drop_last=drop_last)])
    assert sorted(one.tolist()) == sorted(seen)


def test_transform_and_info(streams):
    seen = []

    def tf(batch, info):
        seen.append(info.epoch)
        assert np.array_equal(info.indices, batch["x"])
        return {"x": batch["x"] * 2, "step": info.step}

    p = PassLoader(streams, batch_size=10, transform=tf, epoch=3)
    out = list(p)
    assert [b["step"] for b in out] == list(range(10))
    assert np.concatenate([b["x"] for b in out]).tolist() == [2 * i for i in range(N)]
    assert set(seen) == {3}


def test_resume_mid_pass_and_early_close(streams):
    p = PassLoader(streams, batch_size=10)
    it = iter(p)
    first = [next(it)["x"] for _ in range(4)]
    assert it.step == 4
    it.close()
    rest = [b["x"] for b in p.iter_from(4)]
    assert np.concatenate(first + rest).tolist() == list(range(N))
    with pytest.raises(ValueError):
        p.iter_from(11)


def test_errors_and_hints(streams):
    with pytest.raises(TypeError, match="shuffle=True"):
        PassLoader(streams, batch_size=4, mode="cyclic")
    with pytest.raises(TypeError, match="batch_size"):
        PassLoader(streams, batchsize=4)
    with pytest.raises(ValueError):
        PassLoader(streams, batch_size=0)


@pytest.mark.skipif(not os.path.isdir("/usr/share/datasets/fashion-mnist"),
                    reason="dataset-fashion-mnist is not installed")
def test_fashion_mnist_evaluates_each_test_image_once(tmp_path):
    example = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "fashion_mnist.py")
    res = subprocess.run([sys.executable, example, "--store-dir", str(tmp_path / "s"),
                          "--steps", "1500"], capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "on 10000 images in 10 batches" in res.stdout, res.stdout
