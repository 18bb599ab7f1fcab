"""The zr command line: `--help` is never taken for a path, exit codes
(0 ok, 1 damaged records, 2 usage, 3 store could not be opened) for
`zr verify` and `zr info`, the raw-codec note, and bytes from a damaged
store.zr escaped (\\xNN) in messages, in the CLI and in Python alike."""

import os
import shutil
import struct
import subprocess
import sys

import numpy as np
import pytest

from loaderx.errors import NotAStoreError
from loaderx.zrecord import DenseStore

ZR = shutil.which("zr")
needs_zr = pytest.mark.skipif(ZR is None, reason="the zr tool is not on PATH (install first)")


def zr(*args):
    return subprocess.run([ZR, *args], capture_output=True, timeout=120)


def _store(path, codec="raw", n=10):
    with DenseStore.create(str(path), "uint8", (16,), codec=codec) as st:
        st.append(np.arange(n * 16, dtype=np.uint8).reshape(n, 16))
    return str(path)


@needs_zr
@pytest.mark.parametrize("cmd", ["verify", "info"])
def test_help_and_usage_codes(cmd):
    for flag in ("--help", "-h"):
        res = zr(cmd, flag)
        assert res.returncode == 0
        out = res.stdout.decode()
        assert out.startswith(f"usage: zr {cmd}")
        assert "3    cannot open, busy, or already exists" in out and "Example:" in out
        assert b"cannot open" not in res.stderr
    assert zr(cmd).returncode == 2
    assert zr(cmd, "--no-such-option", "x").returncode == 2


@needs_zr
def test_verify_exit_codes(tmp_path):
    good = _store(tmp_path / "good", codec="zstd")
    res = zr("verify", good)
    assert res.returncode == 0, res.stderr
    assert b"0 bad (ok)" in res.stdout
    assert b"raw codec" not in res.stdout

    raw = _store(tmp_path / "raw", codec="raw")
    res = zr("verify", raw)
    assert res.returncode == 0
    assert (b"raw codec: payloads carry no checksum; only table and extents were checked"
            in res.stdout)

    # Damage one record-table entry: stored size 17 for a 16-byte record.
    with open(os.path.join(raw, "0.loc"), "r+b") as f:
        f.seek(3 * 16 + 4)
        f.write(struct.pack("<I", 17))
    res = zr("verify", raw)
    assert res.returncode == 1
    assert b"bad record 3" in res.stdout
    assert b"0.loc entry 3" in res.stdout

    missing = str(tmp_path / "missing")
    assert zr("verify", missing).returncode == 3
    assert zr("info", missing).returncode == 3
    # The highest code over all stores; `--` ends the options.
    assert zr("verify", good, raw, missing).returncode == 3
    assert zr("verify", "--", good, raw).returncode == 1
    assert zr("info", "--", good).returncode == 0

    # Beside a live writer both work (they open read-only).
    with DenseStore.open(good):
        assert zr("verify", good).returncode == 0
        assert zr("info", good).returncode == 0


def _bad_identity(path):
    # A store.zr map with an unexpected key of non-UTF-8, non-printable bytes.
    with open(os.path.join(path, "store.zr"), "wb") as f:
        f.write(bytes([0x81, 0xa4, 0xff, 0x01, ord("k"), 0xe9, 0x01]))


def test_identity_bytes_escaped_in_python(tmp_path):
    path = _store(tmp_path / "s")
    _bad_identity(path)
    with pytest.raises(NotAStoreError) as ei:
        DenseStore.open(path)
    msg = str(ei.value)
    assert "unexpected key '\\xff\\x01k\\xe9'" in msg
    assert "\ufffd" not in msg and msg.isprintable()


@needs_zr
def test_identity_bytes_escaped_in_cli(tmp_path):
    path = _store(tmp_path / "s")
    _bad_identity(path)
    res = zr("verify", path)
    assert res.returncode == 3
    err = res.stderr
    assert b"\\xff\\x01k\\xe9" in err
    assert all(0x20 <= c < 0x7f or c == 0x0a for c in err)


