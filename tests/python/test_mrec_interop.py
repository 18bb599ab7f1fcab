"""Interop with the public reference layout (molrec's mrec-lmdb), both ways.

The reference implementation is not installable from a package registry, so
interop is checked against (a) collections built here by hand, byte by byte,
from the layout's own byte-level example and its stated rules, read with
loaderx.mrec and ``zr mrec``, and (b) an independent reader of those rules
(mrec_layout_rules, py-lmdb + json + numpy, nothing of loaderx) that must
accept every file our writer and importers produce and hand back the same
values loaderx.mrec reads.
"""
import json
import math
import os
import re
import shutil
import struct
import subprocess

import lmdb
import numpy as np
import pytest

import mrec_layout_rules as rules
from loaderx import mrec

MEOH = "/usr/share/lammps/examples/mscg/dump.meoh"


def _zr_bin():
    return os.environ.get("ZR_BIN") or shutil.which("zr") or "zr"


def run_zr(*args):
    return subprocess.run([_zr_bin(), "mrec", *map(str, args)], capture_output=True, text=True, timeout=120)


def mrf1(header, payload=b""):
    """Frame bytes exactly as the layout states them."""
    text = json.dumps(header, separators=(",", ":")).encode()
    head = b"MRF1" + struct.pack("<I", len(text)) + text
    return head + b"\0" * (-len(head) % 8) + payload


def put_all(path, items):
    env = lmdb.open(str(path), subdir=False, map_size=1 << 26)
    with env.begin(write=True) as txn:
        for k, v in items:
            txn.put(k, v if isinstance(v, bytes) else json.dumps(v, separators=(",", ":")).encode())
    env.close()


K = rules.key
X = [0.8212890625, -0.0517578125, -0.0078125, -0.8369140625]
Y = [0.900390625, 0.751953125, -0.751953125, -0.876953125]
Z = [0.4345703125, -0.017578125, -0.0126953125, 0.375]


def _xyz_update(step, pe, x0=None):
    x = list(X) if x0 is None else [x0] + X[1:]
    hdr = {"blocks": {"atoms": {"count": 4, "structural_shape": None, "columns": {
        "x": {"dtype": "f64", "shape": [4], "offset": 0},
        "y": {"dtype": "f64", "shape": [4], "offset": 32},
        "z": {"dtype": "f64", "shape": [4], "offset": 64}}}}, "meta": {"pe": pe}, "step": step}
    return mrf1(hdr, np.asarray(x + Y + Z, "<f8").tobytes())


SYSTEM = mrf1({"blocks": {
    "atoms": {"count": 4, "structural_shape": None, "columns": {
        "element": {"dtype": "string", "shape": [4], "values": ["H", "O", "O", "H"]},
        "type": {"dtype": "string", "shape": [4], "values": ["H1", "O1", "O1", "H1"]}}},
    "bonds": {"count": 3, "structural_shape": None, "columns": {
        "type": {"dtype": "string", "shape": [3], "values": ["O1-H1", "O1-O1", "O1-H1"]},
        "atomi": {"dtype": "u64", "shape": [3], "offset": 0},
        "atomj": {"dtype": "u64", "shape": [3], "offset": 24}}}},
    "meta": {"smiles": "OO", "total_charge": 0}, "meta_types": {"smiles": "string", "total_charge": "i64"}},
    np.asarray([0, 1, 2, 1, 2, 3], "<u8").tobytes())


