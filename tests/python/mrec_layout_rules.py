"""An independent reading of an mrec-lmdb file by the public reference
layout's documented rules (its LMDB binding chapter, its canonical
vocabulary, its sequence-schema and collection rules), written for these
tests with py-lmdb, struct, json and numpy only: nothing of loaderx.

``read(path)`` returns the collection's logical content or raises
``LayoutRefusal`` naming the broken rule: what a conforming reader of the
layout refuses, so a file this accepts is one such a reader takes, and the
content it returns is what such a reader hands back (frames resolved by
carry-forward, declared fills materialized).
"""
import json
import math
import struct

import lmdb
import numpy as np

DTYPES = {"f64": "<f8", "i8": "<i1", "i16": "<i2", "i32": "<i4", "i64": "<i8", "u8": "<u1", "u16": "<u2",
          "u32": "<u4", "u64": "<u8", "bool": "?", "c64": "<c8", "c128": "<c16", "string": None}
META_TAGS = {"bool", "i32", "i64", "u32", "u64", "f64", "string", "json", "bool3", "i32x3", "i64x3", "u32x3",
             "u64x3", "f64x3", "f64x6", "f64x9"}
CANONICAL = {
    **dict.fromkeys("x y z vx vy vz fx fy fz charge mass quatw quati quatj quatk mux muy muz axis_x axis_y "
                    "axis_z occupancy b_factor".split(), "f64"),
    **dict.fromkeys("id atomic_number type_id mol_id res_id atomi atomj atomk atoml atomm ibead bond_type "
                    "bond_number atom_map".split(), "u64"),
    "formal_charge": "i64", "ix": "i32", "iy": "i32", "iz": "i32",
    **dict.fromkeys("free is_14 exclude_14".split(), "bool"),
    **dict.fromkeys("element type name res_name bead_type chain icode altloc style".split(), "string"),
}
CANONICAL_META = {"pe", "ke", "etotal", "temp", "press", "volume"}
RESERVED_INDEX = {"first_frame", "n_frames", "n_atoms", "has_trajectory"}
RESERVED_BLOCKS = {"step", "time", "meta", "box"}
RESERVED_COLUMNS = {"offset", "step_index", "_validity"}


class LayoutRefusal(ValueError):
    pass


def _need(cond, msg):
    if not cond:
        raise LayoutRefusal(msg)


def key(prefix, n):
    return prefix + int(n).to_bytes(8, "big")


def typed(tag, v, what):
    """A typed-JSON value of ``tag`` -> Python value (refuses other forms)."""
    if tag == "json":
        return v
    base, n = tag, 1
    for w in ("x3", "x6", "x9", "3"):
        if tag.endswith(w):
            base, n = tag[: -len(w)], int(w[-1])
            break
    if n > 1:
        _need(isinstance(v, list) and len(v) == n, f"{what}: a {tag} value is {n} elements, got {v!r}")
        return [typed(base, x, what) for x in v]
    if base == "bool":
        _need(isinstance(v, bool), f"{what}: not a bool: {v!r}")
        return v
    if base == "string":
        _need(isinstance(v, str), f"{what}: not a string: {v!r}")
        return v
    if base == "f64":
        if isinstance(v, str):
            _need(v in ("NaN", "Infinity", "-Infinity"), f"{what}: not an f64: {v!r}")
            return float(v.replace("Infinity", "inf"))
        _need(isinstance(v, (int, float)) and not isinstance(v, bool), f"{what}: not an f64: {v!r}")
        return float(v)
    _need(not isinstance(v, (bool, float)), f"{what}: a {base} is an integer, got {v!r}")
    if isinstance(v, str):
        _need(v == str(int(v)), f"{what}: not a decimal integer string: {v!r}")
        v = int(v)
    _need(isinstance(v, int), f"{what}: not an integer: {v!r}")
    bits = int(base[1:])
    lo, hi = (0, 2 ** bits - 1) if base[0] == "u" else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    _need(lo <= v <= hi, f"{what}: {v} outside {base}")
    return v


