"""The rough edges a new user hits first, as torch, numpy and Mosaic users
expect them: zero-size ragged records, codec='auto' for small records,
read-only opens named in the errors, FileNotFoundError for a missing path,
TypeError for a list of stores, num_workers=0 on the caller's thread,
even_batches for evaluation collectives, and independent passes."""

import errno
import threading

import numpy as np
import pytest

from loaderx.dataloader import DataLoader, PassLoader, pad
from loaderx.errors import NotAStoreError, StoreBusy, StoreNotFoundError
from loaderx.zrecord import DenseStore, RaggedStore, open_store


# ------------------------------------------------------------ ragged, zero


def test_zero_size_ragged_records_are_stored(tmp_path):
    rs = RaggedStore.create(tmp_path / "boxes", "float32", codec="zstd")
    recs = [np.ones((2, 4), np.float32), np.empty((0, 4), np.float32),
            np.empty((0,), np.float32), np.arange(4, dtype=np.float32).reshape(1, 4)]
    assert rs.append(recs) == 0
    got = rs[:]
    assert [g.shape for g in got] == [(2, 4), (0, 4), (0,), (1, 4)]
    for g, r in zip(got, recs):
        np.testing.assert_array_equal(g, r)
    assert rs[1].shape == (0, 4) and rs[1].dtype == np.float32
    pb = rs.gather_packed([1, 0, 2])
    assert pb.shapes == [(0, 4), (2, 4), (0,)] and pb.sizes.tolist() == [0, 8, 0]
    with DataLoader({"b": rs}, batch_size=4, mode="sequential", num_workers=1) as dl:
        batch = next(dl)["b"]
        assert [b.shape for b in batch] == [(2, 4), (0, 4), (0,), (1, 4)]
    out, lengths = pad([recs[1], recs[0]])
    assert out.shape == (2, 2, 4) and lengths.tolist() == [0, 2]


# -------------------------------------------------------------- codec auto


def test_codec_auto_picks_raw_for_labels_and_zstd_for_images(tmp_path):
    labels = DenseStore.create(tmp_path / "labels", "int64", (), codec="auto")
    assert labels.codec == "auto" and len(labels) == 0
    assert not (tmp_path / "labels").exists()  # created at the first append
    labels.append(np.arange(5000) % 10)
    assert labels.codec == "raw" and len(labels) == 5000
    labels.close()
    assert DenseStore.open(tmp_path / "labels", readonly=True).codec == "raw"

    images = DenseStore.create(tmp_path / "images", "uint8", (28, 28), codec="auto")
    x = np.zeros((200, 28, 28), np.uint8)
    x[:, 10:18, 10:18] = np.arange(200, dtype=np.uint8)[:, None, None]
    images.append(x)
    assert images.codec == "zstd"
    np.testing.assert_array_equal(images[:], x)
    images.close()

    tokens = RaggedStore.create(tmp_path / "tok", "int32", codec="auto")
    tokens.append([np.full(100, i, np.int32) for i in range(50)])
    assert tokens.codec == "zstd"
    noise = RaggedStore.create(tmp_path / "noise", "uint8", codec="auto")
    rng = np.random.default_rng(0)
    noise.append([rng.integers(0, 256, 300, dtype=np.uint8) for _ in range(50)])
    assert noise.codec == "raw"

    # closed before any append: an empty store of the default codec
    empty = DenseStore.create(tmp_path / "empty", "float32", (3,), codec="auto")
    empty.close()
    assert DenseStore.open(tmp_path / "empty").codec == "zstd"
    with pytest.raises(FileExistsError):
        DenseStore.create(tmp_path / "empty", "float32", (3,), codec="auto")
    with pytest.raises(ValueError, match="dict_bytes is only meaningful"):
        DenseStore.create(tmp_path / "d", "float32", (3,), codec="auto", dict_bytes=b"x" * 100)


# ---------------------------------------------------------- open, errors


