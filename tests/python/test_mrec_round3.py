"""loaderx.mrec / zr mrec: triclinic cells in the layout's convention at the
ASE boundary, readers sized by the file (not its recorded map size),
errors naming the file, Readers pickled by path, the importer keeping
every image's info and LAMMPS id / mol / mass, typed fills and units, and
the zr behaviours: dump of every dtype and null rows, info over every
record, the import launcher's interpreter."""

import json
import multiprocessing
import os
import pickle
import resource
import shutil
import struct
import subprocess
import sys

import numpy as np
import pytest

from loaderx import mrec
from loaderx.errors import CorruptStoreError


def _zr_bin():
    return os.environ.get("ZR_BIN") or shutil.which("zr")


needs_zr = pytest.mark.skipif(_zr_bin() is None, reason="zr CLI not found (set ZR_BIN)")


def run_zr(*args, **kw):
    return subprocess.run([_zr_bin(), "mrec", *map(str, args)], capture_output=True, text=True, timeout=120, **kw)


def _stored_header(path, key):
    """The header JSON of frame-bytes value ``key`` as stored, read with
    py-lmdb (nothing of loaderx)."""
    lmdb = pytest.importorskip("lmdb")
    env = lmdb.open(str(path), subdir=False, readonly=True, lock=False)
    try:
        with env.begin() as txn:
            v = bytes(txn.get(key))
    finally:
        env.close()
    assert v[:4] == b"MRF1"
    n = struct.unpack_from("<I", v, 4)[0]
    return json.loads(v[8:8 + n])


def _key(prefix, n):
    return prefix + int(n).to_bytes(8, "big")


# ------------------------------------------------------- tilted cells

LATTICE = "8 0 0 0.5 9 0 0.2 0.3 10"  # extxyz: a = (8,0,0), b = (0.5,9,0), c = (0.2,0.3,10)


def _extxyz(path, frames=1):
    with open(path, "w") as f:
        for k in range(frames):
            f.write(f'2\nLattice="{LATTICE}" Properties=species:S:1:pos:R:3 pbc="T T T" '
                    f'step_note={k} temperature={300.0 + k}\n')
            f.write(f"H 0.1 0.2 {0.3 + k}\nO 1.0 1.1 1.2\n")


def test_tilted_cell_ase_to_layout_and_back(tmp_path):
    """ASE's rows are the lattice vectors, the layout's vectors columns: an
    extxyz Lattice reaches the stored value with a = (8, 0, 0) as the first
    column (the reference's expected values), and comes back to ASE as the
    same cell."""
    ase_io = pytest.importorskip("ase.io")
    src = tmp_path / "tilted.extxyz"
    _extxyz(src)
    out = tmp_path / "t.mrec.lmdb"
    mrec.import_files([src], out, format="extxyz", progress=False)
    box = _stored_header(out, _key(b"s", 0))["box"]
    v = np.array(box["vectors"])
    np.testing.assert_array_equal(v, [[8, 0.5, 0.2], [0, 9, 0.3], [0, 0, 10]])
    np.testing.assert_array_equal(v[:, 0], [8, 0, 0])  # a
    np.testing.assert_array_equal(v[:, 1], [0.5, 9, 0])  # b
    with mrec.Reader(out) as r:
        sysd = r.system(0)
    atoms = mrec.to_atoms(sysd)
    want = ase_io.read(src, format="extxyz")
    np.testing.assert_array_equal(atoms.cell[:], want.cell[:])
    np.testing.assert_array_equal(atoms.positions, want.positions)
    assert list(atoms.pbc) == [True, True, True]