def conformers(path):
    """The layout's two-record H2O2 conformer collection (its byte-level
    example: header lengths 228 / 42 / 353 / 523 B as stated there)."""
    index = mrf1({"blocks": {"records": {"count": 2, "structural_shape": None, "columns": {
        "smiles": {"dtype": "string", "shape": [2], "values": ["OO", "OO"]},
        "first_frame": {"dtype": "u64", "shape": [2], "offset": 0},
        "n_frames": {"dtype": "u64", "shape": [2], "offset": 16},
        "n_atoms": {"dtype": "u64", "shape": [2], "offset": 32},
        "has_trajectory": {"dtype": "bool", "shape": [2], "offset": 48}}}}, "meta": {}},
        np.asarray([0, 3, 3, 2, 4, 4], "<u8").tobytes() + b"\1\1" + b"\0" * 6)
    meta = {"layout": "mrec-lmdb", "layout_version": 1,
            "collection": {"units": {"length": "angstrom", "energy": "kcal/mol"}, "molrec_version": 2},
            "sequence_schema": {"blocks": {"atoms": {"columns": {
                c: {"dtype": "f64", "trailing": [], "precision": 0.001} for c in "xyz"}}},
                "meta": {"pe": {"dtype": "f64"}}},
            "n_records": 2, "n_frames": 5}
    f1 = _xyz_update(1, -12.3)
    assert len(f1) == 336 and struct.unpack_from("<I", f1, 4)[0] == 228  # as the example states
    assert struct.unpack_from("<I", index, 4)[0] == 353 and struct.unpack_from("<I", SYSTEM, 4)[0] == 523
    empty = mrf1({"blocks": {}, "meta": {"pe": -12.2}, "step": 2})
    assert struct.unpack_from("<I", empty, 4)[0] == 42
    put_all(path, [(b"meta", meta), (b"index", index),
                   (K(b"r", 0), {"record_id": "h2o2-0"}), (K(b"r", 1), {"record_id": "h2o2-1"}),
                   (K(b"s", 0), SYSTEM), (K(b"s", 1), SYSTEM),
                   (K(b"f", 0), _xyz_update(0, -12.4, 0.8203125)), (K(b"f", 1), f1), (K(b"f", 2), empty),
                   (K(b"f", 3), _xyz_update(0, -12.4, 0.8203125)), (K(b"f", 4), _xyz_update(1, -12.3))])
    return path


def _cols(b):
    return b.columns if isinstance(b, mrec.Block) else b


def _same(a, b, what):
    if isinstance(a, list) or (isinstance(a, np.ndarray) and a.dtype == object):
        assert [str(x) for x in np.asarray(a, dtype=object).ravel()] == \
               [str(x) for x in np.asarray(b, dtype=object).ravel()], what
        return
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, f"{what}: {a.dtype}{a.shape} vs {b.dtype}{b.shape}"
    assert np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"), what


def _same_meta(a, b, what):
    assert set(a) == set(b), f"{what}: {sorted(a)} vs {sorted(b)}"
    for k in a:
        x, y = a[k], b[k]
        if isinstance(x, float) and math.isnan(x):
            assert isinstance(y, float) and math.isnan(y), f"{what}.{k}"
        else:
            assert x == y, f"{what}.{k}: {x!r} vs {y!r}"


def same_content(path):
    """The layout rules' reading of ``path`` equals loaderx.mrec's, value
    for value (systems, resolved frames, per-step meta, steps, record meta,
    own index columns)."""
    ref = rules.read(path)
    with mrec.Reader(path) as r:
        assert r.n_records == len(ref["records"])
        for name, col in ref["index"].items():
            _same(col, r.index[name], f"index/{name}")
        assert set(r.index) == set(ref["index"])
        for k, rec in enumerate(ref["records"]):
            assert r.record_meta(k) == rec["meta"]
            sysd = r.system(k)
            assert (sysd is None) == (rec["system"] is None)
            if sysd is not None:
                assert set(sysd["blocks"]) == set(rec["system"]["blocks"])
                for b, cols in rec["system"]["blocks"].items():
                    mine = _cols(sysd["blocks"][b])
                    assert set(mine) == set(cols), f"record {k} system/{b}"
                    for c, v in cols.items():
                        _same(v, np.ma.getdata(mine[c]) if isinstance(mine[c], np.ma.MaskedArray) else mine[c],
                              f"record {k} system/{b}/{c}")
                _same_meta(rec["system"]["meta"], sysd["meta"], f"record {k} system meta")
            info = r.record_info(k)
            assert info["has_trajectory"] == (rec["trajectory"] is not None)
            frames = rec["trajectory"]["frames"] if rec["trajectory"] else []
            assert info["n_frames"] == len(frames)
            for j, (fr, mine) in enumerate(zip(frames, r.frames(k))):
                assert set(mine["blocks"]) == set(fr["blocks"]), f"record {k} frame {j}"
                for b, cols in fr["blocks"].items():
                    m = _cols(mine["blocks"][b])
                    assert set(m) == set(cols)
                    for c, v in cols.items():
                        _same(v, np.ma.getdata(m[c]) if isinstance(m[c], np.ma.MaskedArray) else m[c],
                              f"record {k} frame {j} {b}/{c}")
                _same_meta(fr["meta"], mine["meta"], f"record {k} frame {j} meta")
                assert fr["step"] == mine["step"]
    return ref


