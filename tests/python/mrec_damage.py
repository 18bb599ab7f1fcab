"""Damage aimed at LMDB's page structure, and every mrec entry point run on it.

``targets(data)`` lists the bytes of an mrec-lmdb file that LMDB's page walk
trusts (LMDB 0.9, 64-bit layout): the meta pages' fields, every B-tree
page's header (page number, flags, mp_lower, mp_upper), its node pointers
and node headers (size, flags, key size, a branch node's child page number,
a big value's overflow page number), the first key byte, and every overflow
page's header (page number, flags, page count). ``damaged_copies`` writes
copies of a file with one such byte flipped each. ``run_entry_points`` opens
every copy with ``loaderx.mrec.Reader`` (reading every record, system,
stored and resolved frame and the index), ``loaderx.mrec.validate``,
``zr mrec info`` and ``zr mrec validate``, each in a child process, and
counts a child killed by a signal as a crash, wherever it died (inside
liblmdb or not); ``zr mrec validate`` also counts when its own walk child
crashed. Used by tests/python/test_mrec_damage.py; runnable by hand for a
bigger measurement: ``python3 mrec_damage.py FILE N``.
"""
import json
import os
import random
import struct
import subprocess
import sys
import tempfile

PAGEHDR = 16
P_BRANCH, P_LEAF, P_OVERFLOW, P_META, P_LEAF2 = 0x01, 0x02, 0x04, 0x08, 0x20
F_BIGDATA = 0x01


def _meta(data, at):
    """(page size, last page, txnid) of the meta page at byte ``at``."""
    m = at + PAGEHDR
    psize = struct.unpack_from("<I", data, m + 24)[0]
    last_pg, txnid = struct.unpack_from("<QQ", data, m + 120)
    return psize, last_pg, txnid