def decode(value, what):
    """Frame bytes -> (header, {block: {column: array or list}}, {block: {column: mask}})."""
    value = bytes(value)
    _need(len(value) >= 8 and value[:4] == b"MRF1", f"{what}: magic {value[:4]!r}, expected b'MRF1'")
    (hlen,) = struct.unpack_from("<I", value, 4)
    hdr = json.loads(value[8:8 + hlen].decode("utf-8"))
    payload = (8 + hlen + 7) // 8 * 8
    blocks, masks = {}, {}
    for bname, be in hdr["blocks"].items():
        cols, bm = {}, {}
        for cname, ce in be["columns"].items():
            dt = ce["dtype"]
            _need(dt in DTYPES, f"{what}: {bname}/{cname}: dtype {dt!r} outside the closed set")
            shape = tuple(int(n) for n in ce["shape"])
            _need(len(shape) >= 1 and shape[0] == be["count"], f"{what}: {bname}/{cname}: rows != count")
            if dt == "string":
                cols[cname] = list(ce["values"])
                _need(len(cols[cname]) == math.prod(shape), f"{what}: {bname}/{cname}: values count")
            else:
                off = int(ce["offset"])
                _need(off % 8 == 0, f"{what}: {bname}/{cname}: offset {off} is not a multiple of 8")
                n = math.prod(shape) * np.dtype(DTYPES[dt]).itemsize
                _need(payload + off + n <= len(value), f"{what}: {bname}/{cname}: buffer runs past the value")
                cols[cname] = np.frombuffer(value, DTYPES[dt], math.prod(shape), payload + off).reshape(shape)
            if "validity" in ce:
                off = int(ce["validity"])
                _need(off % 8 == 0, f"{what}: {bname}/{cname}: validity offset not a multiple of 8")
                m = np.frombuffer(value, "?", shape[0], payload + off)
                if not m.all():  # an all-true mask is no mask
                    bm[cname] = m
            # the vocabulary: one dtype and shape wherever a key appears
            want = CANONICAL.get(cname)
            _need(want is None or (dt == want and len(shape) == 1),
                  f"{what}: column {cname!r} is canonical: {want}[N] wherever it appears, found "
                  f"{dt}[N]{''.join(f'[{n}]' for n in shape[1:])}")
        blocks[bname] = cols
        masks[bname] = bm
    return hdr, blocks, masks


def _box_rule(box, what):
    if box is None:
        return
    for k in ("vectors", "origin", "boundary", "cell_defined"):
        _need(k in box, f"{what}: box.{k} is missing")
    _need(np.shape(box["vectors"]) == (3, 3) and len(box["origin"]) == 3 and len(box["boundary"]) == 3,
          f"{what}: the cell is three-dimensional")
    _need(box["cell_defined"] or not any(box["boundary"]),
          f"{what}: an undefined cell is periodic on no axis; boundary {box['boundary']} says otherwise")


