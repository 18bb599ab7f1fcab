"""The Python gather paths: DenseStore.gather(idx, out=) into a caller's
buffer (right and wrong buffers), the pool of reused result buffers behind
store[idx], index normalisation edge cases on the fast path (int64/uint64
arrays handed straight to the native check) and the slow one, the ragged
per-record arrays made in one native call, and RaggedStore.gather_packed
(one buffer plus offsets and shapes)."""

import threading

import numpy as np
import pytest

from loaderx import _zr
from loaderx.errors import CorruptStoreError
from loaderx.zrecord import (DenseStore, RaggedBatch, RaggedStore, _unpack_ragged,
                             release_buffers)


@pytest.fixture(params=["raw", "zstd"])
def dense(store_dir, request):
    data = np.arange(40 * 6, dtype=np.int32).reshape(40, 2, 3)
    ds = DenseStore.create(store_dir / "dense", data.dtype, data.shape[1:], codec=request.param)
    ds.append(data)
    yield ds, data
    ds.close()


@pytest.fixture
def ragged(store_dir):
    recs = [np.full((i % 3 + 1, i + 1), i, dtype=np.float32) for i in range(10)]
    recs.append(np.array(7.5, dtype=np.float32))  # a scalar record, shape ()
    recs.append(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    rs = RaggedStore.create(store_dir / "ragged", np.float32)
    rs.append(recs)
    yield rs, recs
    rs.close()


# ------------------------------------------------------------------ out=

@pytest.mark.parametrize("key", [[0, 39, 3, 3], np.array([5, -40, 1]), slice(2, 30, 7),
                                 np.array([4, 0], dtype=np.uint64), (1, 2, 3),
                                 np.arange(6).reshape(2, 3)])
def test_gather_out_writes_and_returns_out(dense, key):
    ds, data = dense
    exp = data[np.arange(40)[key] if not isinstance(key, tuple) else list(key)]
    out = np.full(exp.shape, -1, dtype=np.int32)
    got = ds.gather(key, out=out)
    assert got is out
    np.testing.assert_array_equal(out, exp)
    np.testing.assert_array_equal(ds.gather(key), exp)  # no out: a fresh array


def test_gather_one_int_is_item_shaped(dense):
    ds, data = dense
    out = np.empty((2, 3), dtype=np.int32)
    assert ds.gather(-1, out=out) is out
    np.testing.assert_array_equal(out, data[39])
    np.testing.assert_array_equal(ds.gather(7), data[7])


def test_gather_out_reused_across_batches(dense, rng):
    ds, data = dense
    out = np.empty((16, 2, 3), dtype=np.int32)
    for _ in range(5):
        idx = rng.integers(-40, 40, size=16)
        ds.gather(idx, out=out)
        np.testing.assert_array_equal(out, data[idx])


def test_gather_out_after_delete(dense):
    ds, data = dense
    ds.delete([3])  # swap-last: record 39 moves to 3
    out = np.empty((3, 2, 3), dtype=np.int32)
    ds.gather(np.array([3, 0, -1]), out=out)
    np.testing.assert_array_equal(out, data[[39, 0, 38]])
    with pytest.raises(IndexError, match="out of range for store of 39 records"):
        ds.gather(np.array([39]), out=out[:1])


@pytest.mark.parametrize("bad, exc, match", [
    (lambda: [[0] * 3] * 2, TypeError, "must be a numpy ndarray"),
    (lambda: memoryview(bytearray(24)), TypeError, "must be a numpy ndarray"),
    (lambda: np.empty((2, 2, 3), np.int64), ValueError, "dtype <i8"),
    (lambda: np.empty((2, 2, 3), ">i4"), ValueError, "dtype >i4"),
    (lambda: np.empty((2, 6), np.int32), ValueError, r"shape \(2, 6\).*needs \(2, 2, 3\)"),
    (lambda: np.empty((3, 2, 3), np.int32), ValueError, "shape"),
    (lambda: np.empty((2, 2, 6), np.int32)[:, :, ::2], ValueError, "C-contiguous"),
    (lambda: np.empty((2, 3, 2), np.int32).transpose(0, 2, 1), ValueError, "C-contiguous"),
])
def test_gather_wrong_out_is_refused(dense, bad, exc, match):
    ds, _ = dense
    out = bad()
    before = bytes(memoryview(out).cast("B")) if isinstance(out, memoryview) else None
    with pytest.raises(exc, match=match):
        ds.gather([0, 1], out=out)
    if before is not None:
        assert bytes(out) == before


def test_gather_read_only_out_is_refused(dense):
    ds, _ = dense
    out = np.zeros((2, 2, 3), np.int32)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        ds.gather([0, 1], out=out)
    assert not out.any()


def test_gather_out_sharing_the_index(store_dir):
    """An out that is also the index array: the indices are read first."""
    data = np.arange(10, dtype=np.int64)[::-1].copy()
    ds = DenseStore.create(store_dir / "self", np.int64, (), codec="raw")
    ds.append(data)
    idx = np.array([0, 1, 2, 9], dtype=np.int64)
    ds.gather(idx, out=idx)
    np.testing.assert_array_equal(idx, [9, 8, 7, 0])
    ds.close()


def test_gather_on_closed_store(dense):
    ds, _ = dense
    ds.close()
    with pytest.raises(ValueError):
        ds.gather(np.array([0]), out=np.empty((1, 2, 3), np.int32))


# ------------------------------------------------------- index edge cases

@pytest.mark.parametrize("key", [np.array([40]), np.array([-41]), np.array([0, 2**40]),
                                 np.array([2**63], dtype=np.uint64),
                                 np.array([2**64 - 1], dtype=np.uint64),
                                 np.array([np.iinfo(np.int64).min]), [0, 40], 40, -41])
def test_out_of_range_names_the_index(dense, ragged, key):
    ds, _ = dense
    with pytest.raises(IndexError, match="out of range for store of 40 records"):
        ds[key]
    with pytest.raises(IndexError, match="out of range for store of 40 records"):
        ds.gather(key)
    rs, recs = ragged
    n = len(recs)
    k = np.asarray(key)
    if k.dtype.kind == "i" and k.size and int(k.max()) == 40:
        k = np.where(k == 40, n, k)
        with pytest.raises(IndexError, match=f"out of range for store of {n} records"):
            rs[k]
        with pytest.raises(IndexError, match=f"out of range for store of {n} records"):
            rs.gather_packed(k)


@pytest.mark.parametrize("dtype", ["<i8", ">i8", "<u8", "i4", "u2", "i1", "u4"])
def test_integer_index_dtypes_agree(dense, dtype):
    ds, data = dense
    idx = np.array([39, 0, 17, 17, 5], dtype=dtype)
    np.testing.assert_array_equal(ds[idx], data[idx.astype(np.int64)])
    np.testing.assert_array_equal(ds.gather(idx), data[idx.astype(np.int64)])


def test_negative_and_strided_index_arrays(dense, ragged):
    ds, data = dense
    idx = np.arange(-40, 40, dtype=np.int64)
    np.testing.assert_array_equal(ds[idx], data[idx])
    strided = np.arange(80, dtype=np.int64)[::3] - 40  # not contiguous: the slow path
    np.testing.assert_array_equal(ds[strided], data[strided])
    rs, recs = ragged
    got = rs[np.array([-1, 0, -12], dtype=np.int64)]
    for g, i in zip(got, [-1, 0, -12]):
        np.testing.assert_array_equal(g, recs[i])


@pytest.mark.parametrize("key, exc", [
    (np.array([0.0, 1.0]), TypeError), (np.array(["a"]), TypeError), (True, TypeError),
    (np.array([0, 1], dtype=np.complex64), TypeError), ((0, 1.5), TypeError),
    (np.ones(39, dtype=bool), IndexError), (np.ones((40, 1), dtype=bool), IndexError),
])
def test_wrong_index_types(dense, key, exc):
    ds, _ = dense
    with pytest.raises(exc):
        ds[key]
    with pytest.raises(exc):
        ds.gather(key, out=np.empty((2, 2, 3), np.int32))


def test_bool_mask(dense, ragged):
    ds, data = dense
    mask = np.zeros(40, dtype=bool)
    mask[[1, 5, 39]] = True
    np.testing.assert_array_equal(ds[mask], data[mask])
    out = np.empty((3, 2, 3), np.int32)
    np.testing.assert_array_equal(ds.gather(mask, out=out), data[mask])
    rs, recs = ragged
    m = np.zeros(len(recs), dtype=bool)
    m[[0, 10, 11]] = True
    b = rs.gather_packed(m)
    assert b.shapes == [(1, 1), (), (2, 3, 4)]


# ----------------------------------------------------------- result pool

def test_pooled_results_never_share_live_memory(store_dir, rng):
    data = rng.integers(0, 255, size=(64, 64, 1024), dtype=np.uint8)  # 64 KiB records
    ds = DenseStore.create(store_dir / "big", np.uint8, (64, 1024), codec="raw")
    ds.append(data)
    idx_a, idx_b = np.arange(32), np.arange(32, 64)  # 2 MiB results: pooled
    a = ds[idx_a]
    b = ds[idx_b]
    assert not np.shares_memory(a, b)
    a_view = a[::2]  # a derived view keeps a's buffer in use
    del a
    c = ds[idx_b]
    assert not np.shares_memory(c, a_view) and not np.shares_memory(c, b)
    np.testing.assert_array_equal(a_view, data[idx_a][::2])
    c[:] = 0  # writing one result never changes another or the store
    np.testing.assert_array_equal(b, data[idx_b])
    np.testing.assert_array_equal(ds[idx_b], data[idx_b])
    del a_view, b, c
    assert release_buffers() >= 2 << 20
    assert release_buffers() == 0
    ds.close()


def test_pooled_results_from_threads(store_dir, rng):
    data = rng.integers(0, 1 << 30, size=(2048, 256), dtype=np.int32)  # 1 KiB records
    ds = DenseStore.create(store_dir / "thr", np.int32, (256,), codec="raw")
    ds.append(data)
    errors = []

    def work(seed):
        r = np.random.default_rng(seed)
        for _ in range(20):
            idx = r.integers(0, 2048, size=1500)  # 1.5 MiB: pooled
            got = ds[idx]
            if not np.array_equal(got, data[idx]):
                errors.append(seed)

    ts = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert errors == []
    ds.close()


# ---------------------------------------------------------------- ragged

def test_ragged_list_made_in_one_call(ragged):
    rs, recs = ragged
    idx = np.array([11, 10, 0, 3, 3, 9])
    got = rs[idx]
    assert isinstance(got, list) and len(got) == 6
    for g, i in zip(got, idx.tolist()):
        assert g.dtype == np.float32 and g.shape == recs[i].shape
        np.testing.assert_array_equal(g, recs[i])
        assert g.flags.writeable and g.flags.c_contiguous
    assert got[0].base is got[1].base  # views of one batch buffer
    assert isinstance(rs[10], np.ndarray) and rs[10].shape == ()


def test_ragged_batches_either_side_of_the_one_call_limit(store_dir):
    """A batch below 1 MiB is gathered in one native call, a larger one in
    pooled slices: both give the records, in order, with repeats and
    negative indices, and both name an index out of range."""
    recs = [np.full(i % 5000 + 1, i, dtype=np.int64) for i in range(400)]  # up to 40 KB each
    with RaggedStore.create(store_dir / "r", np.int64) as rs:
        rs.append(recs)
        small = np.array([3, -1, 3, 0, 399], dtype=np.int64)
        big = np.arange(400)[::-1].copy()  # 8 MiB: past the one-call limit
        for idx in (small, big):
            got = rs[idx]
            assert len(got) == len(idx)
            for g, i in zip(got, idx.tolist()):
                np.testing.assert_array_equal(g, recs[i])
        for idx in (np.array([1, 400]), np.concatenate([big, [-401]])):
            with pytest.raises(IndexError, match="out of range"):
                rs[idx]


def test_gather_packed(ragged):
    rs, recs = ragged
    idx = [11, 0, 10, 4, 4]
    b = rs.gather_packed(idx)
    assert isinstance(b, RaggedBatch) and len(b) == 5
    assert b.data.dtype == np.float32 and b.data.ndim == 1
    assert b.offsets.dtype == np.int64
    assert b.shapes == [recs[i].shape for i in idx]
    np.testing.assert_array_equal(b.sizes, [recs[i].size for i in idx])
    np.testing.assert_array_equal(b.data, np.concatenate([recs[i].reshape(-1) for i in idx]))
    for j, i in enumerate(idx):
        np.testing.assert_array_equal(b[j], recs[i])
        np.testing.assert_array_equal(b.arrays()[j], recs[i])
    np.testing.assert_array_equal(b[-1], recs[4])
    with pytest.raises(IndexError, match="out of range for a batch of 5"):
        b[5]
    one = rs.gather_packed(2)
    assert len(one) == 1 and one.shapes == [recs[2].shape]
    empty = rs.gather_packed([])
    assert len(empty) == 0 and empty.data.size == 0 and empty.offsets.tolist() == [0]


def test_gather_packed_large_batch_matches_list(store_dir, rng):
    recs = [rng.integers(0, 50000, size=int(n), dtype=np.int32)
            for n in rng.integers(16, 513, size=3000)]
    rs = RaggedStore.create(store_dir / "tok", np.int32, codec="zstd")
    rs.append(recs)
    idx = rng.integers(0, 3000, size=2500)  # > 1 MiB packed: a pooled buffer
    b = rs.gather_packed(idx)
    lst = rs[idx]
    np.testing.assert_array_equal(b.data, np.concatenate(lst))
    np.testing.assert_array_equal(np.diff(b.offsets), [recs[i].size for i in idx])
    rs.close()


def test_ragged_arrays_refuse_a_bad_prefix():
    rec = np.concatenate([np.array([1, 3], dtype="<u8").view(np.uint8),
                          np.arange(3, dtype=np.float32).view(np.uint8)])
    buf = np.concatenate([rec, rec])
    bounds = np.array([0, rec.size, buf.size], dtype=np.uint64)
    got = _unpack_ragged(buf, bounds, np.float32)
    np.testing.assert_array_equal(got[1], [0, 1, 2])
    bad = buf.copy()
    bad[rec.size + 8] = 4  # second record's dim says 4 elements, payload holds 3
    with pytest.raises(CorruptStoreError, match="ragged record 1 of the batch"):
        _unpack_ragged(bad, bounds, np.float32)
    with pytest.raises(ValueError, match="bounds end at byte"):
        _unpack_ragged(buf, np.array([0, buf.size + 1], dtype=np.uint64), np.float32)
    with pytest.raises(ValueError, match="bounds decrease"):
        _unpack_ragged(buf, np.array([0, 30, 20], dtype=np.uint64), np.float32)
    with pytest.raises(TypeError, match="uint8 ndarray"):
        _unpack_ragged(buf.view(np.int8), bounds, np.float32)
    with pytest.raises(ValueError, match="disagree"):
        _zr.zrs_ragged_arrays(buf, bounds, _zr.zrs_dtype_parse("<f4"), np.dtype(np.float64))
    ro = buf.copy()
    ro.flags.writeable = False
    assert not _unpack_ragged(ro, bounds, np.float32)[0].flags.writeable
    with pytest.raises(TypeError, match="writable"):
        _zr.zrs_ragged_pack(ro, bounds, _zr.zrs_dtype_parse("<f4"))
