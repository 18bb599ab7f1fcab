"""zr mrec: the CLI convention (--help, exit codes, errors naming the file,
--json), read-only media (--nolock) and damaged records in info."""
import json
import os
import shutil
import stat
import subprocess
import tempfile

import lmdb
import numpy as np
import pytest

from loaderx import mrec
from loaderx.errors import CorruptStoreError, NotAStoreError

ZR = os.environ.get("ZR_BIN") or shutil.which("zr")
needs_zr = pytest.mark.skipif(ZR is None, reason="zr not installed")
K = lambda p, n: p + int(n).to_bytes(8, "big")  # noqa: E731


def run_zr(*args, zr=None, **kw):
    return subprocess.run([zr or ZR, "mrec", *map(str, args)], capture_output=True, text=True,
                          timeout=120, **kw)


def _native_zr():
    """The native zr binary: the one inside the package when pip installed
    it (the `zr` on PATH is then a console script whose interpreter may live
    where another user cannot reach), else the one on PATH."""
    cand = os.path.join(os.path.dirname(mrec.__file__), "zr")
    return cand if os.access(cand, os.X_OK) else ZR


def small(path):
    with mrec.Writer(path, units={"length": "angstrom"}, schema={"meta": {"pe": {"dtype": "f64"}}}) as w:
        w.add_record(meta={"k": 0}, system={"blocks": {"atoms": {"element": ["O", "H"]}}},
                     frames=[{"blocks": {"atoms": {"x": np.array([0.0, 1.0])}}, "meta": {"pe": -1.0}},
                             {"blocks": {"atoms": {"x": np.array([0.5, 1.0])}}, "meta": {"pe": -2.0}}])
        w.set_index({"label": ["a"]})
    return path


def poke(path, key, value):
    env = lmdb.open(str(path), subdir=False, map_size=1 << 26)
    with env.begin(write=True) as txn:
        txn.put(key, value)
    env.close()


@needs_zr
@pytest.mark.parametrize("args", [("--help",), ("-h",), ("validate", "--help"), ("info", "-h"), ("dump", "--help")])
def test_help_exits_0_with_usage_options_example(args):
    res = run_zr(*args)
    assert res.returncode == 0 and res.stderr == ""
    assert "usage: zr mrec" in res.stdout and "example" in res.stdout and "--nolock" in res.stdout


@needs_zr
def test_usage_errors_exit_2(tmp_path):
    for args in [(), ("frobnicate",), ("info",), ("info", "--bogus", "x"), ("validate", "a", "b"), ("dump", "f")]:
        res = run_zr(*args)
        assert res.returncode == 2, args
        assert "usage: zr mrec" in res.stderr and res.stdout == ""


@needs_zr
def test_cannot_open_exits_3_naming_the_file(tmp_path):
    res = run_zr("info", tmp_path / "missing.mrec.lmdb")
    assert res.returncode == 3
    assert res.stderr.strip() == f"zr mrec info: open: {tmp_path / 'missing.mrec.lmdb'}: cannot open the file (no such file)"
    # a directory: named as one, not an LMDB read error
    for cmd in ("info", "validate", "dump"):
        res = run_zr(cmd, tmp_path, *(("0",) if cmd == "dump" else ()))
        assert res.returncode == 3, cmd
        assert res.stderr.strip() == (f"zr mrec {cmd}: not an mrec-lmdb collection: {tmp_path} is a directory "
                                      "(a collection is one file, e.g. NAME.mrec.lmdb)")
    with pytest.raises(NotAStoreError, match="is a directory"):
        mrec.Reader(tmp_path)


@needs_zr
def test_json_reports(tmp_path):
    p = small(tmp_path / "s.mrec.lmdb")
    res = run_zr("info", "--json", p)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["records"] == 1 and doc["frames"] == 2 and doc["ok"] is True
    assert doc["index_columns"] == [{"name": "label", "dtype": "string", "masked": False}]
    assert doc["meta"]["sequence_schema"]["meta"] == {"pe": {"dtype": "f64"}}
    assert doc["frame_blocks"] == [{"name": "atoms", "rows": 2, "columns": [{"name": "x", "dtype": "f64"}]}]
    res = run_zr("validate", "--json", p)
    assert res.returncode == 0 and json.loads(res.stdout) == {"file": str(p), "ok": True, "records": 1,
                                                             "frames": 2, "molrec_version": 2}