def test_reference_box_reaches_ase_with_columns_as_vectors(tmp_path):
    """A box written as the reference writes it, [[12,1,0.5],[0,11,0.25],
    [0,0,10]], holds a = (12, 0, 0), b = (1, 11, 0), c = (0.5, 0.25, 10)."""
    pytest.importorskip("ase")
    p = tmp_path / "ref.mrec.lmdb"
    vec = np.array([[12, 1, 0.5], [0, 11, 0.25], [0, 0, 10]], dtype=float)
    with mrec.Writer(p) as w:
        w.add_record(system={"blocks": {"atoms": {"element": ["C"], **{c: np.array([v]) for c, v in zip("xyz", (1.0, 2.0, 3.0))}}},
                             "box": {"vectors": vec, "origin": [0.0, 0.0, 0.0], "boundary": [True] * 3,
                                     "cell_defined": True}})
    np.testing.assert_array_equal(_stored_header(p, _key(b"s", 0))["box"]["vectors"], vec)
    with mrec.Reader(p) as r:
        atoms = mrec.to_atoms(r.system(0))
    np.testing.assert_array_equal(atoms.cell[:], [[12, 0, 0], [1, 11, 0], [0.5, 0.25, 10]])


def test_undefined_cell_is_identity_and_not_periodic(tmp_path):
    p = tmp_path / "u.mrec.lmdb"
    with mrec.Writer(p) as w:
        w.add_record(system={"blocks": {"atoms": {"x": np.zeros(1)}},
                             "box": {"vectors": np.zeros((3, 3)), "origin": [1.0, 2.0, 3.0],
                                     "boundary": [False] * 3, "cell_defined": False}})
    stored = _stored_header(p, _key(b"s", 0))["box"]
    assert stored["vectors"] == [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    with mrec.Reader(p) as r:
        np.testing.assert_array_equal(r.system(0)["box"]["vectors"], np.eye(3))
    with pytest.raises(ValueError, match="periodic on no axis"):
        mrec.Writer(tmp_path / "v.mrec.lmdb").add_record(
            system={"blocks": {"atoms": {"x": np.zeros(1)}},
                    "box": {"vectors": np.eye(3), "boundary": [True, False, False], "cell_defined": False}})


# ------------------------------------------------------- map size

def _reference_sized(tmp_path):
    """A collection whose two LMDB meta pages record a 1 TiB map, as the
    reference writer's files do (the page size is read from the file)."""
    p = tmp_path / "ref.mrec.lmdb"
    with mrec.Writer(p, schema={"meta": {"pe": {"dtype": "f64", "fill": "NaN"}}}) as w:
        for r in range(3):
            w.add_record(system={"blocks": {"atoms": {"element": ["H", "H"]}}},
                         frames=[{"blocks": {"atoms": {c: np.full(2, r + k * 0.5) for c in "xyz"}},
                                  "meta": {"pe": -k}} for k in range(2)])
    data = bytearray(p.read_bytes())
    psize = struct.unpack_from("<I", data, 16 + 24)[0]
    for page in (0, 1):
        struct.pack_into("<Q", data, page * psize + 16 + 16, 1 << 40)
    p.write_bytes(bytes(data))
    return p


def test_thousand_readers_of_a_reference_sized_map(tmp_path):
    p = _reference_sized(tmp_path)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 4200 <= hard or hard == resource.RLIM_INFINITY:
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 4200), hard))
    readers = []
    try:
        for _ in range(1000):
            readers.append(mrec.Reader(p))
        np.testing.assert_array_equal(readers[-1].frame(2, 1)["blocks"]["atoms"]["x"], [2.5, 2.5])
    finally:
        for r in readers:
            r.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert len(readers) == 1000


def _limit_address_space():
    # `ulimit -v 4000000` (KiB)
    resource.setrlimit(resource.RLIMIT_AS, (4000000 * 1024, 4000000 * 1024))


@needs_zr
def test_validate_and_info_under_a_4gb_address_space(tmp_path):
    p = _reference_sized(tmp_path)
    for sub in ("validate", "info"):
        res = run_zr(sub, p, preexec_fn=_limit_address_space)
        assert res.returncode == 0, (sub, res.stderr)
    code = ("import sys\nfrom loaderx import mrec\nr = mrec.Reader(sys.argv[1])\n"
            "print(len(r), r.frame(2, 1)['step'])\nmrec.validate(sys.argv[1])\n")
    res = subprocess.run([sys.executable, "-c", code, str(p)], capture_output=True, text=True, timeout=120,
                         preexec_fn=_limit_address_space)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["3", "1"]


