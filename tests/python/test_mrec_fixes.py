"""loaderx.mrec / zr mrec regressions: damaged and truncated files, the
importer's LAMMPS data (no invented energy, forces only when dumped, box
origin, units), failed imports leaving nothing behind, format and usage
errors, reader argument errors, decimal strings, CLI dump numbers and
header summaries, and loader streams read straight from LMDB giving the
same batches as the converted zrecord stores."""

import re
import os
import random
import shutil
import subprocess
import sys

import numpy as np
import pytest

from loaderx import _zr, mrec
from loaderx.errors import CorruptStoreError, NotAStoreError


def _zr_bin():
    """The zr CLI under test: $ZR_BIN, else the one on PATH."""
    return os.environ.get("ZR_BIN") or shutil.which("zr")


needs_zr = pytest.mark.skipif(_zr_bin() is None, reason="zr CLI not found (set ZR_BIN)")


def run_zr(*args, **kw):
    return subprocess.run([_zr_bin(), "mrec", *map(str, args)], capture_output=True, text=True,
                          timeout=120, **kw)


def _collection(path, records=30, frames=4, atoms=5):
    schema = {"meta": {"pe": {"dtype": "f64", "fill": "NaN"}}}
    with mrec.Writer(path, schema=schema, units={"style": "ase"}) as w:
        for r in range(records):
            fr = []
            for k in range(frames):
                d = {"meta": {"pe": -1.0 * k}} if k != 2 else {}
                if k != 1:  # frame 1 carries frame 0's positions forward
                    d["blocks"] = {"atoms": {c: np.full(atoms + r % 3, r + k / 10 + j) for j, c in enumerate("xyz")}}
                fr.append(d)
            w.add_record(meta={"i": r}, system={"blocks": {"atoms": {"element": ["H"] * (atoms + r % 3)}}},
                         frames=fr)
        # a system-only record holding positions, and one without any
        w.add_record(meta={"i": -1}, system={"blocks": {"atoms": {c: np.ones(2) for c in "xyz"}},
                                             "meta": {"pe": 2.5, "step": 7}})
        w.add_record(meta={"i": -2}, trajectory=True)  # a trajectory of zero frames
    return path


# ------------------------------------------------------- damaged files