# ------------------------------------------------- reference files we read

def test_layout_example_read_by_loaderx_and_zr(tmp_path):
    p = conformers(tmp_path / "conformers.mrec.lmdb")
    mrec.validate(p)
    ref = same_content(p)
    with mrec.Reader(p) as r:
        assert r.schema["meta"] == {"pe": {"dtype": "f64"}}
        assert [f["meta"]["pe"] for f in r.frames(0)] == [-12.4, -12.3, -12.2]
        f2 = r.frame(0, 2)  # nothing changed: atoms carried from frame 1
        np.testing.assert_array_equal(f2["blocks"]["atoms"]["x"], X)
        assert r.frame(1, 0)["blocks"]["atoms"]["x"][0] == 0.8203125  # never carried across records
        assert r.system(1)["meta"] == {"smiles": "OO", "total_charge": 0}
        assert list(r.index["smiles"]) == ["OO", "OO"]
    assert ref["records"][0]["trajectory"]["frames"][2]["meta"] == {"pe": -12.2}
    v = run_zr("validate", p)
    assert v.returncode == 0, v.stderr
    i = run_zr("info", p)
    assert i.returncode == 0 and re.search(r"records:\s+2 ", i.stdout) and "smiles:string" in i.stdout, \
        i.stdout + i.stderr
    d = run_zr("dump", p, 0, 2)
    assert d.returncode == 0 and '"pe":-12.2' in d.stdout.replace(" ", ""), d.stdout + d.stderr


# ------------------------------------------------- our files the reference reads

def _extxyz(tmp_path):
    import ase.io
    from ase import Atoms
    from ase.calculators.singlepoint import SinglePointCalculator
    imgs = []
    for k in range(3):
        a = Atoms("H2O", positions=[[0, 0, 0], [0.96, 0, 0], [-0.24, 0.93, 0.01 * k]], cell=[6, 6, 6], pbc=True)
        a.set_initial_charges([-0.8, 0.4, 0.4])
        a.calc = SinglePointCalculator(a, energy=-10.0 - k, forces=np.full((3, 3), 0.1 * k))
        imgs.append(a)
    src = tmp_path / "w.extxyz"
    ase.io.write(src, imgs, format="extxyz")
    return src


