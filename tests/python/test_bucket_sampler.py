"""BucketSampler: length-bucketed batches as a pure function of (seed,
step): each record at most once per cycle, same records per window as the
cyclic mode, far less padding; ranks split the global batch."""

import numpy as np
import pytest

from loaderx.zsampler import BucketSampler, Sampler


def efficiency(s, lengths, steps):
    real = padded = 0
    for k in range(steps):
        L = lengths[s.indices(k)]
        real += L.sum()
        padded += L.max() * len(L)
    return real / padded


def test_bucketed_batches_pad_far_less():
    rng = np.random.default_rng(0)
    lengths = rng.zipf(1.6, size=5000).clip(1, 4000)
    b = BucketSampler(lengths, 32, window=32, seed=1)
    c = Sampler(len(lengths), 32, "cyclic", seed=1)
    steps = len(lengths) // 32
    assert efficiency(b, lengths, steps) > 2 * efficiency(c, lengths, steps)
    seen = np.concatenate([b.indices(k) for k in range(steps)])
    assert len(set(seen.tolist())) == len(seen)  # at most once per cycle
    # a window holds exactly the cyclic mode's records of those steps
    win = np.concatenate([b.indices(k) for k in range(32)])
    ref = np.concatenate([c.indices(k) for k in range(32)])
    assert sorted(win.tolist()) == sorted(ref.tolist())
    # pure function of (seed, step)
    again = BucketSampler(lengths, 32, window=32, seed=1, step=17)
    assert np.array_equal(next(again), b.indices(17))
    assert not np.array_equal(BucketSampler(lengths, 32, window=32, seed=2).indices(17),
                              b.indices(17))


def test_ranks_split_the_global_batch():
    lengths = np.arange(1000) % 37
    one = BucketSampler(lengths, 20, window=4, seed=3)
    r0 = BucketSampler(lengths, 10, window=4, seed=3, rank=0, world_size=2)
    r1 = BucketSampler(lengths, 10, window=4, seed=3, rank=1, world_size=2)
    for k in range(10):
        assert np.array_equal(np.concatenate([r0.indices(k), r1.indices(k)]), one.indices(k))


def test_errors():
    with pytest.raises(ValueError):
        BucketSampler([], 4)
    with pytest.raises(ValueError):
        BucketSampler([1, 2, 3], 4)  # cyclic rule: batch <= length
    with pytest.raises(ValueError):
        BucketSampler([1, -2, 3], 1)