def test_damaged_map_size_is_named(tmp_path):
    p = _reference_sized(tmp_path)
    data = bytearray(p.read_bytes())
    struct.pack_into("<Q", data, 16 + 16, 1 << 62)
    p.write_bytes(bytes(data))
    with pytest.raises(CorruptStoreError, match=r"meta page 0 is damaged: map size \(mm_mapsize\) "
                                                r"4611686018427387904 is beyond any address space"):
        mrec.Reader(p)
    if _zr_bin():
        res = run_zr("info", p)
        assert res.returncode == 1 and "mm_mapsize" in res.stderr and "Cannot allocate" not in res.stderr


# ------------------------------------------------------- errors name the file

def test_reader_errors_name_the_file(tmp_path):
    p = tmp_path / "e.mrec.lmdb"
    with mrec.Writer(p, schema={"meta": {"pe": {"dtype": "f64", "fill": "NaN"}}}) as w:
        w.add_record(system={"blocks": {"atoms": {"x": np.zeros(1)}}}, frames=[{"blocks": {"pos": {"x": np.ones(1)}}}])
        w.add_record(system={"blocks": {"atoms": {"x": np.zeros(1)}}})
    r = mrec.Reader(p)
    calls = [lambda: r.system(5), lambda: r.system(-1), lambda: r.system(2 ** 64), lambda: r.system(1.5),
             lambda: r.system("0"), lambda: r.update(0, 3), lambda: r.frame(0, 1), lambda: r.frame(1, 0),
             lambda: r.update(0, -2), lambda: r.record_info(9), lambda: r.record_meta(9),
             lambda: r.frame(7, 0), lambda: list(r.frames(4))]
    for call in calls:
        with pytest.raises(Exception) as e:
            call()
        assert str(p) in str(e.value), str(e.value)
    r.close()
    for call in calls + [lambda: len(r), lambda: r.index_block, lambda: r.n_frames]:
        with pytest.raises(Exception) as e:
            call()
        assert str(p) in str(e.value), str(e.value)
    # a damaged value
    lmdb = pytest.importorskip("lmdb")
    env = lmdb.open(str(p), subdir=False, map_size=1 << 26)
    with env.begin(write=True) as txn:
        txn.put(_key(b"f", 0), b"MRF2....")
    env.close()
    with mrec.Reader(p) as r2:
        for call in (lambda: r2.update(0, 0), lambda: r2.frame(0, 0), lambda: list(r2.frames(0))):
            with pytest.raises(CorruptStoreError) as e:
                call()
            assert str(e.value).startswith(str(p)), str(e.value)


# ------------------------------------------------------- pickling

def _read_in_worker(reader):
    with reader:
        return len(reader), reader.frame(0, 0)["step"], reader.path


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_reader_pickles_by_path(tmp_path, method):
    if method not in multiprocessing.get_all_start_methods():
        pytest.skip(f"no {method} here")
    p = tmp_path / "k.mrec.lmdb"
    with mrec.Writer(p) as w:
        w.add_record(frames=[{"blocks": {"atoms": {"x": np.ones(1)}}, "step": 7}])
    r = mrec.Reader(p, nolock=True)
    copy = pickle.loads(pickle.dumps(r))
    assert copy.path == r.path and copy.nolock and len(copy) == 1
    copy.close()
    with multiprocessing.get_context(method).Pool(1) as pool:
        assert pool.apply(_read_in_worker, (r,)) == (1, 7, str(p))
    r.close()
    with pytest.raises(TypeError, match="closed"):
        pickle.dumps(r)


# ------------------------------------------------------- writer input

def test_fills_are_written_typed_and_units_are_strings(tmp_path):
    p = tmp_path / "f.mrec.lmdb"
    schema = {"meta": {"big": {"dtype": "u64", "fill": 2 ** 60 + 1}, "pe": {"dtype": "f64", "fill": float("nan")},
                       "neg": {"dtype": "i64", "fill": -(2 ** 53) - 5}, "small": {"dtype": "i32", "fill": 3}}}
    with mrec.Writer(p, schema=schema) as w:
        w.add_record(frames=[{"blocks": {"atoms": {"x": np.ones(1)}}}])
    with mrec.Reader(p) as r:
        meta = r.schema["meta"]
    assert meta["big"]["fill"] == str(2 ** 60 + 1)
    assert meta["neg"]["fill"] == str(-(2 ** 53) - 5)
    assert meta["pe"]["fill"] == "NaN" and meta["small"]["fill"] == 3
    with mrec.Reader(p) as r:
        fr = r.frame(0, 0)
    assert fr["meta"]["big"] == 2 ** 60 + 1 and np.isnan(fr["meta"]["pe"])
    with pytest.raises(ValueError, match=r"collection.units.length must be a unit name \(a string\), got 1"):
        mrec.Writer(tmp_path / "g.mrec.lmdb", units={"length": 1})
    with pytest.raises(ValueError, match="fill 'x' is not a f64 value"):
        mrec.Writer(tmp_path / "h.mrec.lmdb", schema={"meta": {"pe": {"dtype": "f64", "fill": "x"}}})


