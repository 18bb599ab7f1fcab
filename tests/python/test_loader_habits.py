"""A torch user's habits: deterministic augmentation in the transform
(step, indices and a per-batch Generator), a transform returning None,
errors naming streams by their dict keys, hints for torch keywords,
state_dict()/load_state_dict(), the package's own __version__."""

import os

import numpy as np
import pytest

import loaderx
from loaderx.dataloader import DataLoader, LoaderError, TransformInfo
from loaderx.zrecord import DenseStore

from test_loader_complete import _corrupt_records_from


@pytest.fixture
def store(tmp_path):
    with DenseStore.create(str(tmp_path / "x"), "float32", (4,)) as st:
        st.append(np.arange(400 * 4, dtype=np.float32).reshape(400, 4))
    s = DenseStore.open(str(tmp_path / "x"), readonly=True)
    yield s
    s.close()


def augment(batch, info):
    """Random flips and noise from info.rng only."""
    x = batch["x"]
    flip = info.rng.random(len(x)) < 0.5
    x = np.where(flip[:, None], x[:, ::-1], x) + info.rng.normal(0, 0.1, x.shape)
    return {"x": x.astype(np.float32), "step": info.step, "idx": info.indices}


def run(store, steps=20, **kw):
    with DataLoader({"x": store}, batch_size=16, seed=11, **kw) as L:
        return [next(L) for _ in range(steps)]


def test_augmentation_is_the_same_for_any_workers_and_prefetch(store):
    # Before: the transform got only the batch; np.random inside it made 1
    # and 3 workers (and two runs with 3) differ.
    a = run(store, num_workers=1, prefetch=1, transform=augment)
    for kw in ({"num_workers": 3}, {"num_workers": 3}, {"num_workers": 2, "prefetch": 7}):
        b = run(store, transform=augment, **kw)
        for k, (x, y) in enumerate(zip(a, b)):
            assert x["step"] == y["step"] == k
            assert np.array_equal(x["x"], y["x"]), (kw, k)
    # the indices are the batch's records, the noise differs per step
    plain = run(store, num_workers=1)
    for x, p in zip(a, plain):
        assert np.array_equal(x["idx"], p["x"][:, 0].astype(np.int64) // 4)
    assert not np.array_equal(a[0]["x"] - a[1]["x"], np.zeros_like(a[0]["x"]))
    # resume: the augmentation of batch k does not depend on the run's start
    with DataLoader({"x": store}, batch_size=16, seed=11, start_step=7, transform=augment) as L:
        assert np.array_equal(next(L)["x"], a[7]["x"])


def test_info_rng_depends_on_seed_step_rank():
    def draw(seed, step, rank, epoch=None):
        return TransformInfo(step, np.arange(3), seed, rank, epoch).rng.integers(0, 2**62)

    base = draw(1, 5, 0)
    assert draw(1, 5, 0) == base
    assert len({base, draw(2, 5, 0), draw(1, 6, 0), draw(1, 5, 1), draw(1, 5, 0, 0)}) == 5


def test_one_argument_transforms_still_get_the_batch_only(store):
    got = run(store, steps=2, transform=lambda b: {"n": len(b)})
    assert got[0] == {"n": 1}


def test_transform_returning_none_names_the_step(store):
    # Before: next() yielded None.
    def bad(b):
        if b["x"][0, 0] >= 0 and bad.calls == 3:
            return None
        bad.calls += 1
        return b
    bad.calls = 0
    with DataLoader({"x": store}, batch_size=8, num_workers=1, prefetch=1, transform=bad) as L:
        with pytest.raises(LoaderError, match=r"step 3.*returned None") as ei:
            for _ in range(10):
                next(L)
    assert ei.value.step == 3


@pytest.mark.parametrize("transform", [None, lambda b: b])
def test_errors_name_streams_by_dict_key(tmp_path, store, transform):
    # Before: "stream 0 (path)".
    path = tmp_path / "bad"
    with DenseStore.create(path, np.uint64, (32,), codec="zstd") as s:
        s.append(np.repeat(np.arange(400, dtype=np.uint64), 32).reshape(400, 32))
    _corrupt_records_from(str(path), 0)
    with DenseStore.open(path) as s:
        L = DataLoader({"ok": store, "pixels": s}, batch_size=10, mode="sequential",
                       num_workers=1, transform=transform)
        with pytest.raises(LoaderError) as ei:
            next(L)
        assert "stream 'pixels' (" in str(ei.value), str(ei.value)
        L.close()


def test_unknown_keywords_get_hints(store):
    with pytest.raises(TypeError, match=r"'shuffle'.*mode="):
        DataLoader({"x": store}, batch_size=4, shuffle=True)
    with pytest.raises(TypeError, match=r"prefetch="):
        DataLoader({"x": store}, prefetch_factor=2)
    with pytest.raises(TypeError, match=r"did you mean num_workers="):
        DataLoader({"x": store}, num_worker=2)


def test_state_dict_aliases(store):
    L = DataLoader({"x": store}, batch_size=8, seed=5, num_workers=2)
    for _ in range(3):
        next(L)
    sd = L.state_dict()
    assert sd == L.state() and sd["step"] == 3
    want = next(L)["x"]
    M = DataLoader({"x": store}, batch_size=2, seed=0, num_workers=1, transform=lambda b: b)
    next(M)
    M.load_state_dict(sd)
    assert M.step == 3 and M.batch_size == 8
    assert np.array_equal(next(M)["x"], want)
    with pytest.raises(ValueError, match="unknown keys"):
        M.load_state_dict({"step": 1, "shuffle": True})
    L.close()
    M.close()


def test_version_is_the_package_s():
    # Before: libzloader's version.
    assert isinstance(loaderx.__version__, str) and loaderx.__version__.count(".") == 2
    assert "zloader" in loaderx.native_versions()
    # One source of truth: the distribution's version (meson's project
    # version), not libzloader's.
    import importlib.metadata
    assert loaderx.__version__ == importlib.metadata.version("loaderx")
