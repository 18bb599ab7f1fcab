"""Failure paths seen from Python: paths with an embedded NUL are refused
(not cut short), OS errors carry errno and their OSError subclass, a
5-byte hostile store.zr is "not a store" (not MemoryError), store files
that are symlinks or FIFOs are refused without hanging, and a read-only
open never writes."""

import errno
import os

import numpy as np
import pytest

from loaderx import errors
from loaderx.zrecord import DenseStore, RaggedStore


def test_nul_in_path_refused(tmp_path):
    base = str(tmp_path / "new")
    with pytest.raises(ValueError, match="embedded NUL"):
        DenseStore.create(base + "\0evil", "<f4", (2,))
    assert not os.path.exists(base)
    with pytest.raises(ValueError, match="embedded NUL"):
        RaggedStore.create(base + "\0evil", "<i4")
    DenseStore.create(base, "<f4", (2,)).close()
    for ro in (False, True):
        with pytest.raises(ValueError, match="embedded NUL"):
            DenseStore.open(base + "\0/x", readonly=ro)


def test_oserror_carries_errno(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_bytes(b"x")
    with pytest.raises(NotADirectoryError) as ei:
        DenseStore.create(str(blocker / "sub" / "s"), "<f4", (2,))
    assert ei.value.errno == errno.ENOTDIR
    assert isinstance(ei.value, OSError)
    assert "create" in str(ei.value)


def test_from_status_maps_errno():
    e = errors.from_status(errors.ZR_EIO, "open: cannot open x", errno.EACCES)
    assert isinstance(e, PermissionError) and e.errno == errno.EACCES
    e = errors.from_status(errors.ZR_EIO, "open: cannot open x", errno.ENOENT)
    assert isinstance(e, FileNotFoundError)
    e = errors.from_status(errors.ZR_EIO, "sync: fsync failed", errno.ENOSPC)
    assert type(e) is OSError and e.errno == errno.ENOSPC
    assert errors.from_status(errors.ZR_EIO, "x").errno is None


def test_hostile_identity_is_not_a_store(tmp_path):
    p = str(tmp_path / "s")
    DenseStore.create(p, "<f4", (2,)).close()
    with open(os.path.join(p, "store.zr"), "wb") as f:
        f.write(b"\xdf\xff\xff\xff\xff")
    with pytest.raises(errors.NotAStoreError, match="msgpack"):
        DenseStore.open(p)


def test_symlinked_chunk_and_fifo_refused(tmp_path):
    p = str(tmp_path / "s")
    s = DenseStore.create(p, "<f4", (2,))
    s.append(np.ones((3, 2), dtype="<f4"))
    s.close()
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    chunk = os.path.join(p, "0.chunk")
    os.rename(chunk, chunk + ".real")
    os.symlink(victim, chunk)
    with pytest.raises(errors.NotAStoreError, match="symbolic link"):
        DenseStore.open(p)
    assert victim.read_bytes() == b"precious"
    os.unlink(chunk)
    os.mkfifo(chunk)
    with pytest.raises(errors.NotAStoreError, match="not a regular file"):
        DenseStore.open(p, readonly=True)
    os.unlink(chunk)
    os.rename(chunk + ".real", chunk)
    with DenseStore.open(p) as s:
        assert len(s) == 3


def test_recover_after_lost_unsynced_appends(tmp_path):
    p = str(tmp_path / "s")
    s = DenseStore.create(p, "<f4", (2,))
    data = np.arange(30, dtype="<f4").reshape(15, 2)
    s.append(data[:10])
    s.sync()
    s.append(data[10:])
    s.close()
    # A power loss kept meta.zr (15 records) but only 12 table entries.
    with open(os.path.join(p, "0.loc"), "r+b") as f:
        f.truncate(12 * 16)
    with pytest.raises(errors.NotAStoreError, match="recovery"):
        DenseStore.open(p)
    with pytest.raises(ValueError):
        DenseStore.open(p, readonly=True, recover=True)
    with DenseStore.open(p, recover=True) as s:
        assert len(s) == 12
        np.testing.assert_array_equal(s[np.arange(12)], data[:12])
        s.append(data[12:])
    with DenseStore.open(p, readonly=True) as s:
        assert len(s) == 15


def test_non_utf8_paths_create_and_open(tmp_path):
    """A directory name that is not UTF-8 (as zr or any C program can make
    it): created from bytes, listed back by os.listdir as a surrogate-escaped
    str, opened through that str, a bytes path and a PathLike: the same
    store each time, at exactly those bytes on disk."""
    raw = os.fsencode(tmp_path) + b"/caf\xe9-\xff.zr"
    s = DenseStore.create(raw, "<i4", (3,), codec="raw")
    s.append(np.arange(6, dtype="<i4").reshape(2, 3))
    s.sync()
    s.close()
    assert os.path.isdir(raw)
    assert b"caf\xe9-\xff.zr" in os.listdir(os.fsencode(tmp_path))
    (listed,) = [n for n in os.listdir(tmp_path) if n.startswith("caf")]
    for p in (os.path.join(str(tmp_path), listed), raw, tmp_path / listed):
        with DenseStore.open(p, readonly=True) as r:
            assert len(r) == 2
            assert r[1].tolist() == [3, 4, 5]
    with pytest.raises(TypeError):
        DenseStore.open(12345)