def targets(data):
    """[(byte offset, what)] of the structure LMDB trusts in ``data``."""
    psize = _meta(data, 0)[0]
    metas = [_meta(data, 0), _meta(data, psize)]
    last_pg = max(metas, key=lambda m: m[2])[1]
    out = []
    for k in range(2):  # meta pages: map size, the main DB record, last page, txnid
        m = k * psize + PAGEHDR
        out += [(m + 16 + i, "meta mm_mapsize") for i in range(8)]
        db = m + 24 + 48  # dbs[1], the main DB: pad, flags, depth, branch, leaf, overflow, entries, root
        out += [(db + i, "meta main-db record") for i in range(48)]
        out += [(m + 120 + i, "meta last page") for i in range(8)]
    pg = 2
    while pg <= last_pg:
        o = pg * psize
        if o + PAGEHDR > len(data):
            break
        flags = struct.unpack_from("<H", data, o + 10)[0]
        if flags & P_OVERFLOW:
            out += [(o + i, "overflow page header") for i in (0, 1, 7, 10, 11, 12, 13, 14, 15)]
            pg += max(1, struct.unpack_from("<I", data, o + 12)[0])
            continue
        if not flags & (P_BRANCH | P_LEAF):
            pg += 1
            continue  # a free page
        kind = "branch" if flags & P_BRANCH else "leaf"
        lower, upper = struct.unpack_from("<HH", data, o + 12)
        out += [(o + i, f"{kind} page number") for i in (0, 1, 7)]
        out += [(o + i, f"{kind} page flags") for i in (10, 11)]
        out += [(o + i, f"{kind} mp_lower") for i in (12, 13)]
        out += [(o + i, f"{kind} mp_upper") for i in (14, 15)]
        for i in range(max(0, (lower - PAGEHDR) // 2)):
            ptr_at = o + PAGEHDR + 2 * i
            if ptr_at + 2 > o + psize:
                break
            out += [(ptr_at, f"{kind} node pointer"), (ptr_at + 1, f"{kind} node pointer")]
            node = o + struct.unpack_from("<H", data, ptr_at)[0]
            if node + 8 > o + psize:
                continue
            nflags, ksize = struct.unpack_from("<HH", data, node + 4)
            out += [(node + j, f"{kind} node size / child page") for j in range(4)]
            out += [(node + 4, f"{kind} node flags"), (node + 5, f"{kind} node flags")]
            out += [(node + 6, f"{kind} node key size"), (node + 7, f"{kind} node key size")]
            if ksize:
                out.append((node + 8, f"{kind} key"))
            if kind == "leaf" and nflags & F_BIGDATA:
                out += [(node + 8 + ksize + j, "leaf big value's page number") for j in range(8)]
        pg += 1
    return [(off, what) for off, what in out if off < len(data)]


def damaged_copies(src, dest_dir, n, seed=1):
    """Write ``n`` copies of ``src`` into ``dest_dir``, each with one
    targeted byte XOR-ed with a non-zero mask: the kinds of target (a leaf
    page's mp_lower, a branch node's child page, ...) in turn, a random
    byte of that kind each time. Returns [(path, offset, what, mask)]."""
    data = open(src, "rb").read()
    kinds = {}
    for off, what in targets(data):
        kinds.setdefault(what, []).append(off)
    order = sorted(kinds)
    rng = random.Random(seed)
    masks = (0x01, 0x02, 0x04, 0x10, 0x40, 0x80, 0xFF)
    out = []
    for i in range(n):
        what = order[i % len(order)]
        off = rng.choice(kinds[what])
        mask = rng.choice(masks + (rng.randrange(1, 256),))
        b = bytearray(data)
        b[off] ^= mask
        p = os.path.join(dest_dir, f"d{i:05d}.mrec.lmdb")
        with open(p, "wb") as f:
            f.write(b)
        out.append((p, off, what, mask))
    return out


_CHILD = r"""
import os, sys
from loaderx import mrec
nolock = os.environ.get("MREC_DAMAGE_NOLOCK") == "1"
for line in sys.stdin:
    i, path = line.split(None, 1)
    path = path.strip()
    print("start", i, flush=True)
    try:
        with mrec.Reader(path, nolock=nolock) as r:
            r.index_block
            for rec in range(len(r)):
                r.record_meta(rec)
                r.system(rec)
                for k in range(r.record_info(rec)["n_frames"]):
                    r.update(rec, k)
                    r.frame(rec, k)
    except Exception:
        pass
    try:
        mrec.validate(path)
    except Exception:
        pass
    print("done", i, flush=True)
"""


def _python_entry_points(files, python, timeout, nolock=False):
    """loaderx.mrec.Reader and validate over ``files`` in one child at a
    time; a child killed by a signal is a crash on the file it had started.
    ``nolock`` opens the Reader without LMDB's lock file, so nothing is
    mapped after the file's pages. Returns {index: (signal or 'timeout')}."""
    env = dict(os.environ, MREC_DAMAGE_NOLOCK="1" if nolock else "0")
    bad, todo = {}, list(range(len(files)))
    while todo:
        feed = "".join(f"{i} {files[i]}\n" for i in todo)
        try:
            proc = subprocess.run([python, "-c", _CHILD], input=feed, capture_output=True, text=True,
                                  timeout=timeout, env=env)
            out, rc = proc.stdout, proc.returncode
        except subprocess.TimeoutExpired as e:
            out = e.stdout if isinstance(e.stdout, str) else (e.stdout or b"").decode()
            rc = "timeout"
        done = {int(l.split()[1]) for l in out.splitlines() if l.startswith("done ")}
        started = [int(l.split()[1]) for l in out.splitlines() if l.startswith("start ")]
        if rc == 0:
            break
        culprit = started[-1] if started and started[-1] not in done else todo[0]
        bad[culprit] = rc if rc == "timeout" else f"signal {-rc}" if rc < 0 else f"exit {rc}"
        todo = [i for i in todo if i not in done and i != culprit]
    return bad


def _zr_entry_points(files, zr, timeout):
    """``zr mrec info`` and ``zr mrec validate`` on each file. Returns
    {index: [what crashed]}."""
    bad = {}
    env = dict(os.environ, ZR_MREC_VALIDATE_TIMEOUT=str(timeout))
    for i, f in enumerate(files):
        for sub in ("info", "validate"):
            try:
                p = subprocess.run([zr, "mrec", sub, f], capture_output=True, text=True, timeout=timeout + 30,
                                   env=env)
            except subprocess.TimeoutExpired:
                bad.setdefault(i, []).append(f"zr mrec {sub}: timeout")
                continue
            if p.returncode < 0:
                bad.setdefault(i, []).append(f"zr mrec {sub}: signal {-p.returncode}")
            elif "crashed with" in p.stderr or "timed out" in p.stderr:
                bad.setdefault(i, []).append(f"zr mrec {sub}: {p.stderr.strip()}")
    return bad


def run_entry_points(copies, zr, python=sys.executable, timeout=60, nolock=False):
    """Every entry point over ``copies`` (from damaged_copies); ``nolock``
    for the Reader as in _python_entry_points. Returns
    {"files": n, "crashes": [(path, offset, what, mask, entry point, how)],
    "by_target": {what: n}}."""
    files = [c[0] for c in copies]
    crashes = []
    for i, how in _python_entry_points(files, python, timeout, nolock).items():
        crashes.append((*copies[i], "loaderx.mrec", how))
    if zr:
        for i, hows in _zr_entry_points(files, zr, timeout).items():
            crashes += [(*copies[i], "zr", h) for h in hows]
    by_target = {}
    for c in copies:
        by_target[c[2]] = by_target.get(c[2], 0) + 1
    return {"files": len(files), "crashes": crashes, "by_target": by_target}


if __name__ == "__main__":
    # python3 mrec_damage.py FILE N [SEED]: N damaged copies of FILE through
    # every entry point (zr: $ZR_BIN, else the one on PATH)
    src, n = sys.argv[1], int(sys.argv[2])
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    zr = os.environ.get("ZR_BIN") or "zr"
    with tempfile.TemporaryDirectory() as d:
        res = run_entry_points(damaged_copies(src, d, n, seed), zr)
    crashed = {}
    for c in res["crashes"]:
        crashed[c[2]] = crashed.get(c[2], 0) + 1
    print(json.dumps({"files": res["files"], "crashes": len(res["crashes"]),
                      "crashes_by_target": crashed, "flips_by_target": res["by_target"]}, indent=1))
    for c in res["crashes"]:
        print("CRASH", *c[1:])
    sys.exit(1 if res["crashes"] else 0)
