"""Sampler: determinism, modes, cyclic exactness, sharding, errors."""

import numpy as np
import pytest

from loaderx.zsampler import Sampler


def test_spec_example():
    sampler = Sampler(1_000_000, 256, Sampler.Mode.IID, seed=42)
    indices = sampler.next()
    assert indices.shape == (256,) and indices.dtype == np.int64
    assert indices.min() >= 0 and indices.max() < 1_000_000
    assert sampler.step == 1


@pytest.mark.parametrize("mode", list(Sampler.Mode))
def test_deterministic_pure_function_of_seed_and_step(mode):
    a = Sampler(1000, 32, mode, seed=7)
    b = Sampler(1000, 32, mode, seed=7)
    seq = [a.next() for _ in range(20)]
    for k, batch in enumerate(seq):
        np.testing.assert_array_equal(batch, b.indices(k))
    assert b.step == 0
    b.seek(13)
    np.testing.assert_array_equal(b.next(), seq[13])
    assert b.step == 14
    c = Sampler(1000, 32, mode, seed=7, step=5)
    np.testing.assert_array_equal(next(iter(c)), seq[5])


def test_seeds_differ():
    a = Sampler(10_000, 64, "iid", seed=1).indices(0)
    b = Sampler(10_000, 64, "iid", seed=2).indices(0)
    assert not np.array_equal(a, b)


def test_mode_strings():
    assert Sampler(10, 2, "IID").mode is Sampler.Mode.IID
    assert Sampler(10, 2, "sequential").mode is Sampler.Mode.SEQUENTIAL
    assert Sampler(10, 2).mode is Sampler.Mode.CYCLIC
    with pytest.raises(ValueError, match="mode"):
        Sampler(10, 2, "shuffle")


def test_sequential_window():
    s = Sampler(10, 4, "sequential")
    np.testing.assert_array_equal(s.next(), [0, 1, 2, 3])
    np.testing.assert_array_equal(s.next(), [4, 5, 6, 7])
    np.testing.assert_array_equal(s.next(), [8, 9, 0, 1])


def test_cyclic_each_index_once_per_cycle():
    n, b = 120, 12
    s = Sampler(n, b, Sampler.Mode.CYCLIC, seed=3)
    cycles = []
    for c in range(3):
        idx = np.concatenate([s.next() for _ in range(n // b)])
        np.testing.assert_array_equal(np.sort(idx), np.arange(n))
        cycles.append(idx)
    assert not np.array_equal(cycles[0], cycles[1])


def test_cyclic_remainder_dropped():
    n, b = 10, 3
    s = Sampler(n, b, "cyclic", seed=9)
    for _ in range(4):
        idx = np.concatenate([s.next() for _ in range(n // b)])
        assert len(np.unique(idx)) == 9


def test_rank_sharding_is_one_global_batch():
    n, b, w = 64, 4, 4
    for mode in ("cyclic", "iid", "sequential"):
        glob = Sampler(n, b * w, mode, seed=5).indices(3)
        parts = [Sampler(n, b, mode, seed=5, rank=r, world_size=w).indices(3) for r in range(w)]
        np.testing.assert_array_equal(np.concatenate(parts), glob)


@pytest.mark.parametrize("kwargs", [
    dict(length=0, batch_size=1), dict(length=10, batch_size=0),
    dict(length=10, batch_size=11), dict(length=10, batch_size=2, rank=2, world_size=2),
    dict(length=10, batch_size=2, world_size=0), dict(length=10, batch_size=6, world_size=2),
    dict(length=10, batch_size=2, seed=-1),
])
def test_invalid_configs(kwargs):
    with pytest.raises(ValueError):
        Sampler(**kwargs)


def test_iid_allows_batch_over_length():
    s = Sampler(5, 64, "iid", seed=1)
    assert s.next().max() < 5


def test_repr():
    assert "Sampler.Mode.CYCLIC" in repr(Sampler(10, 2))
