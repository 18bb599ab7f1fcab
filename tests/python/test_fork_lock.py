"""A forked child that never touches a store must not keep the parent's
store lock alive: the fork hook closes the child's inherited descriptors
(zrs_forget_after_fork), while the child can still reopen read-only stores
on first use and gets a clear error for writable ones."""

import os
import sys

import numpy as np
import pytest

from loaderx.errors import StoreBusy
from loaderx.zrecord import DenseStore, RaggedStore

pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or sys.platform == "win32",
                                reason="needs fork()")


def _fork_waiting_child():
    """Fork a child that touches no store: it reports that it runs (so the
    fork hooks have run), then blocks until the returned write end is
    closed. Returns (pid, wfd)."""
    r, w = os.pipe()
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        try:
            os.close(w)
            os.close(ready_r)
            os.write(ready_w, b"r")
            os.read(r, 1)
        finally:
            os._exit(0)
    os.close(r)
    os.close(ready_w)
    assert os.read(ready_r, 1) == b"r"
    os.close(ready_r)
    return pid, w


def _reap(pid, w):
    os.close(w)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_parent_reopens_writable_while_idle_child_lives(tmp_path):
    path = str(tmp_path / "r")
    with RaggedStore.create(path, "int32") as st:
        st.append([np.arange(3, dtype=np.int32)])
    st = RaggedStore.open(path)  # writable: exclusive lock
    pid, w = _fork_waiting_child()
    try:
        st.close()
        again = RaggedStore.open(path)  # StoreBusy before the fix
        again.append([np.arange(2, dtype=np.int32)])
        assert len(again) == 2
        again.close()
        # Read-only handles too: the child holds no shared lock either.
        with RaggedStore.open(path) as again:
            assert len(again) == 2
    finally:
        _reap(pid, w)


def test_readonly_store_still_works_in_child(tmp_path):
    # The child's inherited handle is abandoned, yet the store reopens
    # itself read-only on first use there; a writable one raises clearly.
    ro_path, rw_path = str(tmp_path / "ro"), str(tmp_path / "rw")
    with DenseStore.create(ro_path, "float32", (2,)) as st:
        st.append(np.arange(8, dtype=np.float32).reshape(4, 2))
    with DenseStore.create(rw_path, "float32", (2,)) as st:
        st.append(np.arange(8, dtype=np.float32).reshape(4, 2))
    ro = DenseStore.open(ro_path, readonly=True)
    rw = DenseStore.open(rw_path)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(r)
        code = 1
        try:
            ok = bool((ro[1] == np.array([2, 3], np.float32)).all())
            try:
                rw[0]
                writable = "no error"
            except RuntimeError as exc:
                writable = "cannot cross a fork" in str(exc)
            code = 0 if ok and writable is True else 2
        finally:
            os._exit(code)
    os.close(w)
    _, status = os.waitpid(pid, 0)
    os.close(r)
    assert os.waitstatus_to_exitcode(status) == 0
    # The parent's handles are untouched by the child.
    assert (ro[3] == np.array([6, 7], np.float32)).all()
    rw.append(np.zeros((1, 2), np.float32))
    assert len(rw) == 5
    with pytest.raises(StoreBusy):
        DenseStore.open(rw_path)
    ro.close()
    rw.close()