@needs_zr
@pytest.mark.parametrize("codec", ["raw", "zstd"])
@pytest.mark.parametrize("dtype,shape", [("uint8", (5, 3, 4)), ("<f4", (7, 2)), ("<i8", (6,))])
def test_ingest_npy_round_trip(tmp_path, codec, dtype, shape):
    arr = (np.arange(int(np.prod(shape))) % 97).astype(dtype).reshape(shape)
    np.save(tmp_path / "a.npy", arr)
    res = zr("ingest", str(tmp_path / "a.npy"), str(tmp_path / "st"), "--codec", codec)
    assert res.returncode == 0, res.stderr.decode()
    with DenseStore.open(str(tmp_path / "st")) as st:
        assert st.codec == codec and st.dtype == arr.dtype and st.item_shape == shape[1:]
        np.testing.assert_array_equal(st[:], arr)


@needs_zr
@pytest.mark.parametrize("dtype", [">i4", ">f8", ">c8", "<u2", "|b1"])
@pytest.mark.parametrize("fortran", [False, True])
def test_ingest_npy_any_byte_and_memory_order(tmp_path, dtype, fortran):
    arr = (np.arange(2 * 3 * 5) % 7).astype(dtype).reshape(2, 3, 5)
    if fortran:
        arr = np.asfortranarray(arr)
    np.save(tmp_path / "a.npy", arr)
    res = zr("ingest", str(tmp_path / "a.npy"), str(tmp_path / "st"))
    assert res.returncode == 0, res.stderr.decode()
    with DenseStore.open(str(tmp_path / "st")) as st:
        assert st.dtype == arr.dtype.newbyteorder("<") or st.dtype == arr.dtype
        np.testing.assert_array_equal(st[:], arr)


@needs_zr
def test_ingest_refuses_what_it_cannot_store(tmp_path):
    np.save(tmp_path / "s.npy", np.float32(1.0))
    np.save(tmp_path / "o.npy", np.array(["a", "b"]))
    (tmp_path / "junk.npy").write_bytes(b"not a numpy file at all")
    for name, words in (("s", "0-d"), ("o", "not a store dtype"), ("junk", "npy")):
        res = zr("ingest", str(tmp_path / f"{name}.npy"), str(tmp_path / f"out_{name}"))
        assert res.returncode == 1, name
        assert words.lower() in res.stderr.decode().lower(), (name, res.stderr.decode())
        assert f"{name}.npy" in res.stderr.decode()
    res = zr("ingest", str(tmp_path / "missing.npy"), str(tmp_path / "o"))
    assert res.returncode == 3 and b"missing.npy" in res.stderr
    _store(tmp_path / "exists")
    np.save(tmp_path / "ok.npy", np.ones((2, 16), np.uint8))
    res = zr("ingest", str(tmp_path / "ok.npy"), str(tmp_path / "exists"))
    assert res.returncode == 3 and b"exists" in res.stderr


@needs_zr
def test_console_script_starts_without_importing_the_package():
    """The `zr` pip installs is a console script; its launcher must find the
    native tool without importing loaderx (whose __init__ loads numpy and
    the extension), so that it starts fast and a Ctrl-C in its start-up
    window is short. A prefix install's `zr` is the native tool itself."""
    with open(ZR, "rb") as f:
        if f.read(2) != b"#!":
            pytest.skip("zr on PATH is the native tool, not a console script")
    probe = ("import sys, _loaderx_zr\n"
             "tool = _loaderx_zr._tool()\n"
             "print(tool)\n"
             "print('numpy' in sys.modules, 'loaderx' in sys.modules)\n")
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0, res.stderr
    tool, loaded = res.stdout.splitlines()
    assert os.path.basename(tool) == "zr" and os.access(tool, os.X_OK), tool
    assert loaded == "False False"
    assert zr("--version").returncode == 0