def read(path):
    """The collection at ``path`` as the layout's rules read it."""
    env = lmdb.open(str(path), subdir=False, readonly=True, lock=False)
    try:
        with env.begin() as txn:
            raw = txn.get(b"meta")
            _need(raw is not None, "no 'meta' key: not a committed collection")
            meta = json.loads(bytes(raw))
            _need(meta.get("layout") == "mrec-lmdb", f"layout {meta.get('layout')!r}")
            _need(type(meta.get("layout_version")) is int and meta["layout_version"] == 1, "layout_version")
            coll = meta["collection"]
            _need(isinstance(coll.get("units"), dict), "collection.units is required (a dict)")
            mv = coll.get("molrec_version")
            _need(mv is None or (type(mv) is int and 1 <= mv <= 2), f"molrec_version {mv!r}")
            schema = meta["sequence_schema"]
            smeta = schema.get("meta", {})
            for k, d in smeta.items():
                _need(isinstance(d, dict) and "dtype" in d, f"meta.{k}.dtype Field required")
                _need(d["dtype"] in META_TAGS, f"meta.{k}.dtype {d['dtype']!r} outside the 16 tags")
                _need(k not in CANONICAL_META or d["dtype"] == "f64", f"per-step key {k!r} is canonical: f64")
                if "fill" in d:
                    _need(d["fill"] is not None or d["dtype"] == "json", f"meta.{k}: null fill on a non-json key")
                    if d["fill"] is not None:
                        typed(d["dtype"], d["fill"], f"meta.{k}.fill")
            sblocks = schema.get("blocks", {})
            for b, bd in sblocks.items():
                _need(b not in RESERVED_BLOCKS, f"block {b!r} is reserved")
                for c, cd in bd.get("columns", {}).items():
                    _need(c not in RESERVED_COLUMNS, f"column {c!r} is reserved")
                    _need(cd.get("dtype") in DTYPES, f"blocks.{b}.columns.{c}.dtype")
                    t = cd.get("trailing", [])
                    _need(isinstance(t, list) and all(type(n) is int and n >= 0 for n in t),
                          f"blocks.{b}.columns.{c}.trailing")
                    want = CANONICAL.get(c)
                    _need(want is None or (cd["dtype"] == want and not t),
                          f"column {c!r} is canonical: {want}[N], declared {cd['dtype']}{t}")
            declared = {b: {c: (cd["dtype"], list(cd.get("trailing", []))) for c, cd in bd.get("columns", {}).items()}
                        for b, bd in sblocks.items()}
            nullable = {b: {c for c, cd in bd.get("columns", {}).items() if cd.get("nullable")}
                        for b, bd in sblocks.items()}

            ihdr, iblocks, imasks = decode(txn.get(b"index"), "index")
            rec = iblocks["records"]
            R, F = int(meta["n_records"]), int(meta["n_frames"])
            _need(ihdr["blocks"]["records"]["count"] == R, "index rows != n_records")
            first = [int(x) for x in rec["first_frame"]]
            counts = [int(x) for x in rec["n_frames"]]
            _need(first == [sum(counts[:r]) for r in range(R)] and sum(counts) == F,
                  "index first_frame is not the prefix sum of n_frames")
            flags = [bool(x) for x in rec.get("has_trajectory", [False] * R)]
            own = {c: v for c, v in rec.items() if c not in RESERVED_INDEX}

            records = []
            for r in range(R):
                rm = txn.get(key(b"r", r))
                rmeta = json.loads(bytes(rm)) if rm is not None else {}
                _need(isinstance(rmeta, dict), f"r/{r}: not a JSON object")
                system = None
                sv = txn.get(key(b"s", r))
                if sv is not None:
                    shdr, sb, sm = decode(sv, f"s/{r}")
                    types = shdr.get("meta_types") or {}
                    smv = {k: typed(types[k], v, f"s/{r} meta.{k}") if k in types else v
                           for k, v in shdr.get("meta", {}).items()}
                    _box_rule(shdr.get("box"), f"s/{r}")
                    system = {"blocks": sb, "masks": sm, "meta": smv, "box": shdr.get("box"),
                              "counts": {b: be["count"] for b, be in shdr["blocks"].items()}}
                traj = None
                if counts[r] or flags[r]:
                    frames, state, steps, timed, cells = [], {}, [], [], set()
                    for j in range(counts[r]):
                        fv = txn.get(key(b"f", first[r] + j))
                        _need(fv is not None, f"record {r}: frame {first[r] + j} is missing")
                        fhdr, fb, fm = decode(fv, f"f/{first[r] + j}")
                        for b, cols in fb.items():
                            _need(b in declared, f"frame {first[r] + j} carries undeclared block {b!r}")
                            _need(fhdr["blocks"][b].get("structural_shape") == sblocks[b].get("structural_shape"),
                                  f"block {b!r}: structural shape differs from the declaration")
                            lay = {c: (ce["dtype"], list(ce["shape"][1:]))
                                   for c, ce in fhdr["blocks"][b]["columns"].items()}
                            _need(lay == declared[b], f"block {b!r} presents {lay} at ordinal {j}, declared "
                                                      f"{declared[b]}")
                            masked = sorted(set(fm[b]) - nullable[b])
                            _need(not masked, f"frame {j} masks {masked} of block {b!r}, declared non-nullable")
                            if system is not None and b in system["blocks"]:
                                scount, count = system["counts"][b], fhdr["blocks"][b]["count"]
                                _need(count == scount, f"record {r}: trajectory block {b!r} has {count} rows at "
                                                       f"ordinal {j}, system block {scount}")
                                shared = set(cols) & set(system["blocks"][b])
                                _need(not shared, f"record {r}: columns {sorted(shared)} of block {b!r} are in "
                                                  "both system and trajectory")
                        fmeta = fhdr.get("meta", {})
                        extra = sorted(set(fmeta) - set(smeta))
                        _need(not extra, f"frame {j} carries per-step meta {extra} never declared")
                        done = {}
                        for k, d in smeta.items():
                            if k in fmeta:
                                done[k] = typed(d["dtype"], fmeta[k], f"f/{first[r] + j} meta.{k}")
                            else:
                                _need("fill" in d, f"frame {j} omits declared meta key {k!r} without a fill")
                                done[k] = typed(d["dtype"], d["fill"], "fill") if d["fill"] is not None else None
                        _need(fhdr.get("step") is not None, f"frame {j}: every frame states a step")
                        steps.append(typed("i64", fhdr["step"], "step"))
                        timed.append(fhdr.get("time") is not None)
                        if fhdr.get("box") is not None:
                            _box_rule(fhdr["box"], f"f/{first[r] + j}")
                            cells.add(bool(fhdr["box"].get("cell_defined", True)))
                            state["__box__"] = fhdr["box"]
                        state.update(fb)
                        frames.append({"blocks": {b: dict(c) for b, c in state.items() if b != "__box__"},
                                       "meta": done, "step": steps[-1],
                                       "time": typed("f64", fhdr["time"], "time") if timed[-1] else None,
                                       "box": state.get("__box__")})
                    _need(all(b > a for a, b in zip(steps, steps[1:])), f"record {r}: steps {steps} not increasing")
                    _need(len(set(timed)) <= 1, f"record {r}: time is all-or-nothing")
                    _need(len(cells) <= 1, f"record {r}: cell updates disagree on cell_defined")
                    traj = {"frames": frames}
                _need(system is not None or traj is not None, f"record {r} has neither system nor trajectory")
                records.append({"meta": rmeta, "system": system, "trajectory": traj})
            return {"meta": meta, "index": own, "records": records}
    finally:
        env.close()

