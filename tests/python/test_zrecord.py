"""DenseStore / RaggedStore: round trips, indexing, errors."""

import os

import numpy as np
import pytest

from conftest import ALL_DTYPES, random_array
from loaderx import _zr, errors
from loaderx.zrecord import (ClosedError, DenseStore, NotAStoreError, RaggedStore,
                             StoreBusy, open_store)


# ------------------------------------------------------------- round trips

@pytest.mark.parametrize("codec", ["raw", "zstd"])
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_dense_round_trip_every_dtype(store_dir, rng, dtype, codec):
    data = random_array(rng, dtype, (37, 3, 5))
    path = store_dir / "d"
    with DenseStore.create(path, dtype, (3, 5), codec=codec) as ds:
        assert ds.append(data[:20]) == 0
        assert ds.append(data[20:]) == 20
        assert len(ds) == 37
    with DenseStore.open(path) as ds:
        assert ds.dtype == np.dtype(dtype)
        assert ds.item_shape == (3, 5)
        assert ds.codec == codec
        assert len(ds) == 37
        got = ds[:]
        assert got.dtype == np.dtype(dtype) and got.shape == (37, 3, 5)
        np.testing.assert_array_equal(got, data)
        np.testing.assert_array_equal(ds[5], data[5])


@pytest.mark.parametrize("codec", ["raw", "zstd"])
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_ragged_round_trip_every_dtype(store_dir, rng, dtype, codec):
    shapes = [(3,), (1,), (2, 4), (), (5, 1, 2), (7,)]
    recs = [random_array(rng, dtype, s) for s in shapes]
    path = store_dir / "r"
    with RaggedStore.create(path, dtype, codec=codec) as rs:
        assert rs.append(recs[:2]) == 0
        assert rs.append(iter(recs[2:])) == 2
    with RaggedStore.open(path) as rs:
        assert rs.dtype == np.dtype(dtype) and rs.codec == codec
        assert len(rs) == len(recs)
        got = rs[:]
        assert isinstance(got, list) and len(got) == len(recs)
        for g, r in zip(got, recs):
            assert g.dtype == np.dtype(dtype)
            assert g.shape == r.shape
            np.testing.assert_array_equal(g, r)
        one = rs[3]
        assert isinstance(one, np.ndarray) and one.shape == ()


def test_scalar_dense_store(store_dir):
    labels = np.arange(10, dtype=np.int64) * 3
    with DenseStore.create(store_dir / "lab", labels.dtype, labels.shape[1:]) as ds:
        assert ds.item_shape == ()
        ds.append(labels)
        # one record of a scalar store is a numpy scalar, like a[i] on 1-D
        assert isinstance(ds[4], np.int64) and ds[4] == 12
        assert ds[[1, 2]].shape == (2,)
        np.testing.assert_array_equal(ds[:], labels)


def test_dtype_normalisation_and_refusal(store_dir):
    with DenseStore.create(store_dir / "be", ">f4", (2,)) as ds:
        assert ds.dtype.str == "<f4"
    for bad in ("U4", "datetime64[s]", "object", "V8", np.dtype([("a", "<f4")]), "float128"):
        with pytest.raises(ValueError, match="dtype"):
            DenseStore.create(store_dir / "bad", bad, (2,))
    assert not (store_dir / "bad").exists()


def test_codec_choices(store_dir):
    with pytest.raises(ValueError, match="codec"):
        DenseStore.create(store_dir / "c", np.uint8, (2,), codec="lz4")
    with pytest.raises(ValueError, match="dict_bytes"):
        RaggedStore.create(store_dir / "c", np.uint8, codec="zstd_dict")
    with pytest.raises(ValueError, match="dictionary"):
        RaggedStore.create(store_dir / "c", np.uint8, codec="zstd_dict", dict_bytes=b"x")
    with pytest.raises(ValueError, match="dict_bytes"):
        DenseStore.create(store_dir / "c", np.uint8, (2,), codec="zstd", dict_bytes=b"x")


def test_item_shape_validation(store_dir):
    with pytest.raises(ValueError, match="item_shape"):
        DenseStore.create(store_dir / "s", np.uint8, (2, 0))
    with pytest.raises(ValueError, match="item_shape"):
        DenseStore.create(store_dir / "s", np.uint8, ("a",))
    with pytest.raises(ValueError, match="item_shape"):
        DenseStore.create(store_dir / "s", np.uint8, (1,) * 33)
    with DenseStore.create(store_dir / "s", np.uint8, 4) as ds:
        assert ds.item_shape == (4,)


def test_ragged_has_no_item_shape(store_dir):
    with RaggedStore.create(store_dir / "r", np.int32) as rs:
        with pytest.raises(AttributeError):
            rs.item_shape


# ------------------------------------------------------------------ indexing