def test_extxyz_import_read_by_layout_rules(tmp_path):
    pytest.importorskip("ase")
    out = tmp_path / "xyz.mrec.lmdb"
    r = subprocess.run([_zr_bin(), "mrec", "import", str(_extxyz(tmp_path)), "-o", str(out), "--no-progress"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    ref = same_content(out)
    m = ref["meta"]["sequence_schema"]
    assert m["meta"] == {"pe": {"dtype": "f64", "fill": "NaN"}}
    assert m["blocks"]["atoms"]["columns"]["fx"] == {"dtype": "f64", "trailing": []}
    rec = ref["records"][0]
    atoms = rec["system"]["blocks"]["atoms"]
    assert atoms["atomic_number"].dtype == np.uint64 and atoms["element"] == ["H", "H", "O"]
    np.testing.assert_array_equal(atoms["charge"], [-0.8, 0.4, 0.4])
    assert "x" not in atoms  # time-dependent columns live in the trajectory only
    fr = rec["trajectory"]["frames"]
    assert [f["meta"]["pe"] for f in fr] == [-10.0, -11.0, -12.0]
    np.testing.assert_array_equal(fr[2]["blocks"]["atoms"]["z"], [0.0, 0.0, 0.02])
    np.testing.assert_array_equal(fr[1]["blocks"]["atoms"]["fy"], [0.1] * 3)


@pytest.mark.skipif(not os.path.exists(MEOH), reason="lammps-examples not installed")
def test_lammps_dump_import_read_by_layout_rules(tmp_path):
    pytest.importorskip("ase")
    out = tmp_path / "meoh.mrec.lmdb"
    r = subprocess.run([_zr_bin(), "mrec", "import", MEOH, "-o", str(out), "--no-progress"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    ref = same_content(out)
    rec = ref["records"][0]
    atoms = rec["system"]["blocks"]["atoms"]
    assert atoms["type_id"].dtype == np.uint64 and "type" not in atoms
    fr = rec["trajectory"]["frames"]
    assert len(fr) == 20 and fr[0]["meta"] == {}
    # the first atom of the first frame, as in the dump file
    a = fr[0]["blocks"]["atoms"]
    assert (a["x"][0], a["y"][0], a["z"][0]) == (-15.593921, -11.920231, -16.031569)
    assert (a["fx"][0], a["fy"][0], a["fz"][0]) == (-3.38812, 1.23278, -11.12543)


def test_g2_import_read_by_layout_rules(tmp_path):
    ase = pytest.importorskip("ase")
    import ase.collections
    g2 = os.path.join(os.path.dirname(ase.collections.__file__), "g2.json")
    out = tmp_path / "g2.mrec.lmdb"
    r = subprocess.run([_zr_bin(), "mrec", "import", g2, "-o", str(out), "--no-progress"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    ref = same_content(out)
    assert len(ref["records"]) == 162
    water = next(rec for rec in ref["records"] if rec["meta"].get("name") == "H2O")
    atoms = water["system"]["blocks"]["atoms"]
    assert sorted(atoms["element"]) == ["H", "H", "O"] and atoms["atomic_number"].dtype == np.uint64
    assert {"x", "y", "z"} <= set(atoms)


def test_writer_refuses_canonical_keys_at_other_dtypes(tmp_path):
    with mrec.Writer(tmp_path / "c.mrec.lmdb") as w:
        with pytest.raises(ValueError, match=r"'atomic_number' is a canonical column key: it must be u64\[N\].*"
                                             r"given u8\[N\]"):
            w.add_record(system={"blocks": {"atoms": {"atomic_number": np.array([1, 8], np.uint8)}}})
        with pytest.raises(ValueError, match=r"'x' is a canonical column key: it must be f64\[N\] .*given "
                                             r"f64\[N\]\[3\]"):
            w.add_record(system={"blocks": {"atoms": {"x": np.zeros((2, 3))}}})
        w.add_record(system={"blocks": {"atoms": {"atomic_number": np.array([1, 8], np.uint64)}}})
    with pytest.raises(ValueError, match="'pe' is a canonical per-step key: it must be f64, given i64"):
        mrec.Writer(tmp_path / "d.mrec.lmdb", schema={"meta": {"pe": {"dtype": "i64"}}})
    rules.read(tmp_path / "c.mrec.lmdb")


# ------------------------------------------------- own index columns

def own_index_collection(path):
    """Written the reference's way by hand: the collection's own index
    columns first (name, formula, smiles, label strings; score f64 with
    precision and a mask; uid u64 up to 2^64-1; phase c128; ok bool), then
    the binding's four; two system-only records."""
    score = np.asarray([0.5, 0.0], "<f8").tobytes()
    cols = {
        "name": {"dtype": "string", "shape": [2], "values": ["water", "ammonia"]},
        "formula": {"dtype": "string", "shape": [2], "values": ["H2O", "H3N"]},
        "smiles": {"dtype": "string", "shape": [2], "values": ["O", "N"]},
        "label": {"dtype": "string", "shape": [2], "values": ["a", "b"]},
        "score": {"dtype": "f64", "shape": [2], "offset": 0, "validity": 16, "precision": 0.001},
        "uid": {"dtype": "u64", "shape": [2], "offset": 24},
        "phase": {"dtype": "c128", "shape": [2], "offset": 40},
        "ok": {"dtype": "bool", "shape": [2], "offset": 72},
        "first_frame": {"dtype": "u64", "shape": [2], "offset": 80},
        "n_frames": {"dtype": "u64", "shape": [2], "offset": 96},
        "n_atoms": {"dtype": "u64", "shape": [2], "offset": 112},
        "has_trajectory": {"dtype": "bool", "shape": [2], "offset": 128}}
    payload = (score + b"\1\0" + b"\0" * 6 + np.asarray([2 ** 64 - 1, 7], "<u8").tobytes()
               + np.asarray([1 + 2j, -0.5j], "<c16").tobytes() + b"\1\0" + b"\0" * 6
               + np.asarray([0, 0, 0, 0, 3, 4], "<u8").tobytes() + b"\0\0" + b"\0" * 6)
    index = mrf1({"blocks": {"records": {"count": 2, "structural_shape": None, "columns": cols}}, "meta": {}},
                 payload)
    meta = {"layout": "mrec-lmdb", "layout_version": 1,
            "collection": {"units": {"length": "angstrom"}, "molrec_version": 2},
            "sequence_schema": {"blocks": {}, "meta": {}}, "n_records": 2, "n_frames": 0}

    def system(elements):
        return mrf1({"blocks": {"atoms": {"count": len(elements), "structural_shape": None, "columns": {
            "element": {"dtype": "string", "shape": [len(elements)], "values": elements}}}},
            "meta": {}, "meta_types": {}})
    put_all(path, [(b"meta", meta), (b"index", index), (K(b"r", 0), {}), (K(b"r", 1), {}),
                   (K(b"s", 0), system(["O", "H", "H"])), (K(b"s", 1), system(["N", "H", "H", "H"]))])
    return path


def copy_collection(src, dst):
    """Read everything of ``src`` with loaderx.mrec and write it again."""
    with mrec.Reader(src) as r, mrec.Writer(dst, schema=r.schema, collection=r.meta["collection"]) as w:
        for k in range(len(r)):
            info = r.record_info(k)
            w.add_record(meta=r.record_meta(k), system=r.system(k),
                         frames=[r.update(k, j) for j in range(info["n_frames"])],
                         trajectory=info["has_trajectory"])
        w.set_index(r.index_block)
        ff = r.ff()
        if ff is not None:
            w.set_ff(ff["meta"], ff["blocks"])


def test_own_index_columns_read_and_kept_by_a_round_trip(tmp_path):
    p = own_index_collection(tmp_path / "own.mrec.lmdb")
    mrec.validate(p)
    same_content(p)
    with mrec.Reader(p) as r:
        idx = r.index
        assert list(idx) == ["name", "formula", "smiles", "label", "score", "uid", "phase", "ok"]
        assert list(idx["smiles"]) == ["O", "N"]
        assert idx["uid"].dtype == np.uint64 and idx["uid"][0] == 2 ** 64 - 1
        assert idx["phase"].dtype == np.complex128 and idx["phase"][1] == -0.5j
        assert idx["ok"].tolist() == [True, False]
        assert isinstance(idx["score"], np.ma.MaskedArray) and idx["score"].mask.tolist() == [False, True]
        assert r.index_block.precision == {"score": 0.001}
        assert r.record_info(1) == {"first_frame": 0, "n_frames": 0, "n_atoms": 4, "has_trajectory": False}
    out = tmp_path / "copy.mrec.lmdb"
    copy_collection(p, out)
    ref = same_content(out)
    assert list(ref["index"]) == ["name", "formula", "smiles", "label", "score", "uid", "phase", "ok"]
    # byte for byte the same index value: own columns first, then the binding's
    env = lmdb.open(str(p), subdir=False, readonly=True, lock=False)
    env2 = lmdb.open(str(out), subdir=False, readonly=True, lock=False)
    with env.begin() as a, env2.begin() as b:
        assert bytes(a.get(b"index")) == bytes(b.get(b"index"))
    env.close()
    env2.close()
    info = run_zr("info", out)
    assert info.returncode == 0
    assert "score:f64 precision 0.001 masked" in info.stdout and "uid:u64" in info.stdout, info.stdout
    d = run_zr("dump", out, "index")
    assert d.returncode == 0 and "records/uid u64: 18446744073709551615 7" in d.stdout, d.stdout


def test_binding_index_names_are_not_own_names(tmp_path):
    with mrec.Writer(tmp_path / "n.mrec.lmdb") as w:
        w.add_record(system={"blocks": {"atoms": {"element": ["H"]}}})
        for name in mrec.INDEX_COLUMNS:
            with pytest.raises(ValueError, match=f"index column '{name}' is the binding's own"):
                w.set_index({name: np.zeros(1, np.uint64)})
        w.set_index({"n": np.array([3], np.int32)})
    with pytest.raises(ValueError, match="the index columns hold 2 rows but the collection has 1 records"):
        with mrec.Writer(tmp_path / "m.mrec.lmdb") as w:
            w.add_record(system={"blocks": {"atoms": {"element": ["H"]}}})
            w.set_index({"n": np.array([3, 4], np.int32)})
    assert not os.path.exists(tmp_path / "m.mrec.lmdb") or rules_refuses(tmp_path / "m.mrec.lmdb")


def rules_refuses(path):
    try:
        rules.read(path)
    except rules.LayoutRefusal:
        return True
    return False


# ------------------------------------------------- per-step meta, zero-frame trajectories

def reference_way_collection(path):
    """Written by hand the reference's way: per-step meta declared
    {"dtype", "fill"} (pe f64 with fill NaN, n u64, tag json with fill
    null), a masked nullable trajectory column, own index columns, box
    updates, and records 1 and 3 with a trajectory of zero frames (record 3
    without a system)."""
    schema = {"blocks": {"atoms": {"columns": {"x": {"dtype": "f64", "trailing": []},
                                               "q": {"dtype": "f64", "trailing": [], "nullable": True},
                                               "v": {"dtype": "f64", "trailing": [3]}}}},
              "meta": {"pe": {"dtype": "f64", "fill": "NaN"}, "n": {"dtype": "u64"},
                       "tag": {"dtype": "json", "fill": None}}}

    def upd(step, x, q_valid, meta, box=None, time=None):
        cols = {"x": {"dtype": "f64", "shape": [2], "offset": 0},
                "q": {"dtype": "f64", "shape": [2], "offset": 16},
                "v": {"dtype": "f64", "shape": [2, 3], "offset": 32}}
        pay = np.asarray(x + [0.5, -0.5] + [float(k) for k in range(6)], "<f8").tobytes()
        if q_valid is not None:
            cols["q"]["validity"] = 80
            pay += bytes(q_valid) + b"\0" * 6
        hdr = {"blocks": {"atoms": {"count": 2, "structural_shape": None, "columns": cols}}, "meta": meta,
               "step": step}
        if time is not None:
            hdr["time"] = time
        if box is not None:
            hdr["box"] = box
        return mrf1(hdr, pay)

    box = {"vectors": [[10.0, 0.0, 0.0], [0.0, 10.0, 0.0], [0.0, 0.0, 10.0]], "origin": [0.0, 0.0, 0.0],
           "boundary": [True, True, True], "cell_defined": True}
    frames = [upd(0, [1.0, 2.0], [1, 0], {"pe": -1.5, "n": "18446744073709551615", "tag": {"a": 1}}, box, 0.0),
              mrf1({"blocks": {}, "meta": {"pe": "NaN", "n": 2, "tag": None}, "step": 9007199254740993,
                    "time": "Infinity"}),
              upd(5, [3.0, 4.0], None, {"pe": -2.0, "n": 0, "tag": [1, 2]})]
    own = {"label": {"dtype": "string", "shape": [4], "values": ["a", "b", "c", "d"]},
           "first_frame": {"dtype": "u64", "shape": [4], "offset": 0},
           "n_frames": {"dtype": "u64", "shape": [4], "offset": 32},
           "n_atoms": {"dtype": "u64", "shape": [4], "offset": 64},
           "has_trajectory": {"dtype": "bool", "shape": [4], "offset": 96}}
    index = mrf1({"blocks": {"records": {"count": 4, "structural_shape": None, "columns": own}}, "meta": {}},
                 np.asarray([0, 2, 2, 3, 2, 0, 1, 0, 2, 2, 2, 0], "<u8").tobytes() + b"\1\1\1\1" + b"\0" * 4)
    sysf = mrf1({"blocks": {"atoms": {"count": 2, "structural_shape": None, "columns": {
        "element": {"dtype": "string", "shape": [2], "values": ["C", "O"]}}}}, "meta": {"charge": 0},
        "meta_types": {"charge": "i32"}})
    meta = {"layout": "mrec-lmdb", "layout_version": 1, "collection": {"units": {}, "molrec_version": 2},
            "sequence_schema": schema, "n_records": 4, "n_frames": 3}
    put_all(path, [(b"meta", meta), (b"index", index)] + [(K(b"r", k), {"k": k}) for k in range(4)]
            + [(K(b"s", k), sysf) for k in range(3)]
            + [(K(b"f", 0), frames[0]), (K(b"f", 1), frames[1]), (K(b"f", 2), frames[2])])
    return path


def test_reference_way_collection_read_everywhere(tmp_path):
    p = reference_way_collection(tmp_path / "ref.mrec.lmdb")
    mrec.validate(p)
    ref = same_content(p)
    with mrec.Reader(p) as r:
        assert [r.record_info(k)["has_trajectory"] for k in range(4)] == [True, True, True, True]
        assert [r.record_info(k)["n_frames"] for k in range(4)] == [2, 0, 1, 0]
        assert list(r.frames(1)) == [] and r.system(3) is None
        f1 = r.frame(0, 1)
        assert math.isnan(f1["meta"]["pe"]) and f1["meta"]["tag"] is None and f1["meta"]["n"] == 2
        assert f1["step"] == 9007199254740993 and f1["time"] == math.inf
        assert r.frame(0, 0)["meta"]["n"] == 2 ** 64 - 1
        q = r.frame(0, 1)["blocks"]["atoms"]["q"]  # carried forward, mask included
        assert isinstance(q, np.ma.MaskedArray) and q.mask.tolist() == [False, True]
        assert r.frame(0, 1)["box"]["vectors"][0, 0] == 10.0
        assert r.schema["meta"]["tag"] == {"dtype": "json", "fill": None}
        assert list(r.index["label"]) == ["a", "b", "c", "d"]
    assert ref["records"][1]["trajectory"] == {"frames": []}
    v = run_zr("validate", p)
    assert v.returncode == 0 and "4 records, 3 frames" in v.stdout, v.stdout + v.stderr
    i = run_zr("info", p)
    assert i.returncode == 0 and re.search(r"records:\s+4 \(4 with a trajectory\)", i.stdout), i.stdout
    d = run_zr("dump", p, 1)
    assert d.returncode == 0 and "n_frames 0, n_atoms 2, has_trajectory true" in d.stdout, d.stdout
    d = run_zr("dump", p, 0, 1)
    assert d.returncode == 0 and '"step":"9007199254740993"' in d.stdout and '"n":2' in d.stdout, d.stdout
    # read -> write keeps all of it, zero-frame trajectories included
    out = tmp_path / "copy.mrec.lmdb"
    copy_collection(p, out)
    ref2 = same_content(out)
    assert [rec["trajectory"] is not None for rec in ref2["records"]] == [True] * 4
    assert ref2["meta"]["sequence_schema"] == ref["meta"]["sequence_schema"]
    assert ref2["meta"]["collection"] == ref["meta"]["collection"]


def test_record_needs_a_system_or_a_trajectory(tmp_path):
    with pytest.raises(ValueError, match="record 0 has neither a system nor a trajectory"):
        with mrec.Writer(tmp_path / "e.mrec.lmdb") as w:
            w.add_record(meta={"k": 0})
            w.add_record(meta={"k": 1}, trajectory=True)
    with mrec.Writer(tmp_path / "z.mrec.lmdb") as w:
        w.add_record(meta={"k": 0}, trajectory=True)
    ref = same_content(tmp_path / "z.mrec.lmdb")
    assert ref["records"][0]["trajectory"] == {"frames": []}


# ------------------------------------------------- writer errors keep their detail

@pytest.mark.parametrize("make,message", [
    (lambda p: mrec.Writer(p, schema={"meta": {"e": "f32"}}),
     'sequence_schema.meta.e: dtype must be one of the 16 tags, got "f32"'),
    (lambda p: mrec.Writer(p, schema={"meta": {"e": {"dtype": "u64", "fill": -1}}}),
     "sequence_schema.meta.e fill: u64 value -1 is negative"),
    (lambda p: mrec.Writer(p, schema={"blocks": {"a": {"columns": {"v": {"dtype": "u64", "precision": 0.1}}}}}),
     "sequence_schema: column a/v: precision must be an f64 column's number"),
    (lambda p: mrec.Writer(p, collection={"units": "angstrom"}), "collection.units must be an object"),
])
def test_refused_writer_creation_names_the_rule(tmp_path, make, message):
    with pytest.raises(ValueError) as e:
        make(tmp_path / "w.mrec.lmdb")
    assert message in str(e.value)


def test_refused_writes_keep_their_detail(tmp_path):
    w = mrec.Writer(tmp_path / "w.mrec.lmdb", schema={"meta": {"e": {"dtype": "f64"}}})
    try:
        with pytest.raises(ValueError, match=r"row reference 5 at element 0 is not below atoms's 1 rows"):
            w.add_record(system={"blocks": {"atoms": {"element": ["H"]},
                                            "b": mrec.Block({"i": np.array([5], np.uint64)}, targets={"i": "atoms"})}})
        with pytest.raises(ValueError, match="record meta: must be a JSON object"):
            w.add_record(meta=[1])
        w.add_record(trajectory=True)
        with pytest.raises(ValueError, match="declared meta key 'e' missing and it has no fill"):
            w.add_frame({"blocks": {"a": {"v": np.zeros(2)}}})
        with pytest.raises(ValueError, match=r"column a/v is declared f64\[N\] in sequence_schema, given i32\[N\]"):
            w.add_frame({"blocks": {"a": {"v": np.zeros(2)}}, "meta": {"e": 1.0}})
            w.add_frame({"blocks": {"a": {"v": np.zeros(2, np.int32)}}, "meta": {"e": 1.0}})
        # every later call names the failure that stopped the writer
        with pytest.raises(Exception, match=r"add_frame: the writer failed earlier \(add_frame: column a/v is "
                                            r"declared f64\[N\]"):
            w.add_frame({"blocks": {}, "meta": {"e": 1.0}})
        with pytest.raises(Exception, match=r"commit: the writer failed earlier \(add_frame: column a/v"):
            w.commit()
    finally:
        w.abort()


def test_every_trajectory_block_is_declared(tmp_path):
    """Blocks first presented empty, emptied later, undeclared by the
    caller: all declared with their trailing shapes, all accepted by the
    layout's rules with the same content."""
    p = tmp_path / "b.mrec.lmdb"
    with mrec.Writer(p) as w:
        w.add_record(frames=[
            {"blocks": {"atoms": {"x": np.zeros(2), "v": np.ones((2, 3))}, "extra": mrec.Block({}, count=0)}},
            {"blocks": {"atoms": mrec.Block({}, count=0)}},
            {"blocks": {"atoms": {"x": np.ones(3), "v": np.zeros((3, 3))}}}])
    ref = same_content(p)
    blocks = ref["meta"]["sequence_schema"]["blocks"]
    assert blocks == {"atoms": {"columns": {"x": {"dtype": "f64", "trailing": []},
                                            "v": {"dtype": "f64", "trailing": [3]}}},
                      "extra": {"columns": {}}}
    emptied = ref["records"][0]["trajectory"]["frames"][1]["blocks"]["atoms"]
    assert emptied["v"].shape == (0, 3) and emptied["x"].shape == (0,)
