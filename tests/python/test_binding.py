"""The private _zr module: typemaps, errors, zero-copy, GIL release."""

import sys
import threading

import numpy as np
import pytest

from loaderx import _zr, errors
from loaderx.zrecord import DenseStore


@pytest.fixture
def raw_store(store_dir):
    ds = DenseStore.create(store_dir / "raw", np.uint32, (4,), codec="raw")
    ds.append(np.arange(40, dtype=np.uint32).reshape(10, 4))
    yield ds
    ds.close()


def test_buffer_typemap_errors(raw_store):
    h = raw_store._handle()
    idx = np.arange(2, dtype=np.int64)
    with pytest.raises(TypeError, match="'dst'"):
        _zr.zrs_gather_dense(h, idx, [0] * 32)
    ro = np.empty((2, 4), np.uint32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="'dst'.*writable"):
        _zr.zrs_gather_dense(h, idx, ro)
    with pytest.raises(ValueError, match="'dst'"):
        _zr.zrs_gather_dense(h, idx, np.empty((4, 4), np.uint32)[:, :2])
    with pytest.raises(ValueError, match="'index'.*8-byte"):
        _zr.zrs_gather_dense(h, idx.astype(np.int32), np.empty((2, 4), np.uint32))
    with pytest.raises(ValueError, match="'index'.*8-byte"):
        _zr.zrs_gather_dense(h, idx.astype(np.float64), np.empty((2, 4), np.uint32))
    with pytest.raises(TypeError, match="'data'"):
        _zr.zrs_append_dense(h, 5, 1)
    # the C layer checks sizes: a too-small destination is a ValueError
    with pytest.raises(ValueError):
        _zr.zrs_gather_dense(h, idx, np.empty(4, np.uint32))
    with pytest.raises(ValueError):
        _zr.zrs_append_dense(h, np.zeros(3, np.uint8), 1)
    assert len(raw_store) == 10


def test_native_errors_carry_detail(raw_store):
    h = raw_store._handle()
    with pytest.raises(IndexError, match="10") as ei:
        _zr.zrs_gather_dense(h, np.array([10], np.int64), np.empty(4, np.uint32))
    assert ei.value.status == _zr.ZR_ERANGE
    out = np.empty((2, 4), np.uint32)
    _zr.zrs_gather_dense(h, np.array([-1, 0], np.int64), out)   # bytes/memoryview-free path
    np.testing.assert_array_equal(out, [[36, 37, 38, 39], [0, 1, 2, 3]])
    np.testing.assert_array_equal(_zr.zrs_resolve_index(h, np.array([-1, 3], np.int64)), [9, 3])


def test_ragged_checked_wrappers(store_dir):
    from loaderx.zrecord import RaggedStore
    with RaggedStore.create(store_dir / "r", np.uint8) as rs:
        h = rs._handle()
        rec = np.array([1, 3, 7, 8, 9], dtype="<u8").view(np.uint8)[:8 + 8 + 3]
        packed = np.concatenate([np.array([1, 3], "<u8").view(np.uint8),
                                 np.array([7, 8, 9], np.uint8)])
        with pytest.raises(ValueError, match="bounds"):
            _zr.zrs_append_ragged(h, packed, np.array([0, 100], np.uint64))
        with pytest.raises(ValueError, match="bounds"):
            _zr.zrs_append_ragged(h, packed, np.array([0], np.uint64))
        assert _zr.zrs_append_ragged(h, packed, np.array([0, packed.size], np.uint64)) == 0
        shape, off = _zr.zrs_ragged_decode(packed, _zr.ZRS_UINT8)
        assert shape == (3,) and off == 16
        idx = np.array([0], np.int64)
        sizes = _zr.zrs_ragged_sizes(h, idx)
        assert sizes.tolist() == [19]
        buf = np.empty(19, np.uint8)
        with pytest.raises(ValueError, match="bounds"):
            _zr.zrs_gather_ragged(h, idx, buf, np.array([0], np.uint64))
        _zr.zrs_gather_ragged(h, idx, buf, np.array([0, 19], np.uint64))
        np.testing.assert_array_equal(buf, packed)
        del rec