@pytest.fixture
def dense8(store_dir):
    data = np.arange(8 * 6, dtype=np.int32).reshape(8, 2, 3)
    ds = DenseStore.create(store_dir / "dense8", data.dtype, data.shape[1:], codec="raw")
    ds.append(data)
    yield ds, data
    ds.close()


@pytest.fixture
def ragged8(store_dir):
    recs = [np.full((i % 3 + 1, i + 1), i, dtype=np.float32) for i in range(8)]
    rs = RaggedStore.create(store_dir / "ragged8", np.float32)
    rs.append(recs)
    yield rs, recs
    rs.close()


KEYS = [
    (-1, "one"), (3, "one"), (np.int64(2), "one"), (np.uint8(7), "one"),
    (slice(None), "many"), (slice(1, 7, 2), "many"), (slice(None, None, -3), "many"),
    (slice(-2, None), "many"), ([0, 7, 3, 3], "many"), (np.array([5, -8, 1]), "many"),
    (np.array([4, 0], dtype=np.uint64), "many"),
    ((0, 5, 2), "many"), ((-1,), "many"),
    (np.array([True, False] * 4), "many"),
]


@pytest.mark.parametrize("key,kind", KEYS)
def test_dense_index_forms(dense8, key, kind):
    ds, data = dense8
    got = ds[key]
    want = data[np.asarray(key)] if isinstance(key, tuple) else data[key]
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("key,kind", KEYS)
def test_ragged_index_forms(ragged8, key, kind):
    rs, recs = ragged8
    got = rs[key]
    sel = np.arange(8)[np.asarray(key) if isinstance(key, tuple) else key]
    if kind == "one":
        assert isinstance(got, np.ndarray)
        np.testing.assert_array_equal(got, recs[int(sel)])
    else:
        assert isinstance(got, list) and len(got) == len(sel)
        for g, i in zip(got, sel):
            assert g.shape == recs[i].shape
            np.testing.assert_array_equal(g, recs[i])


def test_spec_record_set(dense8):
    ds, data = dense8
    assert ds[0, 5, 2].shape == (3, 2, 3)
    np.testing.assert_array_equal(ds[0, 5, 2], data[[0, 5, 2]])


def test_dense_2d_index_array(dense8):
    ds, data = dense8
    idx = np.array([[0, 1], [7, 6]])
    assert ds[idx].shape == (2, 2, 2, 3)
    np.testing.assert_array_equal(ds[idx], data[idx])


@pytest.mark.parametrize("key", [8, -9, 100, [0, 8], np.array([1, -9]), (0, 8), 2**63])
def test_out_of_range(dense8, ragged8, key):
    for store in (dense8[0], ragged8[0]):
        with pytest.raises(IndexError, match="out of range for store of 8 records"):
            store[key]


@pytest.mark.parametrize("key", [[], np.array([], dtype=np.int64), slice(5, 2), slice(8, None), ()])
def test_empty_selections(dense8, ragged8, key):
    d = dense8[0][key]
    assert isinstance(d, np.ndarray) and d.shape == (0, 2, 3) and d.dtype == np.int32
    r = ragged8[0][key]
    assert r == []


def test_empty_mask(dense8):
    ds, _ = dense8
    assert ds[np.zeros(8, dtype=bool)].shape == (0, 2, 3)


@pytest.mark.parametrize("n", [0, 7, 9])
def test_bool_mask_wrong_length(dense8, ragged8, n):
    for store in (dense8[0], ragged8[0]):
        with pytest.raises(IndexError, match="mask"):
            store[np.ones(n, dtype=bool)]


def test_bad_index_types(dense8):
    ds, _ = dense8
    for key in (1.5, "a", np.array([1.0]), True, (1, slice(None))):
        with pytest.raises(TypeError):
            ds[key]


# --------------------------------------------------------- append refusals

def test_dense_append_wrong_dtype_or_shape(dense8):
    ds, data = dense8
    before = ds[:]
    with pytest.raises(ValueError, match=r"expected dtype <i4 .*got <i8"):
        ds.append(data.astype(np.int64))
    with pytest.raises(ValueError, match=r"expected dtype <i4 .*got <f4"):
        ds.append(data.astype(np.float32))
    with pytest.raises(ValueError, match=r"expected dtype <i4 .*got >i8"):
        ds.append(data.astype(">i8"))  # the other byte order of another type
    with pytest.raises(ValueError, match=r"expected shape \(B, 2, 3\).*got \(8, 3, 2\)"):
        ds.append(data.reshape(8, 3, 2))
    with pytest.raises(ValueError, match=r"expected shape \(B, 2, 3\).*got \(2, 3\)"):
        ds.append(data[0])
    assert len(ds) == 8
    np.testing.assert_array_equal(ds[:], before)


