"""loaderx.mrec: mrec-lmdb collections from numpy, ASE importers on real
inputs, and loader streams (via zrecord conversion)."""

import json
import math
import os
import struct

import numpy as np
import pytest

from loaderx import mrec
from loaderx.errors import CorruptStoreError, NotAStoreError

ALL = ["f64", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "bool", "c64", "c128"]


def _col(rng, name, n):
    dt = mrec.DTYPES[name]
    if name == "bool":
        return rng.integers(0, 2, size=(n, 2)).astype(bool)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, size=(n, 2), dtype=dt, endpoint=True)
    if dt.kind == "c":
        return (rng.normal(size=(n, 2)) + 1j * rng.normal(size=(n, 2))).astype(dt)
    return rng.normal(size=(n, 2))


def test_every_dtype_and_tag_round_trip(tmp_path, rng):
    path = tmp_path / "a.mrec.lmdb"
    cols = {name: _col(rng, name, 4) for name in ALL}
    cols["element"] = ["C", "H", "H", "O"]
    meta = {"b": True, "i32": -2 ** 31, "i64": -2 ** 63, "u32": 2 ** 32 - 1, "u64": 2 ** 64 - 1,
            "f64": math.nan, "s": "héllo", "j": {"a": [1, None]}, "b3": (True, False, True),
            "i3": (1, -2, 3), "I3": (2 ** 62, -1, 0), "u3": (1, 2, 3), "U3": (2 ** 64 - 1, 0, 2 ** 53 + 1),
            "f3": (0.1, math.inf, -math.inf), "f6": tuple(range(6)), "f9": tuple(0.5 * k for k in range(9))}
    types = {"b": "bool", "i32": "i32", "i64": "i64", "u32": "u32", "u64": "u64", "f64": "f64",
             "s": "string", "j": "json", "b3": "bool3", "i3": "i32x3", "I3": "i64x3", "u3": "u32x3",
             "U3": "u64x3", "f3": "f64x3", "f6": "f64x6", "f9": "f64x9"}
    with mrec.Writer(path, units={"length": "angstrom"}) as w:
        w.add_record(meta={"name": "all"}, system={"blocks": {"atoms": cols}, "meta": meta,
                                                   "meta_types": types})
    mrec.validate(path)
    with mrec.Reader(path) as r:
        s = r.system(0)
        for name in ALL:
            got = s["blocks"]["atoms"][name]
            assert got.dtype == mrec.DTYPES[name]
            np.testing.assert_array_equal(got, cols[name])
        assert list(s["blocks"]["atoms"]["element"]) == cols["element"]
        assert s["meta_types"] == types
        for k, v in meta.items():
            g = s["meta"][k]
            if k == "f64":
                assert math.isnan(g)
            elif isinstance(v, tuple):
                assert g == tuple(float(x) if types[k].startswith("f") else x for x in v)
            else:
                assert g == v
        assert r.record_meta(0) == {"name": "all"}
        assert r.units == {"length": "angstrom"}
        assert r.molrec_version == 2


def test_untagged_meta_is_inferred_and_reals_refused(tmp_path):
    f = mrec.decode_frame(mrec.encode_frame({"meta": {"a": 1, "b": 2 ** 63, "c": 1.5, "d": "x",
                                                      "e": [1]}}))
    assert f["meta_types"] == {"a": "i64", "b": "u64", "c": "f64", "d": "string", "e": "json"}
    with pytest.raises(ValueError, match="refused, not rounded"):
        mrec.encode_frame({"meta": {"a": 1.0}, "meta_types": {"a": "i64"}})
    with pytest.raises(ValueError, match="f64 only"):
        mrec.encode_frame({"blocks": {"a": {"x": np.zeros(2, np.float32)}}})


def test_nullable_strings_targets_precision(tmp_path):
    q = np.ma.MaskedArray([1.0, 2.0, 3.0], mask=[False, True, False])
    blocks = {"atoms": mrec.Block({"x": np.array([0.25, 0.75, 1.25]), "q": q,
                                   "name": ["a", None, "c"]}, precision={"x": 0.5}),
              "bonds": mrec.Block({"atomi": np.array([0, 1], np.uint64),
                                   "atomj": np.array([1, 2], np.uint64)},
                                  targets={"atomi": "atoms", "atomj": "/system/atoms"})}
    f = mrec.decode_frame(mrec.encode_frame({"blocks": blocks}))
    a = f["blocks"]["atoms"]
    np.testing.assert_array_equal(a.columns["x"], [0.0, 1.0, 1.0])  # ties to even
    assert a.precision == {"x": 0.5}
    assert list(a.columns["q"].mask) == [False, True, False]
    assert a.columns["name"].mask.tolist() == [False, True, False]
    assert f["blocks"]["bonds"].targets == {"atomi": "atoms", "atomj": "/system/atoms"}
    bad = dict(blocks)
    bad["bonds"] = mrec.Block({"atomi": np.array([0, 3], np.uint64)}, targets={"atomi": "atoms"})
    with pytest.raises(ValueError, match="row reference 3"):
        mrec.encode_frame({"blocks": bad})
    assert mrec.round_precision(0.25, 0.5) == 0.0
    assert mrec.round_precision(-0.75, 0.5) == -1.0