def test_sampler_native_messages():
    out = np.empty(4, np.int64)
    with pytest.raises(ValueError, match="dst"):
        _zr.zsm_indices({"length": 10, "batch_size": 8}, 0, out)
    # the sampler's own detail: the parameter and its value
    with pytest.raises(ValueError, match=r"zsm_validate: cyclic mode needs length >= batch_size \* "
                       r"world_size, got length 2 < 4"):
        _zr.zsm_indices({"length": 2, "batch_size": 4, "mode": _zr.ZSM_CYCLIC}, 0, out)
    with pytest.raises(KeyError):
        _zr.zsm_indices({"batch_size": 4}, 0, out)
    assert _zr.zsm_mode_parse("IID") == _zr.ZSM_IID
    with pytest.raises(ValueError, match="unknown mode \"nope\""):
        _zr.zsm_mode_parse("nope")


def test_loader_zero_copy_buffers(raw_store):
    h = raw_store._handle()
    loader = _zr.zld_create([h], {"batch_size": 3, "mode": _zr.ZSM_SEQUENTIAL,
                                  "num_workers": 1})
    try:
        step, indices, parts, valid = _zr.zld_next_arrays(loader, 1, None)
        assert valid == len(indices)  # every row real (even_batches pads, masked)
        assert step == 0 and indices.tolist() == [0, 1, 2]
        data, bounds = parts[0]
        assert bounds is None and data.dtype == np.uint8 and data.nbytes == 3 * 16
        assert data.flags.owndata is False and data.base is not None  # the capsule
        np.testing.assert_array_equal(data.view(np.uint32).reshape(3, 4),
                                      np.arange(12).reshape(3, 4))
        # the lower-level batch API
        batch = _zr.zld_next(loader)
        assert _zr.zld_batch_step(batch) == 1 and _zr.zld_batch_count(batch) == 3
        assert _zr.zld_batch_indices(batch).tolist() == [3, 4, 5]
        arr = _zr.zld_batch_detach(batch, 0)
        assert _zr.zld_batch_detach(batch, 0) is None
        _zr.zld_batch_free(batch)
        np.testing.assert_array_equal(arr.view(np.uint32)[:4], [12, 13, 14, 15])
    finally:
        _zr.zld_close(loader)
    with pytest.raises(TypeError, match="streams"):
        _zr.zld_create([object()], {})


def test_gil_released_during_gather(store_dir):
    """While one thread is inside a native gather, another Python thread
    keeps running. With a huge switch interval the interpreter never
    preempts the gathering thread, so the watcher can only observe
    `in_call` if the gather released the GIL."""
    n, item = 2048, (64, 64)
    with DenseStore.create(store_dir / "big", np.float32, item, codec="zstd") as ds:
        ds.append(np.ones((n,) + item, np.float32))
        h = ds._handle()
        idx = np.arange(n, dtype=np.int64)
        out = np.empty((n,) + item, np.float32)
        state = {"in_call": False, "done": False, "seen": 0}
        import time

        def watcher():
            while not state["done"]:
                if state["in_call"]:
                    state["seen"] += 1
                time.sleep(0)

        old = sys.getswitchinterval()
        sys.setswitchinterval(1000.0)
        t = threading.Thread(target=watcher)
        try:
            t.start()
            for _ in range(20):
                state["in_call"] = True
                _zr.zrs_gather_dense(h, idx, out)
                state["in_call"] = False
                if state["seen"]:
                    break
        finally:
            state["in_call"] = False
            state["done"] = True
            sys.setswitchinterval(old)
            t.join()
        assert out[-1, -1, -1] == 1.0
        assert state["seen"] > 0


def test_errors_module_is_pure_python():
    assert errors.from_status.__module__ == "loaderx.errors"
