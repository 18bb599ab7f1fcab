"""Damaged LMDB pages never crash an entry point: 1000 single-byte flips
aimed at LMDB's page structure (page headers, node pointers and headers,
child and overflow page numbers, meta pages; tests/python/mrec_damage.py)
through loaderx.mrec.Reader (every record, system, stored and resolved
frame, the index), loaderx.mrec.validate, zr mrec info and zr mrec
validate, each in a child process. Any child killed by a signal, inside
liblmdb or not, fails the test. MREC_FLIPS=N for a bigger run."""

import os
import shutil

import numpy as np
import pytest

import mrec_damage
from loaderx import mrec


def _native_zr():
    """A wheel's native zr (loaderx/zr): 2,000 runs without the console
    script's interpreter start-up each time."""
    try:
        import _loaderx_zr
    except ImportError:
        return None
    tool = _loaderx_zr._tool()
    return tool if tool and os.access(tool, os.X_OK) else None


def _collection(path):
    """40 records, 3 frames each: several leaf pages under a branch page,
    and every 7th record's values past half a page (overflow pages)."""
    with mrec.Writer(path, schema={"meta": {"pe": {"dtype": "f64", "fill": "NaN"}}},
                     units={"length": "angstrom"}) as w:
        for r in range(40):
            n = 300 if r % 7 == 0 else 3 + r % 5
            frames = []
            for k in range(3):
                d = {"meta": {"pe": -1.0 * k}, "step": k}
                if k != 1:
                    d["blocks"] = {"atoms": {c: np.full(n, r + k / 10 + j) for j, c in enumerate("xyz")}}
                frames.append(d)
            w.add_record(meta={"i": r}, system={"blocks": {"atoms": {"element": ["H"] * n}}}, frames=frames)
    return path


def test_structure_targeted_flips_never_crash(tmp_path):
    src = _collection(tmp_path / "src.mrec.lmdb")
    mrec.validate(src)
    kinds = {what for _, what in mrec_damage.targets(src.read_bytes())}
    # the structure the flips aim at is there
    assert {"branch node size / child page", "overflow page header", "leaf big value's page number",
            "leaf mp_lower", "leaf node flags"} <= kinds
    n = int(os.environ.get("MREC_FLIPS", "1000"))
    copies = mrec_damage.damaged_copies(src, tmp_path, n, seed=31)
    zr = os.environ.get("ZR_BIN") or _native_zr() or shutil.which("zr")
    res = mrec_damage.run_entry_points(copies, zr, timeout=60)
    assert res["files"] == n
    assert res["crashes"] == [], "\n".join(map(str, res["crashes"][:20]))


def test_page_headers_pointing_past_the_page(tmp_path):
    """Crafted files whose leaf page header points past its page (mp_lower
    and mp_upper beyond the page size): one file per leaf page, two sizes
    each. Every entry point refuses them as damage, none crashes (with
    Debian's liblmdb 0.9.24, 20 of these 30 files crash the reader with
    SIGSEGV or SIGBUS)."""
    import struct

    src = _collection(tmp_path / "src.mrec.lmdb")
    data = src.read_bytes()
    psize = struct.unpack_from("<I", data, 16 + 24)[0]
    leaves = sorted({off - off % psize for off, what in mrec_damage.targets(data) if what == "leaf mp_lower"})
    assert len(leaves) >= 10
    copies = []
    for page in leaves:
        for lower, upper in ((psize + 64, psize + 128), (0xFFF0, 0xFFF8)):
            b = bytearray(data)
            struct.pack_into("<HH", b, page + 12, lower, upper)
            p = tmp_path / f"past{page // psize}-{lower}.mrec.lmdb"
            p.write_bytes(bytes(b))
            copies.append((str(p), page + 12, "leaf page header past its page", lower))
    zr = os.environ.get("ZR_BIN") or _native_zr() or shutil.which("zr")
    res = mrec_damage.run_entry_points(copies, zr, timeout=60)
    assert res["crashes"] == [], "\n".join(map(str, res["crashes"][:10]))
    with pytest.raises(Exception, match=str(tmp_path)):
        mrec.validate(copies[-1][0])


def test_node_offsets_past_the_page_without_lock_file(tmp_path):
    """Every node pointer of the collection's leaf pages set past its page
    (0xFFF0 on a 4 KiB page), to the node's last 2 bytes (its header runs
    off the page) and into the page header: one file each, read without
    LMDB's lock file so no other map follows the file's pages. Every entry
    point refuses them, none crashes (without the node check in liblmdb's
    page read, 61 of 606 such files killed the reader with SIGSEGV)."""
    import struct

    src = _collection(tmp_path / "src.mrec.lmdb")
    data = src.read_bytes()
    psize = struct.unpack_from("<I", data, 16 + 24)[0]
    leaves = sorted({off - off % psize for off, what in mrec_damage.targets(data) if what == "leaf mp_lower"})
    copies = []
    for page in leaves:
        nkeys = (struct.unpack_from("<H", data, page + 12)[0] - 16) // 2
        for k in range(nkeys):
            for ptr in (0xFFF0, psize - 2, 4):
                b = bytearray(data)
                struct.pack_into("<H", b, page + 16 + 2 * k, ptr)
                p = tmp_path / f"node{page // psize}-{k}-{ptr}.mrec.lmdb"
                p.write_bytes(bytes(b))
                copies.append((str(p), page + 16 + 2 * k, "leaf node pointer past its page", ptr))
    assert len(copies) >= 300
    res = mrec_damage.run_entry_points(copies, None, timeout=120, nolock=True)
    assert res["crashes"] == [], "\n".join(map(str, res["crashes"][:10]))
    with pytest.raises(Exception, match="damaged|corrupt|MDB_CORRUPTED"):
        with mrec.Reader(copies[-1][0], nolock=True) as r:
            for rec in range(len(r)):
                r.frame(rec, 0)
