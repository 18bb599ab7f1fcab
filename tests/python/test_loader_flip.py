"""DataLoader(flip={name: p}): native random flips along the last axis, on
real Fashion-MNIST images when the machine has them: exact against numpy,
the same for any worker count and on resume, paired streams flipped
together, and clear errors for what cannot be flipped."""

import gzip
import os

import numpy as np
import pytest

from loaderx.dataloader import DataLoader
from loaderx.zrecord import DenseStore, RaggedStore

FASHION = "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz"


def _images():
    if os.path.exists(FASHION):
        with gzip.open(FASHION, "rb") as f:
            data = f.read()
        return np.frombuffer(data, dtype=np.uint8, offset=16).reshape(-1, 28, 28)[:2000].copy()
    return np.random.default_rng(0).integers(0, 255, (2000, 28, 28), dtype=np.uint8)


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    d = tmp_path_factory.mktemp("flip")
    img = _images()
    chw = np.repeat(img[:, None], 3, axis=1)  # (N, 3, 28, 28)
    chw[:, 1] //= 2
    mask = (img > 128).astype(np.int64)        # a segmentation-like mask
    boxes = np.random.default_rng(1).random((len(img), 4))  # float64 scalars per row
    out = {}
    for name, arr, codec in [("chw", chw, "zstd"), ("mask", mask, "raw"), ("boxes", boxes, "raw")]:
        with DenseStore.create(str(d / name), arr.dtype, arr.shape[1:], codec=codec) as st:
            st.append(arr)
        out[name] = (DenseStore.open(str(d / name), readonly=True), arr)
    with RaggedStore.create(str(d / "rag"), "int32") as st:
        st.append([np.arange(i % 7 + 1, dtype=np.int32) for i in range(len(img))])
    out["rag"] = (RaggedStore.open(str(d / "rag"), readonly=True), None)
    yield out
    for s, _ in out.values():
        s.close()


def _expect(arr, idx, flipped):
    rows = arr[idx]
    return np.where(flipped.reshape((-1,) + (1,) * (rows.ndim - 1)), rows[..., ::-1], rows)


@pytest.mark.parametrize("workers", [1, 2])
def test_flip_matches_numpy_and_pairs_streams(stores, workers):
    (chw, a), (mask, m) = stores["chw"], stores["mask"]
    with DataLoader({"x": chw, "m": mask}, batch_size=64, mode="iid", seed=11,
                    num_workers=workers, flip={"x": 0.5, "m": 0.5}) as dl:
        total = 0
        for step in range(8):
            b = next(dl)
            idx, f = dl.last_indices, dl.flipped("x", step)
            assert f.dtype == bool and f.shape == (64,)
            np.testing.assert_array_equal(b["x"], _expect(a, idx, f))
            np.testing.assert_array_equal(b["m"], _expect(m, idx, f))  # the same decisions
            np.testing.assert_array_equal(dl.flipped("m", step), f)
            total += int(f.sum())
        assert 150 < total < 362  # 512 fair coins


def test_flip_same_for_any_workers_and_on_resume(stores):
    chw, _ = stores["chw"]
    runs = []
    for workers in (1, 2, 3):
        with DataLoader({"x": chw}, batch_size=32, seed=4, num_workers=workers,
                        flip={"x": 0.3}) as dl:
            runs.append([next(dl)["x"] for _ in range(6)])
            state = dl.state()
    for r in runs[1:]:
        for x, y in zip(runs[0], r):
            np.testing.assert_array_equal(x, y)
    with DataLoader({"x": chw}, batch_size=32, seed=4, flip={"x": 0.3}, start_step=3) as dl:
        for k in range(3, 6):
            np.testing.assert_array_equal(next(dl)["x"], runs[0][k])
    with DataLoader.from_state({"x": chw}, state, flip={"x": 0.3}) as dl:
        assert dl.step == 6
        with DataLoader({"x": chw}, batch_size=32, seed=4, flip={"x": 0.3}) as ref:
            for _ in range(6):
                next(ref)
            np.testing.assert_array_equal(next(dl)["x"], next(ref)["x"])


def test_flip_probability_edges_and_ranks(stores):
    (chw, a), (boxes, bx) = stores["chw"], stores["boxes"]
    with DataLoader({"x": chw, "b": boxes}, batch_size=16, mode="sequential",
                    flip={"x": 1.0, "b": 0.0}) as dl:
        b = next(dl)
        np.testing.assert_array_equal(b["x"], a[:16][..., ::-1])
        np.testing.assert_array_equal(b["b"], bx[:16])  # p = 0: untouched
    # Ranks: the decisions follow the global batch position, so two ranks
    # together flip what one rank with the whole global batch flips.
    whole = DataLoader({"x": chw}, batch_size=32, seed=8, mode="iid", flip={"x": 0.5})
    halves = [DataLoader({"x": chw}, batch_size=16, seed=8, mode="iid", flip={"x": 0.5},
                         rank=r, world_size=2) for r in (0, 1)]
    try:
        for step in range(3):
            w = next(whole)["x"]
            parts = [next(h)["x"] for h in halves]
            np.testing.assert_array_equal(np.concatenate(parts), w)
            np.testing.assert_array_equal(
                np.concatenate([h.flipped("x", step) for h in halves]), whole.flipped("x", step))
    finally:
        whole.close()
        for h in halves:
            h.close()


def test_flip_refuses_what_cannot_be_flipped(stores):
    chw, rag, boxes = stores["chw"][0], stores["rag"][0], stores["boxes"][0]
    with pytest.raises(ValueError, match="ragged"):
        DataLoader({"x": chw, "r": rag}, batch_size=8, flip={"r": 0.5})
    with pytest.raises(ValueError, match="unknown stream 'y'"):
        DataLoader({"x": chw}, batch_size=8, flip={"y": 0.5})
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        DataLoader({"x": chw}, batch_size=8, flip={"x": 1.5})
    with pytest.raises(TypeError, match="number"):
        DataLoader({"x": chw}, batch_size=8, flip={"x": "half"})
    with pytest.raises(TypeError, match="dict"):
        DataLoader({"x": chw}, batch_size=8, flip=0.5)
    with DataLoader({"x": chw, "b": boxes}, batch_size=8, flip={"x": 0.5}) as dl:
        with pytest.raises(KeyError, match="'b' has no flip"):
            dl.flipped("b", 0)