def test_truncated_copies_are_refused(tmp_path):
    src = _collection(tmp_path / "a.mrec.lmdb", records=60)
    data = src.read_bytes()
    full = len(data)
    assert full > 8 * 4096
    for n in (200, 4096, 4096 + 500, 8192, full // 2, full - 4096, full - 1):
        p = tmp_path / f"cut{n}.mrec.lmdb"
        p.write_bytes(data[:n])
        with pytest.raises(CorruptStoreError, match="file truncated"):
            mrec.Reader(p)
        with pytest.raises(CorruptStoreError, match=f"file truncated: {n} bytes"):
            mrec.validate(p)
        if n >= 8192:
            with pytest.raises(CorruptStoreError, match=f"LMDB pages need {full}"):
                mrec.Reader(p)


@pytest.mark.parametrize("content", [b"", None])
def test_empty_file_is_not_a_collection(tmp_path, content):
    p = tmp_path / "e.mrec.lmdb" if content is not None else "/dev/null"
    if content is not None:
        p.write_bytes(content)
    # /dev/null is refused as "not a regular file" by the no-follow,
    # regular-files-only open, or as empty by the size check, whichever
    # meets it first.
    why = "is empty" if content is not None else "is (empty|not a regular file)"
    with pytest.raises(NotAStoreError, match=f"not an mrec-lmdb collection: {p} {why}"):
        mrec.Reader(p, nolock=True)
    with pytest.raises(NotAStoreError, match=why):
        mrec.validate(p, nolock=True)
    if _zr_bin():
        for cmd in ("validate", "info"):
            res = run_zr(cmd, p)
            assert res.returncode == 3  # cannot open: not a collection
            assert re.fullmatch(f"zr mrec {cmd}: not an mrec-lmdb collection: {p} {why}",
                                res.stderr.strip()), res.stderr


def test_reader_argument_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        mrec.Reader(tmp_path / "nonexist.mrec.lmdb")
    with pytest.raises(FileNotFoundError):
        mrec.validate(tmp_path / "nonexist.mrec.lmdb")
    p = _collection(tmp_path / "a.mrec.lmdb", records=2)
    with mrec.Reader(p) as r:
        with pytest.raises(IndexError, match="frame index -1 is negative"):
            r.frame(0, -1)
        with pytest.raises(IndexError, match="record index -1 is negative"):
            r.system(-1)
        with pytest.raises(IndexError, match="record index -3 is negative"):
            r.record_info(-3)
        with pytest.raises(IndexError, match="out of range"):
            r.update(0, 2 ** 64)
        with pytest.raises(IndexError):
            r.frame(0, 4)
        assert r.frame(0, 3)["blocks"]["atoms"]["x"].shape == (5,)


def test_decimal_strings_are_canonical():
    _zr.zmr_typed_json_check(_zr.ZMR_TAG_U64, '"18446744073709551615"')
    _zr.zmr_typed_json_check(_zr.ZMR_TAG_I64, '"-5"')
    for bad in ('"0005"', '"+5"', '" 5"', '"5.0"', '"-007"'):
        with pytest.raises(ValueError, match="canonical decimal string"):
            _zr.zmr_typed_json_check(_zr.ZMR_TAG_I64, bad)


@needs_zr
def test_validate_reports_damaged_btree_pages(tmp_path):
    """Byte flips inside LMDB's B-tree pages (no page checksums) are refused
    as damage: liblmdb is built with page checks, so the walk, which zr mrec
    validate still runs in a child, is never killed by a signal
    (test_mrec_damage.py measures this on 1000 targeted flips)."""
    src = _collection(tmp_path / "a.mrec.lmdb")
    data = src.read_bytes()
    ps = 4096
    outcomes = set()
    for seed in range(24):
        rng = random.Random(seed)
        b = bytearray(data)
        pg = rng.randrange(2, len(b) // ps)
        for _ in range(8):
            b[pg * ps + rng.randrange(0, 64)] = rng.randrange(256)
        p = tmp_path / f"bad{seed}.mrec.lmdb"
        p.write_bytes(bytes(b))
        res = run_zr("validate", p)
        # never killed by a signal: 1 damaged, 3 no longer readable as a collection
        assert res.returncode in (0, 1, 3), (seed, res.returncode, res.stderr)
        if res.returncode in (1, 3):
            last = res.stderr.strip().splitlines()[-1]
            assert last.startswith("zr mrec validate: "), res.stderr
            if "the LMDB structure is damaged (reader crashed with signal" in last:
                outcomes.add("crash")
            else:
                outcomes.add("refused")
        else:
            outcomes.add("ok")
    assert "crash" not in outcomes and "refused" in outcomes, outcomes


# ------------------------------------------------------- zr mrec dump

@needs_zr
def test_dump_numbers_and_compact_header(tmp_path):
    p = tmp_path / "big.mrec.lmdb"
    with mrec.Writer(p) as w:
        w.add_record(system={"blocks": {"atoms": {"element": ["C"] * 1000, "x": np.zeros(1000)}}})
    for bad in ("99999999999999999999", "-1", "+1", " 1", "1x", ""):
        res = run_zr("dump", p, bad)
        assert res.returncode == 2, bad
        assert "is not a number in 0..18446744073709551615" in res.stderr
    res = run_zr("dump", p, "0", "18446744073709551616")
    assert res.returncode == 2 and "FRAME" in res.stderr
    res = run_zr("dump", p, "0")
    assert res.returncode == 0, res.stderr
    header = next(line for line in res.stdout.splitlines() if line.startswith("system header:"))
    assert len(header) < 600
    assert '"values":["C","C","C","C","C","C",...(994 more)]' in header
    res = run_zr("dump", p, "1")  # zr's one exit map: no such record is 4
    assert res.returncode == 4 and f"zr mrec dump: {p}: record 1 is out of range (n_records 1)" in res.stderr


# ------------------------------------------------------- importers

DUMP = """ITEM: TIMESTEP
{step}
ITEM: NUMBER OF ATOMS
3
ITEM: BOX BOUNDS pp pp pp
-5.0 5.0
-2.0 8.0
0.0 10.0
ITEM: ATOMS id type x y z{fcols}
1 1 -4.0 -1.0 1.0{f1}
2 1 0.5 3.0 {z}{f2}
3 2 4.5 7.5 9.5{f3}
"""


def _dump(path, forces, nframes=2):
    text = ""
    for k in range(nframes):
        if forces:
            text += DUMP.format(step=10 * k, z=2.0 + k, fcols=" fx fy fz", f1=" 0.1 0.2 0.3",
                                f2=f" -0.1 {k}.5 0.0", f3=" 0 0 1")
        else:
            text += DUMP.format(step=10 * k, z=2.0 + k, fcols="", f1="", f2="", f3="")
    path.write_text(text)
    return path


@pytest.mark.parametrize("forces", [True, False])
def test_lammps_dump_import_keeps_only_real_data(tmp_path, forces):
    pytest.importorskip("ase")
    src = _dump(tmp_path / f"d{forces}.lammpstrj", forces)
    out = tmp_path / "d.mrec.lmdb"
    mrec.import_files([src], out, format="lammps-dump-text", progress=False)
    mrec.validate(out)
    with mrec.Reader(out) as r:
        assert r.units == {"style": "unknown"}
        assert r.schema["meta"] == {}  # no energy declared: a LAMMPS dump has none
        s = r.system(0)
        assert "pe" not in s["meta"] and "energy" not in s["meta"]
        # canonical columns at their canonical dtypes; the numeric LAMMPS type is type_id
        assert s["blocks"]["atoms"]["atomic_number"].dtype == np.uint64
        assert s["blocks"]["atoms"]["type_id"].dtype == np.uint64 and "type" not in s["blocks"]["atoms"]
        assert r.schema["blocks"]["atoms"]["columns"]["x"] == {"dtype": "f64", "trailing": []}
        frames = list(r.frames(0))
        assert [f["step"] for f in frames] == [0, 10]
        for k, f in enumerate(frames):
            assert f["meta"] == {}
            atoms = f["blocks"]["atoms"]
            assert ("fx" in atoms) == forces and "force" not in atoms and "position" not in atoms
            if forces:
                np.testing.assert_array_equal([atoms[c][1] for c in ("fx", "fy", "fz")], [-0.1, k + 0.5, 0.0])
            box = f["box"]
            np.testing.assert_array_equal(box["origin"], [-5.0, -2.0, 0.0])
            np.testing.assert_array_equal(np.diag(box["vectors"]), [10.0, 10.0, 10.0])
            pos = np.stack([atoms[c] for c in "xyz"], axis=1)
            np.testing.assert_array_equal(pos[0], [-4.0, -1.0, 1.0])  # as in the file
            assert (pos >= box["origin"]).all() and (pos < box["origin"] + np.diag(box["vectors"])).all()
        np.testing.assert_array_equal(s["box"]["origin"], [-5.0, -2.0, 0.0])


def test_units_option(tmp_path):
    pytest.importorskip("ase")
    src = _dump(tmp_path / "d.lammpstrj", True)
    out = tmp_path / "real.mrec.lmdb"
    assert mrec.main(["import", str(src), "--format", "lammps-dump-text", "--units", "real",
                      "-o", str(out), "--no-progress"]) == 0
    with mrec.Reader(out) as r:
        assert r.units == mrec.LAMMPS_UNITS["real"]
        assert r.units["energy"] == "kcal/mol" and r.units["time"] == "fs"
    assert mrec.units_for("metal")["energy"] == "eV"
    assert mrec.units_for("si")["length"] == "m"
    with pytest.raises(ValueError, match="unknown units"):
        mrec.units_for("furlong")


def test_ase_formats_keep_energy_and_ase_units(tmp_path):
    pytest.importorskip("ase")
    import ase.io
    from ase import Atoms
    from ase.calculators.singlepoint import SinglePointCalculator
    imgs = []
    for k in range(2):
        a = Atoms("H2", positions=[[0, 0, 0], [0.74 + 0.01 * k, 0, 0]])
        a.calc = SinglePointCalculator(a, energy=-1.0 - k)
        imgs.append(a)
    src = tmp_path / "h2.extxyz"
    ase.io.write(src, imgs, format="extxyz")
    out = tmp_path / "h2.mrec.lmdb"
    mrec.import_files([src], out, progress=False)
    with mrec.Reader(out) as r:
        assert r.units == mrec.ASE_UNITS
        assert [f["meta"]["pe"] for f in r.frames(0)] == [-1.0, -2.0]
        assert r.schema["meta"] == {"pe": {"dtype": "f64", "fill": "NaN"}}
        assert "fx" not in r.frame(0, 0)["blocks"]["atoms"]  # none in the file


def test_failed_import_leaves_nothing(tmp_path):
    pytest.importorskip("ase")
    good = _dump(tmp_path / "good.lammpstrj", True)
    bad = tmp_path / "bad.lammpstrj"
    bad.write_text("ITEM: TIMESTEP\n0\nITEM: NUMBER OF ATOMS\n3\nITEM: garbage\n")
    out = tmp_path / "o.mrec.lmdb"
    with pytest.raises(ValueError, match="bad.lammpstrj"):
        mrec.import_files([good, bad], out, format="lammps-dump-text", progress=False)
    assert sorted(os.listdir(tmp_path)) == ["bad.lammpstrj", "good.lammpstrj"]
    # the output is refused up front when it (or its lock file) exists
    out.write_bytes(b"")
    with pytest.raises(FileExistsError):
        mrec.import_files([good], out, format="lammps-dump-text", progress=False)
    assert out.read_bytes() == b""


@needs_zr
def test_cli_import_errors(tmp_path):
    pytest.importorskip("ase")
    good = _dump(tmp_path / "good.lammpstrj", True)
    out = tmp_path / "o.mrec.lmdb"
    env = dict(os.environ, ZR_PYTHON=sys.executable)
    res = run_zr("import", good, "--format", "bogus", "-o", out, env=env)
    assert res.returncode == 2
    assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert "zr mrec import: unknown or unreadable format 'bogus'" in res.stderr
    junk = tmp_path / "junk.bin"
    junk.write_bytes(bytes(range(256)) * 4)
    res = run_zr("import", junk, "-o", out, env=env)
    assert res.returncode == 2 and "cannot guess the format" in res.stderr
    assert "Traceback" not in res.stderr
    res = run_zr("import", good, env=env)
    assert res.returncode == 2
    assert "usage: zr mrec import" in res.stderr and "loaderx.mrec" not in res.stderr
    res = run_zr("import", good, "--units", "furlong", "-o", out, env=env)
    assert res.returncode == 2 and "unknown units 'furlong'" in res.stderr
    bad = tmp_path / "bad.lammpstrj"
    bad.write_text("ITEM: TIMESTEP\n0\nITEM: NUMBER OF ATOMS\n3\nITEM: garbage\n")
    res = run_zr("import", good, bad, "--format", "lammps-dump-text", "-o", out, "--no-progress", env=env)
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert not [n for n in os.listdir(tmp_path) if n.startswith("o.mrec.lmdb")]
    res = run_zr("import", good, "--format", "lammps-dump-text", "-o", out, "--no-progress", env=env)
    assert res.returncode == 0, res.stderr
    assert sorted(n for n in os.listdir(tmp_path) if n.startswith("o.mrec.lmdb")) == ["o.mrec.lmdb"]
    assert run_zr("validate", out).returncode == 0


# ------------------------------------------------------- LMDB loader streams

def _same_batches(a, b, steps):
    for _ in range(steps):
        x, y = next(a), next(b)
        assert list(x) == list(y)
        np.testing.assert_array_equal(a.last_indices, b.last_indices)
        for k in x:
            if isinstance(x[k], list):
                assert len(x[k]) == len(y[k])
                for p, q in zip(x[k], y[k]):
                    assert p.dtype == q.dtype and p.shape == q.shape
                    np.testing.assert_array_equal(p, q)
            else:
                assert x[k].dtype == y[k].dtype
                np.testing.assert_array_equal(x[k], y[k])


@pytest.mark.parametrize("mode,workers,transform", [("cyclic", 1, None), ("iid", 2, None),
                                                     ("cyclic", 2, lambda b: b)])
def test_lmdb_streams_batches_equal_converted_stores(tmp_path, mode, workers, transform):
    from loaderx.dataloader import DataLoader
    p = _collection(tmp_path / "a.mrec.lmdb", records=12)
    with mrec.Reader(p) as r:
        stores = mrec.to_zrecord(r, tmp_path / "z")
        streams = mrec.lmdb_streams(r)
    try:
        assert set(streams) == set(stores) == {"positions", "record", "step", "pe"}
        assert all(len(s) == 12 * 4 + 1 for s in streams.values())
        opts = dict(batch_size=5, seed=11, mode=mode, num_workers=workers, transform=transform)
        with DataLoader(stores, **opts) as a, DataLoader(streams, **opts) as b:
            _same_batches(a, b, 25)
        # a loader may mix stores and LMDB streams
        mixed = {"positions": streams["positions"], "step": stores["step"]}
        with DataLoader(mixed, batch_size=5, seed=2) as m, \
                DataLoader({"positions": stores["positions"], "step": stores["step"]}, batch_size=5, seed=2) as c:
            _same_batches(m, c, 5)
        # the values themselves: carry-forward, fill, the system-only record
        whole = DataLoader(streams, batch_size=49, mode="sequential", num_workers=1)
        b0 = next(whole)
        whole.close()
        np.testing.assert_array_equal(b0["positions"][1], b0["positions"][0])  # frame 1 carried
        assert np.isnan(b0["pe"][2]) and b0["pe"][3] == -3.0
        assert b0["step"][48] == 7 and b0["pe"][48] == 2.5 and b0["record"][48] == 12
        np.testing.assert_array_equal(b0["positions"][0][0], [0.0, 1.0, 2.0])  # x y z side by side
        # picklable by path (spawned workers reopen them)
        import pickle
        again = {k: pickle.loads(pickle.dumps(v)) for k, v in streams.items()}
        with DataLoader(again, batch_size=5, seed=4) as c, DataLoader(stores, batch_size=5, seed=4) as d:
            _same_batches(c, d, 3)
        for v in again.values():
            v.close()
        # closing the streams closes the loaders reading them first
        dl = DataLoader(streams, batch_size=3)
        next(dl)
        streams["pe"].close()
        assert dl.closed and all(s.closed for s in streams.values())
        with pytest.raises(ValueError):
            DataLoader(streams, batch_size=3)
    finally:
        for s in stores.values():
            s.close()
        for s in streams.values():
            s.close()


@pytest.mark.skipif(not os.path.exists("/usr/share/lammps/examples/mscg/dump.meoh"),
                    reason="lammps-examples not installed")
def test_lmdb_streams_on_lammps_import(tmp_path):
    pytest.importorskip("ase")
    from loaderx.dataloader import DataLoader
    out = tmp_path / "meoh.mrec.lmdb"
    mrec.import_files(["/usr/share/lammps/examples/mscg/dump.meoh"], out, progress=False)
    with mrec.Reader(out) as r:
        assert r.units == {"style": "unknown"}
        f = r.frame(0, 0)
        assert "pe" not in f["meta"] and "fx" in f["blocks"]["atoms"]
        np.testing.assert_allclose(f["box"]["origin"], [-20.6917] * 3)
        stores = mrec.to_zrecord(r, tmp_path / "z")
        streams = mrec.lmdb_streams(out)
    try:
        with DataLoader(stores, batch_size=4, seed=3, num_workers=2) as a, \
                DataLoader(streams, batch_size=4, seed=3, num_workers=2) as b:
            _same_batches(a, b, 10)
    finally:
        for s in list(stores.values()) + list(streams.values()):
            s.close()


# ------------------------------------------------- conversion to stores (C)

def _python_conversion(reader, block="atoms", column=mrec.POSITION_COLUMNS, scalars=("step", "pe")):
    """What to_zrecord wrote when it was a Python loop over frame_items:
    the reference the C conversion must equal record for record."""
    import math
    pos, recs, sc = [], [], {s: [] for s in scalars}
    for r, k, p, vals in mrec.frame_items(reader, block, column, scalars, True):
        pos.append(np.ascontiguousarray(p))
        recs.append(r)
        for s in scalars:
            v = vals.get(s)
            sc[s].append((-1 if v is None else int(v)) if s == "step" else (math.nan if v is None else float(v)))
    out = {"positions": pos, "record": np.asarray(recs, dtype=np.uint64)}
    for s in scalars:
        out[s] = np.asarray(sc[s], dtype=np.int64 if s == "step" else np.float64)
    return out


@pytest.mark.parametrize("column,codec", [(mrec.POSITION_COLUMNS, "zstd"), ("x", "raw"), (("z", "x"), "auto")])
def test_to_zrecord_equals_the_python_conversion(tmp_path, column, codec):
    p = _collection(tmp_path / "a.mrec.lmdb", records=9)
    with mrec.Reader(p) as r:
        want = _python_conversion(r, column=column, scalars=("step", "pe", "time"))
        stores = mrec.to_zrecord(r, tmp_path / "z", column=column, scalars=("step", "pe", "time"), codec=codec)
    try:
        assert sorted(os.listdir(tmp_path / "z")) == ["pe", "positions", "record", "step", "time"]
        assert len(stores["positions"]) == len(want["positions"]) == 9 * 4 + 1
        for k, a in enumerate(want["positions"]):
            b = stores["positions"][k]
            assert b.dtype == np.float64 and b.shape == a.shape and b.tobytes() == a.tobytes()
        for name in ("record", "step", "pe", "time"):
            got = stores[name][np.arange(len(stores[name]))]
            assert got.dtype == want[name].dtype and got.tobytes() == want[name].tobytes(), name
    finally:
        for s in stores.values():
            s.close()


def test_to_zrecord_failure_leaves_no_store(tmp_path):
    p = _collection(tmp_path / "a.mrec.lmdb", records=3)
    out = tmp_path / "z"
    # a column no frame holds: the error names it, nothing is at a store's name
    with pytest.raises(CorruptStoreError, match="atoms/q is missing"):
        mrec.to_zrecord(p, out, column=("x", "q"))
    assert not out.exists() or os.listdir(out) == []
    # an output directory that cannot be made (its parent is a file)
    (tmp_path / "file").write_bytes(b"x")
    with pytest.raises(OSError, match="cannot make directory"):
        mrec.to_zrecord(p, tmp_path / "file" / "z")
    # a failure after positions and record are full (a scalar that is a string)
    q = tmp_path / "s.mrec.lmdb"
    with mrec.Writer(q) as w:
        w.add_record(system={"blocks": {"atoms": {c: np.ones(2) for c in "xyz"}}, "meta": {"name": "water"}})
    with pytest.raises(CorruptStoreError, match=r"write stores: .*name.*meta 'name' is a string"):
        mrec.to_zrecord(q, out, scalars=("step", "name"))
    assert os.listdir(out) == []
    # a crashed run's leftover .partial is replaced; an existing store is refused
    os.makedirs(out / "positions.partial")
    (out / "positions.partial" / "junk").write_bytes(b"half")
    stores = mrec.to_zrecord(p, out)
    for s in stores.values():
        s.close()
    assert sorted(os.listdir(out)) == ["pe", "positions", "record", "step"]
    with pytest.raises(FileExistsError):
        mrec.to_zrecord(p, out)
    assert sorted(os.listdir(out)) == ["pe", "positions", "record", "step"]