def test_byte_exact_frame():
    f = {"blocks": {"atoms": {"x": np.array([1.5, -2.0]), "element": ["C", "H"]}},
         "meta": {"pe": -1.25}, "meta_types": {"pe": "f64"}}
    hdr = ('{"blocks":{"atoms":{"count":2,"structural_shape":null,"columns":{'
           '"x":{"dtype":"f64","shape":[2],"offset":0},'
           '"element":{"dtype":"string","shape":[2],"values":["C","H"]}}}},'
           '"meta":{"pe":-1.25},"meta_types":{"pe":"f64"}}').encode()
    pad = (-(8 + len(hdr))) % 8
    want = b"MRF1" + struct.pack("<I", len(hdr)) + hdr + b"\0" * pad + struct.pack("<2d", 1.5, -2.0)
    assert mrec.encode_frame(f) == want


@pytest.mark.parametrize("edit,msg", [
    (lambda b: b"XRF1" + b[4:], "magic"),
    (lambda b: b[:4] + struct.pack("<I", len(b)) + b[8:], "header length"),
    (lambda b: b[:-1], "runs past"),
    (lambda b: b.replace(b'"dtype":"f64"', b'"dtype":"f32"'), "closed set"),
    (lambda b: b.replace(b'"offset":0', b'"offset":4'), "multiple of 8"),
])
def test_frame_refusals(edit, msg):
    good = mrec.encode_frame({"blocks": {"a": {"x": np.array([1.0, 2.0])}}})
    with pytest.raises(CorruptStoreError, match=msg):
        mrec.decode_frame(edit(good), what="s/0")


def test_carry_forward_and_empty_block(tmp_path):
    path = tmp_path / "t.mrec.lmdb"
    schema = {"meta": {"energy": {"type": "f64", "fill": "NaN"}, "count": "u64"}}
    pos = np.arange(6.0).reshape(2, 3)
    with mrec.Writer(path, schema=schema) as w:
        w.add_record(system={"blocks": {"atoms": {"element": ["O", "H"]}}}, frames=[
            {"blocks": {"atoms": {"position": pos}, "tag": {"v": np.array([1], np.int32)}},
             "meta": {"energy": -1.0, "count": 2 ** 64 - 1}, "time": 0.5},
            {"blocks": {"atoms": {"position": pos.copy()}}, "meta": {"count": 1}, "time": 1.0},
            {"blocks": {"tag": mrec.Block({}, count=0)}, "meta": {"count": 2}, "step": 40, "time": 2.0},
        ])
        w.add_record(frames=[{"blocks": {"atoms": {"position": pos + 1}}, "meta": {"count": 0}}])
    mrec.validate(path)
    with mrec.Reader(path) as r:
        assert (r.n_records, r.n_frames) == (2, 4)
        assert r.record_info(0) == {"first_frame": 0, "n_frames": 3, "n_atoms": 2, "has_trajectory": True}
        assert r.update(0, 1)["blocks"] == {}  # unchanged position dropped bitwise
        assert math.isnan(r.update(0, 1)["meta"]["energy"])
        assert r.update(0, 0)["meta"]["count"] == 2 ** 64 - 1
        f2 = r.frame(0, 2)
        np.testing.assert_array_equal(f2["blocks"]["atoms"]["position"], pos)
        assert f2["blocks"]["tag"]["v"].shape == (0,)  # emptied, declared columns kept
        assert f2["step"] == 40 and r.frame(0, 1)["step"] == 1
        assert r.frame(0, 0)["time"] == 0.5
        assert "tag" not in r.frame(1, 0)["blocks"]  # never across records
        frames = list(r.frames(0))
        assert [f["step"] for f in frames] == [0, 1, 40]
        with pytest.raises(IndexError):
            r.frame(0, 3)
    with pytest.raises(FileExistsError):
        mrec.Writer(path)


def test_not_a_collection(tmp_path):
    p = tmp_path / "x.mrec.lmdb"
    w = mrec.Writer(p)
    w.add_record()
    w.abort()
    with pytest.raises(NotAStoreError, match="meta"):
        mrec.Reader(p)
    junk = tmp_path / "junk"
    junk.write_bytes(b"\0" * 8192)
    with pytest.raises((NotAStoreError, OSError)):
        mrec.Reader(junk)


