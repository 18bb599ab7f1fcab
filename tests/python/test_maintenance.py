"""delete / stats / compact / sync on DenseStore and RaggedStore."""

import numpy as np
import pytest

from loaderx.errors import StoreBusy
from loaderx.zrecord import DenseStore, RaggedStore


def swap_last(model, idx):
    """The specification's deletion on a Python list."""
    for i in sorted(set(idx), reverse=True):
        model[i] = model[-1]
        model.pop()


@pytest.mark.parametrize("codec", ["raw", "zstd"])
@pytest.mark.parametrize("form", ["int", "neg", "slice", "array", "mask", "tuple", "dups"])
def test_delete_index_forms(store_dir, rng, codec, form):
    data = rng.integers(0, 255, size=(50, 3, 4), dtype=np.uint8)
    with DenseStore.create(store_dir / "d", np.uint8, (3, 4), codec=codec) as s:
        s.append(data)
        n = len(s)
        key, idx = {
            "int": (7, [7]),
            "neg": (-2, [n - 2]),
            "slice": (slice(0, n, 3), list(range(0, n, 3))),
            "array": (np.array([4, 40, 1]), [4, 40, 1]),
            "mask": (np.arange(n) % 4 == 1, [i for i in range(n) if i % 4 == 1]),
            "tuple": ((2, 3, -1), [2, 3, n - 1]),
            "dups": ([5, 5, 9], [5, 9]),
        }[form]
        model = list(range(n))
        swap_last(model, idx)
        s.delete(key)
        assert len(s) == len(model)
        np.testing.assert_array_equal(s[:], data[model])


def test_delete_out_of_range_deletes_nothing(store_dir):
    with DenseStore.create(store_dir / "d", np.int32, ()) as s:
        s.append(np.arange(10, dtype=np.int32))
        with pytest.raises(IndexError):
            s.delete([1, 10])
        assert len(s) == 10
        s.delete(np.array([], dtype=np.int64))
        assert len(s) == 10


def test_stats_compact_roundtrip(store_dir, rng):
    recs = [rng.integers(-9, 9, size=(int(k),), dtype=np.int16) for k in rng.integers(1, 300, 400)]
    with RaggedStore.create(store_dir / "r", np.int16, codec="zstd") as s:
        s.append(recs)
        st = s.stats()
        assert set(st) == {"records", "live_bytes", "chunk_bytes", "reclaimable"}
        assert st["records"] == 400 and st["reclaimable"] == 0
        model = list(range(400))
        idx = list(range(0, 400, 3))
        swap_last(model, idx)
        s.delete(idx)
        st1 = s.stats()
        assert st1["records"] == len(model) and st1["reclaimable"] > 0
        assert st1["chunk_bytes"] == st["chunk_bytes"]
        s.compact()
        st2 = s.stats()
        assert st2["reclaimable"] == 0
        assert st2["live_bytes"] == st1["live_bytes"] == st2["chunk_bytes"]
        got = s[:]
        for g, m in zip(got, model):
            np.testing.assert_array_equal(g, recs[m])
        s.sync()
    with RaggedStore.open(store_dir / "r") as s:
        assert len(s) == len(model)
        np.testing.assert_array_equal(s[-1], recs[model[-1]])


def test_delete_needs_exclusive_use(store_dir):
    from loaderx.dataloader import DataLoader

    with DenseStore.create(store_dir / "d", np.float32, (2,)) as s:
        s.append(np.ones((32, 2), dtype=np.float32))
        loader = DataLoader({"x": s}, batch_size=4)
        with pytest.raises(StoreBusy, match="exclusive"):
            s.delete(0)
        with pytest.raises(StoreBusy, match="exclusive"):
            s.compact()
        loader.close()
        s.delete(0)
        assert len(s) == 31