def test_dense_append_noncontiguous_and_empty(dense8):
    ds, data = dense8
    src = np.arange(4 * 3 * 2, dtype=np.int32).reshape(4, 3, 2).transpose(0, 2, 1)
    assert not src.flags.c_contiguous
    assert ds.append(src) == 8
    np.testing.assert_array_equal(ds[8:], src)
    assert ds.append(np.empty((0, 2, 3), np.int32)) == 12
    assert len(ds) == 12
    assert ds.append(data[::-1]) == 12
    np.testing.assert_array_equal(ds[12:], data[::-1])


def test_ragged_append_refusals(ragged8):
    rs, recs = ragged8
    good = np.ones(3, np.float32)
    with pytest.raises(ValueError, match=r"record 1: expected dtype <f4 .*got <f8"):
        rs.append([good, np.ones(3)])
    with pytest.raises(ValueError, match="dims"):
        rs.append([np.ones((1,) * 33, np.float32)])
    assert len(rs) == 8
    for g, r in zip(rs[:], recs):
        np.testing.assert_array_equal(g, r)
    assert rs.append([]) == 8


def test_ragged_append_ndarray_rows(store_dir):
    rows = np.arange(12, dtype=np.uint8).reshape(4, 3)
    with RaggedStore.create(store_dir / "rows", np.uint8) as rs:
        rs.append(rows)
        assert [r.shape for r in rs[:]] == [(3,)] * 4


def test_ragged_append_bare_1d_ndarray_is_ambiguous(store_dir):
    with RaggedStore.create(store_dir / "r", np.int32) as rs:
        with pytest.raises(TypeError, match=r"append\(\[arr\]\).*append\(list\(arr\)\)"):
            rs.append(np.arange(4, dtype=np.int32))
        with pytest.raises(TypeError, match="0-D"):
            rs.append(np.array(7, dtype=np.int32))
        assert len(rs) == 0
        # the two unambiguous spellings
        assert rs.append([np.arange(4, dtype=np.int32)]) == 0
        assert rs.append(list(np.arange(4, dtype=np.int32))) == 1
        assert [r.shape for r in rs[:]] == [(4,), (), (), (), ()]
        np.testing.assert_array_equal(rs[0], np.arange(4))
        assert int(rs[4]) == 3
        # >= 2-D still means one record per row
        assert rs.append(np.arange(6, dtype=np.int32).reshape(2, 3)) == 5
        assert [r.shape for r in rs[5:]] == [(3,), (3,)]


@pytest.mark.parametrize("kind", ["dense", "ragged"])
def test_big_endian_data_appends(store_dir, kind):
    # The spec's create(p, data.dtype, data.shape[1:]); append(data) pattern
    # on big-endian data (e.g. a parsed IDX file): stores are little-endian,
    # the data is converted on append.
    data = np.arange(24, dtype=">i4").reshape(4, 2, 3)
    if kind == "dense":
        st = DenseStore.create(store_dir / "d", data.dtype, data.shape[1:])
        assert st.dtype == np.dtype("<i4")
        assert st.append(data) == 0
        assert st.append(data[:, :, ::-1]) == 4  # non-contiguous, other order
        np.testing.assert_array_equal(st[:4], data)
        np.testing.assert_array_equal(st[4:], data[:, :, ::-1])
    else:
        st = RaggedStore.create(store_dir / "r", data.dtype)
        assert st.dtype == np.dtype("<i4")
        assert st.append(data) == 0
        assert st.append([data[0], data[1].astype("<i4")]) == 4
        for g, w in zip(st[:], list(data) + [data[0], data[1]]):
            assert g.dtype == np.dtype("<i4")
            np.testing.assert_array_equal(g, w)
    with st:
        # a genuinely different type stays refused, in either byte order
        bad = data.astype(">f4") if kind == "dense" else [data[0].astype(">f4")]
        with pytest.raises(ValueError, match=r"expected dtype <i4 .*got >f4"):
            st.append(bad)
        assert len(st) == (8 if kind == "dense" else 6)


def test_create_dtype_none_is_refused(store_dir):
    with pytest.raises(TypeError, match="dtype is required, got None"):
        DenseStore.create(store_dir / "d", None, ())
    with pytest.raises(TypeError, match="dtype is required, got None"):
        RaggedStore.create(store_dir / "r", None)
    assert not (store_dir / "d").exists() and not (store_dir / "r").exists()


# ---------------------------------------------------------------- lifecycle

def test_create_existing_path(store_dir):
    DenseStore.create(store_dir / "x", np.uint8, (1,)).close()
    with pytest.raises(FileExistsError):
        DenseStore.create(store_dir / "x", np.uint8, (1,))
    with pytest.raises(FileExistsError):
        RaggedStore.create(store_dir / "x", np.uint8)
    (store_dir / "plainfile").write_bytes(b"hello")
    with pytest.raises(FileExistsError):
        RaggedStore.create(store_dir / "plainfile", np.uint8)