# ------------------------------------------------------- the importer

def test_import_keeps_every_images_info(tmp_path):
    pytest.importorskip("ase")
    src = tmp_path / "traj.extxyz"
    _extxyz(src, frames=3)
    out = tmp_path / "i.mrec.lmdb"
    mrec.import_files([src], out, format="extxyz", progress=False)
    with mrec.Reader(out) as r:
        decl = r.schema["meta"]
        assert decl["temperature"] == {"dtype": "f64"} and decl["step_note"] == {"dtype": "i64"}
        got = [(f["meta"]["step_note"], f["meta"]["temperature"]) for f in r.frames(0)]
    assert got == [(0, 300.0), (1, 301.0), (2, 302.0)]


def _lammps_frame(step, rows):
    """One LAMMPS text-dump image of a triclinic box: rows (id mol type mass x y z)."""
    return (f"ITEM: TIMESTEP\n{step}\nITEM: NUMBER OF ATOMS\n{len(rows)}\n"
            "ITEM: BOX BOUNDS xy xz yz pp pp pp\n0.0 10.0 0.5\n0.0 10.0 0.2\n0.0 10.0 0.3\n"
            "ITEM: ATOMS id mol type mass x y z\n" + "".join(r + "\n" for r in rows))


LAMMPS_DUMP = (_lammps_frame(100, ["12 1 1 1.008 1.0 1.0 1.0", "7 1 2 15.999 2.0 2.0 2.0",
                                   "30 2 1 1.008 3.0 3.0 3.0"]) +
               _lammps_frame(200, ["30 2 1 1.008 3.1 3.0 3.0", "12 1 1 1.008 1.1 1.0 1.0",
                                   "7 1 2 15.999 2.1 2.0 2.0"]))


def test_import_keeps_lammps_id_mol_and_mass(tmp_path):
    pytest.importorskip("ase")
    src = tmp_path / "d.lammpstrj"
    src.write_text(LAMMPS_DUMP)
    out = tmp_path / "l.mrec.lmdb"
    mrec.import_files([src], out, format="lammps-dump-text", progress=False)
    with mrec.Reader(out) as r:
        atoms = r.system(0)["blocks"]["atoms"]
        frames = list(r.frames(0))
    # ASE orders the atoms by id: 7, 12, 30
    np.testing.assert_array_equal(atoms["id"], [7, 12, 30])
    assert atoms["id"].dtype == np.uint64
    np.testing.assert_array_equal(atoms["mol_id"], [1, 1, 2])
    np.testing.assert_array_equal(atoms["mass"], [15.999, 1.008, 1.008])
    np.testing.assert_array_equal(frames[1]["blocks"]["atoms"]["x"], [2.1, 1.1, 3.1])
    assert [f["step"] for f in frames] == [100, 200]


# ------------------------------------------------------- zr mrec

