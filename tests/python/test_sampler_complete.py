"""Sampler: iid uniformity (chi-square), cyclic exactness, rank slices,
seek / construction at a step == iteration."""

import numpy as np
import pytest

from loaderx.zsampler import Sampler


def test_iid_chi_square_uniform():
    # 100 bins, 99 dof: mean 99, sd ~14; P(chi2 > 180) ~ 1e-6. Fixed seeds,
    # so the outcome is deterministic anyway.
    for n, seed in ((100, 1), (1000, 7), (1000003, 3)):
        s = Sampler(n, 5000, mode="iid", seed=seed)
        x = np.concatenate([s.next() for _ in range(40)])
        assert x.min() >= 0 and x.max() < n
        counts = np.bincount(x * 100 // n, minlength=100)
        expected = len(x) / 100 if n % 100 == 0 else None
        if expected is None:  # bins of unequal width: exact expectations
            edges = (np.arange(101) * n + 99) // 100
            expected = np.diff(edges) * len(x) / n
        chi = (((counts - expected) ** 2) / expected).sum()
        assert chi < 180, (n, chi)


@pytest.mark.parametrize("n", [1, 2, 7, 1000, 1000003])
def test_cyclic_exact(n):
    sizes = sorted({b for b in (1, 2, 3, 7, 8, 250, 300, 4096, n) if b <= n})
    for b in sizes:
        per_cycle = n // b
        if per_cycle * b > 300000 and b < 4096:
            continue  # keep the suite fast: large spaces only with large batches
        s = Sampler(n, b, mode="cyclic", seed=13)
        for cycle in range(2):
            s.seek(cycle * per_cycle)
            x = np.concatenate([s.next() for _ in range(per_cycle)])
            assert len(x) == per_cycle * b
            assert len(np.unique(x)) == len(x)  # each index at most once
            assert x.min() >= 0 and x.max() < n
            # every batch exactly b; n mod b dropped
            assert n - len(x) == n % b


def test_cyclic_remainder_differs_between_cycles():
    s = Sampler(1000003, 4096, mode="cyclic", seed=2)
    per = 1000003 // 4096
    dropped = []
    for c in range(2):
        seen = np.zeros(1000003, bool)
        for k in range(per):
            seen[s.indices(c * per + k)] = True
        dropped.append(np.flatnonzero(~seen))
    assert len(dropped[0]) == 1000003 % 4096
    assert not np.array_equal(dropped[0], dropped[1])


@pytest.mark.parametrize("mode", ["sequential", "iid", "cyclic"])
def test_rank_slices_disjoint_and_covering(mode):
    n, b, world = 1000, 25, 4
    whole = Sampler(n, b * world, mode=mode, seed=5)
    ranks = [Sampler(n, b, mode=mode, seed=5, rank=r, world_size=world) for r in range(world)]
    for step in range(n // (b * world) * 2):
        g = whole.indices(step)
        parts = [r.indices(step) for r in ranks]
        assert np.array_equal(np.concatenate(parts), g)
        if mode != "iid":
            assert len(np.unique(g)) == len(g)
    if mode == "cyclic":  # together the ranks cover the cycle exactly once
        per = n // (b * world)
        allx = np.concatenate([r.indices(s) for s in range(per) for r in ranks])
        assert np.array_equal(np.sort(allx), np.arange(n))


@pytest.mark.parametrize("mode", ["sequential", "iid", "cyclic"])
def test_seek_and_construction_equal_iteration(mode):
    it = Sampler(777, 16, mode=mode, seed=99)
    walked = [it.next() for _ in range(120)]
    for k in (0, 1, 47, 48, 119):
        s = Sampler(777, 16, mode=mode, seed=99)
        s.seek(k)
        assert np.array_equal(s.next(), walked[k])
        assert s.step == k + 1
        assert np.array_equal(Sampler(777, 16, mode=mode, seed=99, step=k).next(), walked[k])
        assert np.array_equal(it.indices(k), walked[k])
    # far steps: O(batch) whatever the step, and still deterministic
    far = 10 ** 15
    a = Sampler(777, 16, mode=mode, seed=99, step=far).next()
    b = Sampler(777, 16, mode=mode, seed=99).indices(far)
    assert np.array_equal(a, b) and a.max() < 777


def test_mode_enum_accepted():
    a = Sampler(50, 5, mode=Sampler.Mode.IID, seed=1).next()
    b = Sampler(50, 5, mode="IID", seed=1).next()
    assert np.array_equal(a, b)