def test_open_non_store(store_dir):
    (store_dir / "plain").mkdir()
    (store_dir / "file").write_bytes(b"not a store")
    for p in ("plain", "file", "missing"):
        with pytest.raises(NotAStoreError) as ei:
            DenseStore.open(store_dir / p)
        assert isinstance(ei.value, ValueError)
        assert ei.value.status == _zr.ZR_ENOTSTORE


def test_open_wrong_kind(store_dir):
    RaggedStore.create(store_dir / "r", np.uint8).close()
    with pytest.raises(ValueError, match="RaggedStore.open"):
        DenseStore.open(store_dir / "r")
    # the refused open released its lock
    with RaggedStore.open(store_dir / "r") as rs:
        assert len(rs) == 0


def test_open_store_picks_kind(store_dir):
    DenseStore.create(store_dir / "d", np.uint8, (1,)).close()
    RaggedStore.create(store_dir / "r", np.uint8).close()
    with open_store(store_dir / "d") as d, open_store(str(store_dir / "r")) as r:
        assert isinstance(d, DenseStore) and isinstance(r, RaggedStore)


def test_second_open_is_busy(store_dir):
    ds = DenseStore.create(store_dir / "b", np.uint8, (1,))
    with pytest.raises(StoreBusy) as ei:
        DenseStore.open(store_dir / "b")
    assert isinstance(ei.value, BlockingIOError)
    ds.close()
    DenseStore.open(store_dir / "b").close()


def test_use_after_close(dense8, ragged8):
    for store in (dense8[0], ragged8[0]):
        store.close()
        store.close()  # idempotent
        assert store.closed
        for op in (len, lambda s: s[0], lambda s: s[:], lambda s: s.append([])):
            with pytest.raises(ValueError, match="closed") as ei:
                op(store)
            assert isinstance(ei.value, ClosedError)
        assert "closed" in repr(store)


def test_repr_and_info(dense8, ragged8):
    ds, _ = dense8
    assert "DenseStore(" in repr(ds) and "8 records" in repr(ds)
    info = ds.info()
    assert info["kind"] == "dense" and info["records"] == 8 and info["item_shape"] == (2, 3)
    assert ds.nbytes == 8 * 6 * 4
    assert ragged8[0].info()["kind"] == "ragged"
    assert os.fspath(ds.path).endswith("dense8")


def test_views_share_one_buffer(ragged8):
    rs, _ = ragged8
    a, b = rs[[1, 2]]
    assert a.base is not None and a.base is b.base


# ---------------------------------------------------------------- errors

def test_status_codes_match_native():
    # The C table (zrerror.h) walked from ZR_OK down to ZR_STATUS_LAST: each
    # status has its constant in loaderx.errors with the same value and
    # name, and (below 0) its exception class; no constant of
    # loaderx.errors is outside the table.
    c_names = {}
    for code in range(0, _zr.ZR_STATUS_LAST - 1, -1):
        name = _zr.zr_status_name(code)
        assert name, code
        assert _zr.zr_strerror(code) not in ("", "unknown error"), code
        c_names["ZR_" + name] = code
        assert getattr(errors, "ZR_" + name) == code == getattr(_zr, "ZR_" + name), name
        if code < 0:
            assert code in errors._CLASSES, name
    assert len(c_names) == _zr.ZR_STATUS_COUNT
    assert _zr.zr_status_name(_zr.ZR_STATUS_LAST - 1) is None
    py_names = {k: v for k, v in vars(errors).items() if k.startswith("ZR_")}
    assert py_names == c_names
    assert set(errors._CLASSES) == {c for c in c_names.values() if c < 0}


def test_from_status_mapping():
    table = {
        _zr.ZR_ERANGE: IndexError, _zr.ZR_EINVAL: ValueError,
        _zr.ZR_EEXIST: FileExistsError, _zr.ZR_ENOTSTORE: errors.NotAStoreError,
        _zr.ZR_EBUSY: errors.StoreBusy, _zr.ZR_EIO: OSError,
        _zr.ZR_ECORRUPT: errors.CorruptStoreError, _zr.ZR_ENOMEM: MemoryError,
        _zr.ZR_ESTATE: RuntimeError, _zr.ZR_ECLOSED: ValueError,
        _zr.ZR_EINTR: KeyboardInterrupt,
    }
    for code, cls in table.items():
        exc = errors.from_status(code, "detail")
        assert isinstance(exc, cls) and exc.status == code
    assert "closed" in str(errors.from_status(_zr.ZR_ECLOSED, "loader"))