@needs_zr
def test_dump_prints_every_dtype_and_null_rows(tmp_path):
    p = tmp_path / "d.mrec.lmdb"
    cols = {"i8": np.array([-3, 4], np.int8), "i16": np.array([-300, 5], np.int16),
            "u16": np.array([65535, 1], np.uint16), "u32": np.array([4294967295, 2], np.uint32),
            "c64": np.array([1 + 2j, 0.25 - 0.5j], np.complex64), "c128": np.array([3 - 4j, 0], np.complex128),
            "m": np.ma.MaskedArray(np.array([1.5, 2.5]), mask=[False, True]),
            "s": ["a", None]}
    with mrec.Writer(p) as w:
        w.add_record(system={"blocks": {"b": cols}})
    res = run_zr("dump", p, 0)
    assert res.returncode == 0, res.stderr
    lines = {l.split(":")[0]: l for l in res.stdout.splitlines() if l.startswith("b/")}
    assert lines["b/i8 i8"].endswith(": -3 4")
    assert lines["b/i16 i16"].endswith(": -300 5")
    assert lines["b/u16 u16"].endswith(": 65535 1")
    assert lines["b/u32 u32"].endswith(": 4294967295 2")
    assert lines["b/c64 c64"].endswith(": 1+2j 0.25-0.5j")
    assert lines["b/c128 c128"].endswith(": 3-4j 0+0j")
    assert lines["b/m f64"].endswith(": 1.5 null")
    assert lines["b/s string"].endswith(": a null")
    assert " . " not in res.stdout and not res.stdout.rstrip().endswith(" .")


@needs_zr
def test_info_checks_every_record(tmp_path):
    p = tmp_path / "n.mrec.lmdb"
    with mrec.Writer(p) as w:
        for r in range(5):
            w.add_record(system={"blocks": {"atoms": {"x": np.full(1, float(r))}}},
                         frames=[{"blocks": {"pos": {"x": np.full(1, 1.0 + r)}}}])
    assert run_zr("info", p).returncode == 0
    lmdb = pytest.importorskip("lmdb")
    env = lmdb.open(str(p), subdir=False, map_size=1 << 26)
    with env.begin(write=True) as txn:
        txn.put(_key(b"f", 3), b"MRF2....")
    env.close()
    res = run_zr("info", "--json", p)
    assert res.returncode == 1
    assert json.loads(res.stdout)["ok"] is False
    assert "f/3" in res.stderr and str(p) in res.stderr


@needs_zr
def test_import_by_absolute_path_without_the_venv_on_path(tmp_path):
    """The pip-installed `zr` passes its own interpreter on: called by
    absolute path with a PATH that has no python3 with loaderx, the import
    still runs."""
    pytest.importorskip("ase")
    zr = shutil.which("zr")
    if zr is None or not os.path.exists(os.path.join(os.path.dirname(zr), "python3")):
        pytest.skip("zr is not the console script of a venv")
    src = tmp_path / "one.extxyz"
    _extxyz(src)
    env = {k: v for k, v in os.environ.items() if k not in ("ZR_PYTHON", "VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = "/usr/bin:/bin"
    res = subprocess.run([zr, "mrec", "import", str(src), "--format", "extxyz", "-o", str(tmp_path / "o.mrec.lmdb"),
                          "--no-progress"], capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "o.mrec.lmdb").exists()


def _native_zr():
    """The native tool itself (a wheel's loaderx/zr, else zr on PATH), not
    the console script that finds it through the loaderx package."""
    try:
        import _loaderx_zr
        tool = _loaderx_zr._tool()
        if tool and os.access(tool, os.X_OK):
            return tool
    except ImportError:
        pass
    return _zr_bin()


@needs_zr
def test_import_without_the_package_says_what_it_needs(tmp_path):
    env = dict(os.environ, ZR_PYTHON=sys.executable, PYTHONNOUSERSITE="1")
    env["PYTHONPATH"] = str(tmp_path)  # a loaderx that cannot be imported shadows the real one
    (tmp_path / "loaderx").mkdir()
    (tmp_path / "loaderx" / "__init__.py").write_text("raise ImportError('no loaderx here')\n")
    zr = _native_zr()
    res = subprocess.run([zr, "mrec", "import", "x.xyz", "-o", str(tmp_path / "o.mrec.lmdb")],
                         capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert res.returncode == 3
    assert "zr mrec import runs the importer of the Python package loaderx (with ASE)" in res.stderr
    assert "pip install loaderx ase" in res.stderr
    env["ZR_PYTHON"] = str(tmp_path / "no-such-python")
    res = subprocess.run([zr, "mrec", "import", "x.xyz", "-o", str(tmp_path / "o.mrec.lmdb")],
                         capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert res.returncode == 3 and "ZR_PYTHON" in res.stderr