# ------------------------------------------------------------ real inputs

MEOH = "/usr/share/lammps/examples/mscg/dump.meoh"
GRO = "/usr/share/gromacs/top/spc216.gro"


@pytest.mark.skipif(not os.path.exists(MEOH), reason="lammps-examples not installed")
def test_import_lammps_dump_and_train(tmp_path):
    pytest.importorskip("ase")
    out = tmp_path / "meoh.mrec.lmdb"
    assert mrec.main(["import", MEOH, "-o", str(out), "--no-progress"]) == 0
    mrec.validate(out)
    with mrec.Reader(out) as r:
        assert (r.n_records, r.n_frames) == (1, 20)
        assert r.record_info(0)["n_atoms"] == 1000
        s = r.system(0)
        assert len(s["blocks"]["atoms"]["element"]) == 1000
        f = r.frame(0, 19)
        assert f["blocks"]["atoms"]["x"].shape == (1000,) and f["blocks"]["atoms"]["x"].dtype == np.float64
        assert f["box"]["vectors"][0, 0] == pytest.approx(41.3834)
        steps = [fr["step"] for fr in r.frames(0)]
        assert steps == sorted(steps) and steps[1] > 0

        # loader streams via zrecord stores; fit the mean x of a frame from step
        from loaderx.dataloader import DataLoader
        stores = mrec.to_zrecord(r, tmp_path / "z")
        try:
            assert len(stores["positions"]) == 20
            dl = DataLoader({"positions": stores["positions"], "step": stores["step"],
                             "record": stores["record"]}, batch_size=4, seed=3, num_workers=1)
            seen = {}
            for _ in range(10):
                b = next(dl)
                for k, st in zip(dl.last_indices, b["step"]):
                    seen[int(k)] = int(st)
                assert len(b["positions"]) == 4 and b["positions"][0].shape == (1000, 3)
            dl.close()
            assert seen == {k: steps[k] for k in seen}
            # evaluate: positions drawn through the loader equal the resolved frames
            k = next(iter(seen))
            atoms = r.frame(0, k)["blocks"]["atoms"]
            np.testing.assert_array_equal(stores["positions"][k], np.stack([atoms[c] for c in "xyz"], axis=1))
        finally:
            for s in stores.values():
                s.close()


@pytest.mark.skipif(not os.path.exists(GRO), reason="gromacs-data not installed")
def test_import_gro_and_ase_collections(tmp_path):
    ase = pytest.importorskip("ase")
    import ase.collections
    coll_dir = os.path.dirname(ase.collections.__file__)
    out = tmp_path / "mix.mrec.lmdb"
    res = mrec.import_files([GRO, os.path.join(coll_dir, "g2.json"), os.path.join(coll_dir, "s22.json"),
                             os.path.join(coll_dir, "dcdft.json")], out, progress=False)
    assert res["records"] == 1 + 162 + 22 + 71
    mrec.validate(out)
    with mrec.Reader(out) as r:
        s = r.system(0)
        assert len(s["blocks"]["atoms"]["element"]) == 648 and s["box"]["boundary"] == (True, True, True)
        names = {r.record_meta(k).get("name") for k in range(1, 163)}
        assert "H2O" in names
        water = next(k for k in range(1, 163) if r.record_meta(k).get("name") == "H2O")
        assert sorted(r.system(water)["blocks"]["atoms"]["element"]) == ["H", "H", "O"]
        # systems-only records as loader streams (one item per record)
        stores = mrec.to_zrecord(r, tmp_path / "z2")
        try:
            assert len(stores["positions"]) == r.n_records
            assert stores["positions"][water].shape == (3, 3)
        finally:
            for st in stores.values():
                st.close()


def test_xyz_multi_frame(tmp_path):
    ase = pytest.importorskip("ase")
    import ase.io
    from ase import Atoms
    from ase.calculators.singlepoint import SinglePointCalculator
    imgs = []
    for k in range(3):
        a = Atoms("H2O", positions=[[0, 0, 0], [0.96, 0, 0], [-0.24, 0.93, 0.0 + 0.01 * k]])
        a.calc = SinglePointCalculator(a, energy=-10.0 - k, forces=np.zeros((3, 3)))
        imgs.append(a)
    src = tmp_path / "w.extxyz"
    ase.io.write(src, imgs, format="extxyz")
    out = tmp_path / "w.mrec.lmdb"
    mrec.import_files([src], out, progress=False)
    with mrec.Reader(out) as r:
        assert r.n_frames == 3
        assert [f["meta"]["pe"] for f in r.frames(0)] == [-10.0, -11.0, -12.0]
        assert r.update(0, 1)["blocks"]["atoms"].keys() >= {"x", "y", "z"}