@needs_zr
def test_damaged_system_or_frame_info_exits_1_and_validate_names_the_file(tmp_path):
    for key, name in ((K(b"s", 0), "s/0"), (K(b"f", 0), "f/0"), (K(b"f", 1), "f/1")):
        p = small(tmp_path / f"d{key[0]}{key[-1]}.mrec.lmdb")
        poke(p, key, b"XXXX" + b"\0" * 12)
        res = run_zr("info", p)
        # info decodes every stored value, not only record 0's
        assert res.returncode == 1, (name, res.stdout, res.stderr)
        assert f"zr mrec info: {p}: " in res.stderr and name in res.stderr and "MRF1" in res.stderr
        assert "records:" in res.stdout  # the rest is still reported
        doc = json.loads(run_zr("info", "--json", p).stdout)
        assert doc["ok"] is False
        res = run_zr("validate", p)
        assert res.returncode == 1
        assert res.stderr.startswith(f"zr mrec validate: {p}: ") and "MRF1" in res.stderr, res.stderr
        doc = json.loads(run_zr("validate", "--json", p).stdout)
        assert doc["ok"] is False and "MRF1" in doc["error"]
        with pytest.raises(CorruptStoreError, match=str(p)):  # the library names the file too
            mrec.validate(p)


def _as_nobody():
    os.setgid(65534)
    os.setuid(65534)


@needs_zr
def test_read_only_media_names_the_lock_file_and_nolock_reads(tmp_path):
    root = os.geteuid() == 0
    d = tempfile.mkdtemp(prefix="zmr-ro-", dir="/tmp")
    try:
        os.chmod(d, 0o755)
        p = small(os.path.join(d, "ro.mrec.lmdb"))
        os.unlink(p + "-lock")
        os.chmod(p, 0o644)
        os.chmod(d, stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
        kw = {"preexec_fn": _as_nobody, "zr": _native_zr()} if root else {}
        if root:
            # A checkout under a directory other users cannot enter (root's
            # home, a mktemp -d folder) fails the exec itself: PermissionError
            # from Popen, not a status.
            try:
                probe = run_zr("--help", **kw)
                why = probe.stderr.strip()[:200] if probe.returncode != 0 else None
            except PermissionError as e:
                why = str(e)
            if why is not None:
                pytest.skip(f"zr ({kw['zr']}) cannot run as an unprivileged user from this "
                            f"checkout's path: {why}")
        res = run_zr("info", p, **kw)
        assert res.returncode == 3, res.stderr
        assert f"cannot create or write LMDB's lock file {p}-lock" in res.stderr
        assert "nolock" in res.stderr and "zr mrec --nolock" in res.stderr
        for args in (("--nolock", "info", p), ("info", "--nolock", p), ("validate", "--nolock", p),
                     ("--nolock", "dump", p, 0, 1)):
            res = run_zr(*args, **kw)
            assert res.returncode == 0, (args, res.stderr)
        if not root:
            with pytest.raises(OSError, match="nolock"):
                mrec.Reader(p)
            with mrec.Reader(p, nolock=True) as r:
                assert r.frame(0, 1)["meta"]["pe"] == -2.0
    finally:
        os.chmod(d, 0o755)
        shutil.rmtree(d)


@needs_zr
def test_import_help_and_exit_codes(tmp_path):
    pytest.importorskip("ase")
    import sys
    env = dict(os.environ, ZR_PYTHON=sys.executable)
    res = run_zr("import", "--help", env=env)
    assert res.returncode == 0 and "usage: zr mrec import" in res.stdout and "example:" in res.stdout
    out = tmp_path / "o.mrec.lmdb"
    res = run_zr("import", tmp_path / "missing.xyz", "-o", out, env=env)
    assert res.returncode == 3 and "missing.xyz" in res.stderr
    src = tmp_path / "a.xyz"
    src.write_text("1\n\nH 0 0 0\n")
    out.write_bytes(b"")
    res = run_zr("import", src, "-o", out, env=env)
    assert res.returncode == 3 and str(out) in res.stderr and "exists" in res.stderr
    assert run_zr("--nolock", "import", src, "-o", out).returncode == 2
