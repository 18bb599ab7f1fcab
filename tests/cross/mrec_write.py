"""The mrec part of the cross-language test: Python writes the reference
collection, and compares the collections Lua and Go wrote of the same
content with it, every LMDB key and value byte for byte (read with py-lmdb,
independent of libzmrec), then reads each back with loaderx.mrec and checks
it with validate (libzmrec's every rule).

    python3 mrec_write.py write OUT.mrec.lmdb
    python3 mrec_write.py compare REF.mrec.lmdb OTHER.mrec.lmdb...

The content (the same in tests/cross/mrec.lua and the Go crosscheck's
mrec writer): a force field, an index column, a record with a system
(string columns with a null entry, validity masks, precision, a box, typed
meta, block attributes) and two trajectory frames (step, time, box, meta
typed by the schema, NaN included), and a record with a trajectory of zero
frames.
"""

import sys

import lmdb
import numpy as np

from loaderx import mrec

SCHEMA = {"blocks": {"coords": {"columns": {"pos": {"dtype": "f64", "trailing": [3]}}}},
          "meta": {"energy": {"dtype": "f64", "fill": 0.0}}}


def box(scale, periodic):
    return {"vectors": np.diag([10.0, 11.0, 12.0]) * scale, "origin": [0.5, 0.0, -0.5],
            "boundary": periodic, "cell_defined": True}


def write(path):
    w = mrec.Writer(path, units={"length": "angstrom"}, schema=SCHEMA)
    w.set_ff({"kind": "lj", "eps": 0.5})
    atoms = mrec.Block({"element": ["O", "H", "H"], "tag": ["a", "b\"\\\u00e9", None],
                        "x": np.array([0.1, -1.25, 3.0]),
                        "charge": np.ma.masked_array([-0.8, 0.4, 0.4], mask=[False, True, False])},
                       attributes={"note": "water"}, precision={"x": 2.0 ** -10})
    system = {"blocks": {"atoms": atoms},
              "meta": {"cell3": [1.0, 2.0, 3.0], "charge": 0, "label": "w\u00e4ter"},
              "meta_types": {"cell3": "f64x3"}, "box": box(1.0, (True, True, False))}
    frames = [{"step": 10 * (k + 1), "time": 0.5 * (k + 1),
               "blocks": {"coords": {"pos": np.arange(9, dtype=np.float64).reshape(3, 3) + 10 * k}},
               "meta": {"energy": [-1.5, float("nan")][k]}, "box": box(1.0 + k, (True, True, False))}
              for k in range(2)]
    w.add_record({"name": "water"}, system, frames)
    w.add_record({"i": 1}, trajectory=True)
    w.set_index({"weight": np.array([1.0, 2.0])})
    w.commit()


def items(path):
    env = lmdb.open(path, subdir=False, readonly=True, lock=False)
    with env.begin() as txn:
        out = dict(txn.cursor())
    env.close()
    return out


def compare(ref, others):
    want = items(ref)
    status = 0
    for path in others:
        got = items(path)
        bad = sorted(k for k in set(want) | set(got) if want.get(k) != got.get(k))
        if bad:
            print(f"cross: mrec: {path} differs from Python's in {len(bad)} keys: {bad[:5]}", file=sys.stderr)
            status = 1
            continue
        mrec.validate(path)
        r = mrec.Reader(path)
        assert r.frame(0, 1)["meta"]["energy"] != r.frame(0, 1)["meta"]["energy"]  # NaN
        assert list(r.system(0)["blocks"]["atoms"].columns["tag"].data) == ["a", "b\"\\\u00e9", None]
        r.close()
        print(f"cross: mrec: {len(want)} keys identical, validated: {path}")
    return status


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(sys.argv[2])
    else:
        sys.exit(compare(sys.argv[2], sys.argv[3:]))