def test_missing_path_is_file_not_found(tmp_path):
    missing = tmp_path / "nope"
    with pytest.raises(FileNotFoundError) as ei:
        DenseStore.open(missing)
    assert isinstance(ei.value, NotAStoreError) and isinstance(ei.value, StoreNotFoundError)
    assert ei.value.errno == errno.ENOENT and "does not exist" in str(ei.value)
    with pytest.raises(FileNotFoundError):
        open_store(missing, readonly=True)
    # a directory that is not a store is still only a NotAStoreError
    (tmp_path / "dir").mkdir()
    with pytest.raises(NotAStoreError) as ei:
        DenseStore.open(tmp_path / "dir")
    assert not isinstance(ei.value, FileNotFoundError)


def test_busy_writer_error_names_readonly(tmp_path):
    st = DenseStore.create(tmp_path / "s", "int64", (), codec="raw")
    st.append(np.arange(10))
    with pytest.raises(StoreBusy, match=r"readonly=True"):
        DenseStore.open(tmp_path / "s")
    with DenseStore.open(tmp_path / "s", readonly=True) as ro:  # beside the writer
        assert len(ro) == 10


def test_a_list_of_stores_is_a_type_error(tmp_path):
    st = DenseStore.create(tmp_path / "s", "int64", (), codec="raw")
    st.append(np.arange(10))
    with pytest.raises(TypeError, match=r"dict .*\{'x': store\}"):
        DataLoader([st])
    with pytest.raises(ValueError, match="non-empty"):
        DataLoader({})


# -------------------------------------------------------------- workers


def test_num_workers_zero_runs_on_the_callers_thread(tmp_path):
    st = DenseStore.create(tmp_path / "s", "int64", (), codec="raw")
    st.append(np.arange(1000))
    ref = [b["x"].copy() for _, b in zip(range(6), DataLoader({"x": st}, batch_size=32, seed=3))]
    seen = []

    def tf(batch):
        seen.append(threading.get_ident())
        return batch

    with DataLoader({"x": st}, batch_size=32, seed=3, num_workers=0, transform=tf) as dl:
        got = [next(dl)["x"] for _ in range(6)]
    assert set(seen) == {threading.get_ident()}
    for a, b in zip(ref, got):
        np.testing.assert_array_equal(a, b)

    def bad(batch):
        raise KeyError("boom")

    from loaderx.dataloader import LoaderError
    with DataLoader({"x": st}, batch_size=32, num_workers=0, transform=bad) as dl:
        with pytest.raises(LoaderError, match="step 0.*boom"):
            next(dl)


# ------------------------------------------------------------- passes


def test_even_batches_give_every_rank_the_same_steps(tmp_path):
    st = DenseStore.create(tmp_path / "s", "int64", (), codec="raw")
    st.append(np.arange(10))
    seen, lens = [], []
    for r in range(4):
        p = PassLoader({"x": st}, batch_size=2, rank=r, world_size=4, shuffle=True,
                       even_batches=True, num_workers=r % 2)
        lens.append(len(p))
        steps = 0
        for batch in p:
            steps += 1
            assert batch["x"].shape == (2,) and batch["mask"].dtype == np.bool_
            seen.extend(batch["x"][batch["mask"]].tolist())
        assert steps == len(p)
    assert lens == [2, 2, 2, 2]
    assert sorted(seen) == list(range(10))
    # without it, ranks 0 and 2 have a batch fewer
    assert [len(PassLoader({"x": st}, batch_size=2, rank=r, world_size=4)) for r in range(4)] \
        == [1, 2, 1, 2]
    with pytest.raises(ValueError, match="even_batches adds the key 'mask'"):
        PassLoader({"mask": st}, batch_size=2, even_batches=True)


def test_a_second_iter_is_an_independent_pass(tmp_path):
    st = DenseStore.create(tmp_path / "s", "int64", (), codec="raw")
    st.append(np.arange(100))
    p = PassLoader({"x": st}, batch_size=10)
    a, b = iter(p), iter(p)
    got_a, got_b = [], []
    for _ in range(10):
        got_a.append(next(a)["x"])
        got_b.append(next(b)["x"])
    assert np.array_equal(np.concatenate(got_a), np.arange(100))
    assert np.array_equal(np.concatenate(got_b), np.arange(100))
    c = iter(p)
    next(c)
    p.close()
    assert c.closed
