"""mrec-lmdb collections: many molecular records in one LMDB file.

A collection holds, per record, a meta document (a JSON object), an
optional *system* frame and an optional sparse *trajectory*: frame ``k``
stores only the blocks that changed, the rest carries forward (never across
records). The bytes layout is libzmrec's (see docs/MREC.md); this module
is its numpy face plus importers built on ASE.

Frames are plain dicts::

    {"blocks": {"atoms": {"element": ["O", "H", "H"],          # string column
                          "x": np.array([...]),                   # f64 column
                          "charge": np.ma.masked_invalid(...)}},  # nullable
     "meta": {"energy": -76.4}, "meta_types": {"energy": "f64"},   # system
     "step": 0, "time": 0.0,                                        # updates
     "box": {"vectors": 3x3, "origin": [3], "boundary": [3 bools],
             "cell_defined": True}}

A box's ``vectors`` hold the lattice vectors as **columns** (the layout's
convention): ``vectors[:, 0]`` is a, ``vectors[:, 1]`` b, ``vectors[:, 2]``
c, in the collection's length unit. ASE's ``atoms.cell`` holds them as
rows, so the ASE boundary transposes (:func:`import_files`,
:func:`to_atoms`). An undefined cell (``cell_defined`` False) is periodic
on no axis and its vectors are the identity (written so, read so).

A block value may also be a :class:`Block` (count, targets, attributes,
structural_shape, per-column precision). Column dtypes are the closed set
f64 i8 i16 i32 i64 u8 u16 u32 u64 bool string c64 c128: numpy float32 /
float16 are refused (cast to float64 explicitly). A masked array makes a
nullable column (a row is null when any of its elements is masked).

Errors: ValueError for refused input, :class:`loaderx.errors.CorruptStoreError`
(an OSError) for a file that breaks a rule (the message names the key and
the rule), :class:`loaderx.errors.NotAStoreError` for a file that is not a
collection, NotImplementedError for versions this library does not read.

Command line: ``python3 -m loaderx.mrec import FILE... [--format NAME]
[--units STYLE] -o OUT.mrec.lmdb`` (ASE format names, guessed when left
out; LAMMPS unit style names, ``ase`` or ``unknown``). ``zr mrec import``
runs this importer: it needs this package and ASE in the Python that runs
it (``$ZR_PYTHON``; the ``zr`` a pip install puts beside that Python sets
it to its own interpreter).

Loader streams: :func:`to_zrecord` converts a collection into zrecord
stores; :func:`lmdb_streams` reads the same items straight from LMDB.
"""

import errno
import json
import math
import os
import sys
import time as _time

import numpy as np

from . import _zr
from ._closing import Closing as _Closing

__all__ = ["Block", "Writer", "Reader", "validate", "round_precision",
           "import_files", "to_atoms", "to_zrecord", "lmdb_streams", "LmdbStream", "units_for",
           "DTYPES", "TAGS"]

SYSTEM, UPDATE, INDEX, FF = 0, 1, 2, 3

#: column dtype name -> numpy dtype (None for string)
DTYPES = {"f64": np.dtype("<f8"), "i8": np.dtype("i1"), "i16": np.dtype("<i2"),
          "i32": np.dtype("<i4"), "i64": np.dtype("<i8"), "u8": np.dtype("u1"),
          "u16": np.dtype("<u2"), "u32": np.dtype("<u4"), "u64": np.dtype("<u8"),
          "bool": np.dtype("?"), "string": None, "c64": np.dtype("<c8"),
          "c128": np.dtype("<c16")}
_NP2NAME = {v: k for k, v in DTYPES.items() if v is not None}

TAGS = ("bool", "i32", "i64", "u32", "u64", "f64", "string", "json", "bool3",
        "i32x3", "i64x3", "u32x3", "u64x3", "f64x3", "f64x6", "f64x9")
_VLEN = {"bool3": 3, "i32x3": 3, "i64x3": 3, "u32x3": 3, "u64x3": 3,
         "f64x3": 3, "f64x6": 6, "f64x9": 9}
_TWO53 = 2 ** 53


def round_precision(x, precision):
    """The layout's precision rule on one float (ties to even)."""
    return _zr.zmr_round_precision(float(x), float(precision))


# ----------------------------------------------------------- typed JSON

def _scalar_kind(tag):
    base = tag[:-2] if tag in _VLEN else tag
    return {"bool3": "bool"}.get(tag, base)


def _enc_scalar(kind, v):
    if kind == "bool":
        if not isinstance(v, (bool, np.bool_)):
            raise ValueError(f"bool value expected, got {v!r}")
        return bool(v)
    if kind in ("i32", "i64", "u32", "u64"):
        if isinstance(v, (float, np.floating)):
            raise ValueError(f"a real ({v!r}) where {kind} is declared is refused, not rounded")
        v = int(v)
        return v if abs(v) <= _TWO53 else str(v)
    if kind == "f64":
        v = float(v)
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "Infinity" if v > 0 else "-Infinity"
        return v
    if kind == "string":
        return str(v)
    return v


def typed_encode(tag, value):
    """A Python value -> its typed-JSON form for ``tag``."""
    if tag not in TAGS:
        raise ValueError(f"meta type tag {tag!r} is not one of {TAGS}")
    if tag == "json":
        return value
    if tag in _VLEN:
        vals = list(np.asarray(value).ravel()) if not isinstance(value, (list, tuple)) else list(value)
        if len(vals) != _VLEN[tag]:
            raise ValueError(f"{tag} needs {_VLEN[tag]} elements, got {len(vals)}")
        return [_enc_scalar(_scalar_kind(tag), x) for x in vals]
    return _enc_scalar(tag, value)


def _dec_scalar(kind, v):
    if kind == "f64":
        if isinstance(v, str):
            return {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}[v]
        return float(v)
    if kind in ("i32", "i64", "u32", "u64"):
        return int(v)
    return v


def typed_decode(tag, v):
    """Typed JSON -> Python value (vectors as tuples)."""
    if tag in _VLEN:
        return tuple(_dec_scalar(_scalar_kind(tag), x) for x in v)
    if tag == "json":
        return v
    return _dec_scalar(tag, v)


def infer_tag(value):
    """Untagged system meta: bool / i64 / u64 / f64 / string, else json."""
    if isinstance(value, (bool, np.bool_)):
        return "bool"
    if isinstance(value, (int, np.integer)):
        return "i64" if -2 ** 63 <= int(value) < 2 ** 63 else "u64"
    if isinstance(value, (float, np.floating)):
        return "f64"
    if isinstance(value, str):
        return "string"
    return "json"


def _dumps(obj):
    return json.dumps(obj, separators=(",", ":"), allow_nan=False, ensure_ascii=False)


# ----------------------------------------------------------- frames

class Block:
    """A block with its entry fields. ``columns``: {name: array-like};
    ``count`` defaults to the first column's length (0 without columns);
    ``precision``: {f64 column: p} (system frames; trajectories declare it
    in the sequence_schema)."""

    def __init__(self, columns=None, count=None, targets=None, attributes=None,
                 structural_shape=None, precision=None):
        self.columns = dict(columns or {})
        self.count = count
        self.targets = targets
        self.attributes = attributes
        self.structural_shape = structural_shape
        self.precision = dict(precision or {})

    def __repr__(self):
        return f"Block(count={self.count}, columns={list(self.columns)})"


def _add_column(h, bname, cname, value, precision):
    mask = None
    if isinstance(value, np.ma.MaskedArray):
        m = np.ma.getmaskarray(value)
        mask = ~(m.reshape(m.shape[0], -1).any(axis=1)) if m.ndim else None
        value = value.data
    if isinstance(value, (list, tuple)) or (isinstance(value, np.ndarray) and value.dtype.kind in "OUS"):
        arr = np.asarray(value, dtype=object)
        flat = arr.ravel().tolist()
        if mask is None and any(x is None for x in flat):
            rows = arr.reshape(arr.shape[0], -1) if arr.ndim else arr
            mask = np.array([all(x is not None for x in r) for r in rows], dtype=bool)
        vals = [None if x is None else str(x) for x in flat]
        validity = None if mask is None else np.ascontiguousarray(mask, dtype=np.uint8)
        _zr.zmr_py_add_string_column(h, bname, cname, list(arr.shape), _dumps(vals), validity)
        return
    arr = np.asarray(value)
    if arr.dtype.kind == "f" and arr.dtype.itemsize != 8:
        raise ValueError(f"column {bname}/{cname}: dtype {arr.dtype.name} is not in the set "
                         "(floats are f64 only; cast with .astype(np.float64))")
    dt = arr.dtype.newbyteorder("<") if arr.dtype.byteorder == ">" else arr.dtype
    name = _NP2NAME.get(np.dtype(dt.str if dt.kind != "b" else "?"))
    if name is None:
        raise ValueError(f"column {bname}/{cname}: dtype {arr.dtype} is not in the column set "
                         f"({' '.join(DTYPES)})")
    arr = np.ascontiguousarray(arr, dtype=DTYPES[name])
    if arr.ndim == 0:
        raise ValueError(f"column {bname}/{cname}: a column needs at least one dimension (rows)")
    validity = None if mask is None else np.ascontiguousarray(mask, dtype=np.uint8)
    _zr.zmr_py_add_column(h, bname, cname, name, list(arr.shape), arr, validity,
                          float(precision or 0.0))


def _make_frame(kind, d):
    """Build a native frame from a frame dict; the caller frees it."""
    h = _zr.zmr_py_frame_new(kind)
    try:
        for bname, blk in (d.get("blocks") or {}).items():
            if not isinstance(blk, Block):
                blk = Block(columns=blk)
            count = blk.count
            if count is None:
                count = len(next(iter(blk.columns.values()))) if blk.columns else 0
            _zr.zmr_frame_add_block(h, bname, int(count))
            for field in ("structural_shape", "targets", "attributes"):
                v = getattr(blk, field)
                if v is not None:
                    _zr.zmr_frame_set_block_json(h, bname, field, _dumps(v))
            for cname, value in blk.columns.items():
                _add_column(h, bname, cname, value, blk.precision.get(cname))
        meta = d.get("meta") or {}
        if kind == FF:
            _zr.zmr_frame_set_meta_document(h, _dumps(meta))
        else:
            types = d.get("meta_types") or {}
            for k, v in meta.items():
                tag = types.get(k) or infer_tag(v)
                _zr.zmr_py_set_meta(h, k, tag, _dumps(typed_encode(tag, v)))
        if d.get("step") is not None:
            _zr.zmr_frame_set_step(h, int(d["step"]))
        if d.get("time") is not None:
            _zr.zmr_frame_set_time(h, float(d["time"]))
        box = d.get("box")
        if box is not None:
            _zr.zmr_py_set_box(h, np.asarray(box["vectors"], dtype=float).ravel().tolist(),
                               list(box.get("origin", (0.0, 0.0, 0.0))),
                               list(box.get("boundary", (False, False, False))),
                               bool(box.get("cell_defined", True)))
        return h
    except BaseException:
        _zr.zmr_frame_free(h)
        raise


def _read_frame(h, schema_meta=None):
    """Native frame -> frame dict (copies); frees h."""
    if h is None:
        return None
    try:
        hdr = json.loads(_zr.zmr_py_frame_header(h))
        blocks = {}
        for bname, be in hdr["blocks"].items():
            cols = {}
            for cname, ce in be["columns"].items():
                data, validity = _zr.zmr_py_frame_column(h, bname, cname)
                shape = tuple(ce["shape"])
                if ce["dtype"] == "string":
                    arr = np.empty(len(ce["values"]), dtype=object)
                    arr[:] = ce["values"]
                    arr = arr.reshape(shape)
                else:
                    arr = np.frombuffer(data, dtype=DTYPES[ce["dtype"]]).reshape(shape).copy()
                if validity is not None:
                    valid = np.frombuffer(validity, dtype=np.uint8).astype(bool)
                    m = np.broadcast_to((~valid).reshape((-1,) + (1,) * (arr.ndim - 1)), arr.shape)
                    arr = np.ma.MaskedArray(arr, mask=m.copy())
                cols[cname] = arr
            if any(k in be for k in ("targets", "attributes")) or be.get("structural_shape") is not None \
                    or any("precision" in ce for ce in be["columns"].values()) or not cols:
                blocks[bname] = Block(cols, count=be["count"], targets=be.get("targets"),
                                      attributes=be.get("attributes"),
                                      structural_shape=be.get("structural_shape"),
                                      precision={c: ce["precision"] for c, ce in be["columns"].items()
                                                 if "precision" in ce})
            else:
                blocks[bname] = cols
        out = {"blocks": blocks}
        types = dict(hdr.get("meta_types") or {})
        if schema_meta:
            for k, decl in schema_meta.items():
                types.setdefault(k, decl_tag(decl))
        if "meta_types" in hdr:
            out["meta_types"] = dict(hdr["meta_types"])
        meta = {}
        for k, v in hdr.get("meta", {}).items():
            meta[k] = typed_decode(types.get(k) or _infer_json_tag(v), v) if "meta_types" in hdr or schema_meta else v
        out["meta"] = meta
        has_step, step, has_time, t, box = _zr.zmr_py_frame_scalars(h)
        if has_step:
            out["step"] = step
        if has_time:
            out["time"] = t
        if box is not None:
            out["box"] = {"vectors": np.array(box[0]).reshape(3, 3), "origin": np.array(box[1]),
                          "boundary": tuple(box[2]), "cell_defined": box[3]}
        return out
    finally:
        _zr.zmr_frame_free(h)


def decl_tag(decl):
    """The tag of a ``sequence_schema.meta`` declaration: ``{"dtype": tag,
    "fill": value}`` (the layout's form), or the earlier ``{"type": tag}``
    and bare tag string."""
    if isinstance(decl, str):
        return decl
    return decl["dtype"] if "dtype" in decl else decl["type"]


def _infer_json_tag(v):
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "i64" if v < 2 ** 63 else "u64"
    if isinstance(v, float):
        return "f64"
    if isinstance(v, str):
        return "string"
    return "json"


def encode_frame(frame, kind="system"):
    """Frame dict -> frame bytes (for tests and tools)."""
    h = _make_frame({"system": SYSTEM, "update": UPDATE, "index": INDEX, "ff": FF}[kind], frame)
    try:
        return _zr.zmr_py_frame_encode(h)
    finally:
        _zr.zmr_frame_free(h)


def decode_frame(value, kind="system", what="frame"):
    """Frame bytes -> frame dict, with every check of the reader."""
    return _read_frame(_zr.zmr_py_frame_decode(value, {"system": SYSTEM, "update": UPDATE,
                                                       "index": INDEX, "ff": FF}[kind], what))


# ----------------------------------------------------------- writer

def _typed_fills(schema):
    """``schema`` with every per-step fill in its tag's typed JSON form
    (a float NaN as "NaN", an integer beyond 2^53 as a decimal string), so
    a fill given as a Python value is declared as the layout writes it."""
    meta = schema.get("meta") if isinstance(schema, dict) else None
    if not isinstance(meta, dict):
        return schema
    out = {}
    for key, decl in meta.items():
        if isinstance(decl, dict) and "fill" in decl and decl["fill"] is not None:
            tag = decl_tag(decl)
            if tag in TAGS and tag != "json":
                try:
                    decl = {**decl, "fill": typed_encode(tag, decl["fill"])}
                except (TypeError, ValueError) as e:
                    raise ValueError(f"schema['meta'][{key!r}]: fill {decl['fill']!r} is not a {tag} value: "
                                     f"{e}") from None
        out[key] = decl
    return {**schema, "meta": out}


class Writer:
    """Create a collection at ``path`` (FileExistsError if it exists).

    ``units``: {"length": "angstrom", ...}; ``collection``: more collection
    fields; ``schema``: the sequence_schema ({"blocks": {...}, "meta":
    {key: {"dtype": tag, "fill": value}}}; the earlier forms
    {"type": tag, ...} and a bare tag are accepted and written as
    {"dtype": ...}). Nothing is a collection
    until :meth:`commit` (also run by leaving a ``with`` block without an
    exception; an exception aborts)."""

    def __init__(self, path, units=None, schema=None, collection=None, molrec_version=None):
        coll = dict(collection or {})
        if units is not None:
            coll["units"] = units
        if molrec_version is not None:
            coll["molrec_version"] = molrec_version
        self.schema = schema or {}
        self._schema_meta = dict(self.schema.get("meta") or {})
        self._h = _zr.zmr_py_writer_create(os.fspath(path), _dumps(coll), _dumps(_typed_fills(self.schema)))
        self.path = os.fspath(path)

    def _w(self):
        if self._h is None:
            raise ValueError("writer is closed")
        return self._h

    def set_ff(self, meta, blocks=None):
        h = _make_frame(FF, {"meta": meta, "blocks": blocks or {}})
        try:
            _zr.zmr_writer_set_ff(self._w(), h)
        finally:
            _zr.zmr_frame_free(h)

    def add_record(self, meta=None, system=None, frames=(), trajectory=None):
        """Append a record; returns its index. ``frames``: iterable of
        update dicts (their meta typed by the schema). ``trajectory``:
        True for a record with a trajectory even when ``frames`` is empty
        (a trajectory of zero frames); None: it has one iff it has frames.
        A record needs a system or a trajectory."""
        w = self._w()
        frames = list(frames)
        if trajectory is False and frames:
            raise ValueError("add_record: trajectory=False with frames")
        sh = _make_frame(SYSTEM, system) if system is not None else None
        try:
            idx = _zr.zmr_py_begin_record(w, _dumps(meta or {}), sh)
        finally:
            if sh is not None:
                _zr.zmr_frame_free(sh)
        if trajectory:
            _zr.zmr_writer_begin_trajectory(w)
        for fr in frames:
            self.add_frame(fr)
        return idx

    def add_frame(self, frame):
        d = dict(frame)
        meta = d.pop("meta", None) or {}
        h = _make_frame(UPDATE, d)
        try:
            for k, v in meta.items():
                decl = self._schema_meta.get(k)
                if decl is None:
                    raise ValueError(f"frame meta key {k!r} is not declared in schema['meta']")
                tag = decl_tag(decl)
                _zr.zmr_py_set_meta(h, k, tag, _dumps(typed_encode(tag, v)))
            _zr.zmr_writer_add_frame(self._w(), h)
        finally:
            _zr.zmr_frame_free(h)

    def set_index(self, columns):
        """The collection's own index columns: {name: column} or a
        :class:`Block` (precision, masks), one row per record (checked at
        commit). The binding's names (first_frame, n_frames, n_atoms,
        has_trajectory) are refused."""
        h = _make_frame(INDEX, {"blocks": {"records": columns}})
        try:
            _zr.zmr_writer_set_index(self._w(), h)
        finally:
            _zr.zmr_frame_free(h)

    def commit(self):
        h, self._h = self._w(), None
        _zr.zmr_writer_commit(h)

    def abort(self):
        if self._h is not None:
            h, self._h = self._h, None
            _zr.zmr_writer_abort(h)

    def __enter__(self):
        return self

    def __exit__(self, et, ev, tb):
        if et is None:
            self.commit()
        else:
            self.abort()

    def __del__(self):
        try:
            self.abort()
        except Exception:
            pass


# ----------------------------------------------------------- reader

def _check_exists(path):
    if not os.path.exists(path):
        raise FileNotFoundError(errno.ENOENT, "no such mrec-lmdb collection", path)


#: The binding's own index columns (Reader.record_info); a collection's
#: own index columns cannot take these names.
INDEX_COLUMNS = ("first_frame", "n_frames", "n_atoms", "has_trajectory")


def _u64_index(what, v, path):
    """A record / frame number as the native side takes it: IndexError
    (not SWIG's OverflowError) for a negative or too large one, TypeError
    for a non-integer; the message names the file."""
    if isinstance(v, (float, np.floating)) or isinstance(v, (bool, np.bool_)) or \
            not isinstance(v, (int, np.integer)):
        raise TypeError(f"{path}: {what} index must be an integer, got {v!r}")
    v = int(v)
    if v < 0:
        raise IndexError(f"{path}: {what} index {v} is negative (indices count from 0; negative indices are not "
                         "supported)")
    if v >= 2 ** 64:
        raise IndexError(f"{path}: {what} index {v} is out of range")
    return v


class Reader(_Closing):
    """Open a collection read-only (``nolock=True`` for read-only media:
    LMDB's MDB_NOLOCK, no writer may run meanwhile).

    The file's pages are mapped, not the map size its writer recorded, so
    many readers of one file fit in one process. A Reader pickles by path
    (and ``nolock``): a spawn or forkserver worker that unpickles one opens
    the file again. Every error names the file."""

    def __init__(self, path, nolock=False):
        self._h = None
        self.path = os.fspath(path)
        self.nolock = bool(nolock)
        _check_exists(self.path)
        self._h = _zr.zmr_py_open(self.path, 1 if nolock else 0)
        self.meta = json.loads(_zr.zmr_meta_json(self._h))
        self.schema = self.meta.get("sequence_schema") or {}
        self._schema_meta = self.schema.get("meta") or {}

    def __reduce__(self):
        if self._h is None:
            raise TypeError(f"{self.path}: cannot pickle a closed Reader")
        return (Reader, (self.path, self.nolock))

    def __repr__(self):
        return f"Reader({self.path!r}, {'closed' if self._h is None else f'{len(self)} records'})"

    def _r(self):
        if self._h is None:
            raise ValueError(f"{self.path}: reader is closed")
        return self._h

    def _rec(self, r):
        return _u64_index("record", r, self.path)

    def _frame(self, r, k):
        return _u64_index(f"record {r}: frame", k, self.path)

    def close(self):
        if self._h is not None:
            h, self._h = self._h, None
            _zr.zmr_close(h)

    def __len__(self):
        return _zr.zmr_n_records(self._r())

    @property
    def n_records(self):
        return len(self)

    @property
    def n_frames(self):
        return _zr.zmr_n_frames(self._r())

    @property
    def molrec_version(self):
        """1 or 2; 0 when the file does not state it."""
        return _zr.zmr_molrec_version(self._r())

    @property
    def units(self):
        return (self.meta.get("collection") or {}).get("units", {})

    def record_info(self, r):
        """{'first_frame', 'n_frames', 'n_atoms', 'has_trajectory'}"""
        a, b, c, d = _zr.zmr_py_record_info(self._r(), self._rec(r))
        return {"first_frame": a, "n_frames": b, "n_atoms": c, "has_trajectory": d}

    def record_meta(self, r, raw=False):
        text = _zr.zmr_py_read_record_meta(self._r(), self._rec(r))
        return text if raw else json.loads(text)

    def system(self, r):
        return _read_frame(_zr.zmr_py_read(self._r(), 0, self._rec(r), 0))

    def update(self, r, k):
        """Frame k of record r as stored (only the blocks that changed)."""
        return _read_frame(_zr.zmr_py_read(self._r(), 1, self._rec(r), self._frame(r, k)), self._schema_meta)

    def frame(self, r, k):
        """Frame k of record r resolved (carry-forward within the record)."""
        return _read_frame(_zr.zmr_py_read(self._r(), 2, self._rec(r), self._frame(r, k)), self._schema_meta)

    def frames(self, r):
        """Every resolved frame of record r, in order (one pass)."""
        state_blocks, box = {}, None
        for k in range(self.record_info(r)["n_frames"]):
            u = self.update(r, k)
            state_blocks.update(u["blocks"])
            box = u.get("box", box)
            out = dict(u)
            out["blocks"] = dict(state_blocks)
            if box is not None:
                out["box"] = box
            yield out

    def ff(self):
        return _read_frame(_zr.zmr_py_read(self._r(), 3, 0, 0))

    @property
    def index_block(self):
        """The collection's own index columns (one row per record) as a
        :class:`Block` keeping their precision; masked columns are
        MaskedArrays. The binding's four (first_frame, n_frames, n_atoms,
        has_trajectory: :meth:`record_info`) are left out. Hand it to
        :meth:`Writer.set_index` to write it again."""
        b = _read_frame(_zr.zmr_py_read(self._r(), 4, 0, 0))["blocks"]["records"]
        cols = b.columns if isinstance(b, Block) else b
        prec = b.precision if isinstance(b, Block) else {}
        own = {k: v for k, v in cols.items() if k not in INDEX_COLUMNS}
        return Block(own, count=len(self), precision={k: p for k, p in prec.items() if k in own})

    @property
    def index(self):
        """{name: column} of the collection's own index columns."""
        return self.index_block.columns


def validate(path, nolock=False):
    """Check every rule of the layout; raises naming the key and the rule
    (FileNotFoundError for a missing path)."""
    path = os.fspath(path)
    _check_exists(path)
    _zr.zmr_validate(path, 1 if nolock else 0)


# ----------------------------------------------------------- ASE importers

_TRAJ_BLOCK = "atoms"


class UsageError(ValueError):
    """A bad importer argument (``zr mrec import`` exits 2 with one line)."""


class FormatError(UsageError):
    """An input format that is unknown, unreadable by ASE, or cannot be
    guessed."""


#: LAMMPS unit styles (https://docs.lammps.org/units.html), as stored in
#: ``collection.units`` with their name under ``"style"``.
LAMMPS_UNITS = {
    "lj": {"style": "lj", "length": "sigma", "energy": "epsilon", "time": "tau", "mass": "mass",
           "force": "epsilon/sigma", "charge": "reduced", "velocity": "sigma/tau"},
    "real": {"style": "real", "length": "angstrom", "energy": "kcal/mol", "time": "fs", "mass": "g/mol",
             "force": "kcal/mol/angstrom", "charge": "e", "velocity": "angstrom/fs"},
    "metal": {"style": "metal", "length": "angstrom", "energy": "eV", "time": "ps", "mass": "g/mol",
              "force": "eV/angstrom", "charge": "e", "velocity": "angstrom/ps"},
    "si": {"style": "si", "length": "m", "energy": "J", "time": "s", "mass": "kg", "force": "N",
           "charge": "C", "velocity": "m/s"},
    "cgs": {"style": "cgs", "length": "cm", "energy": "erg", "time": "s", "mass": "g", "force": "dyne",
            "charge": "statcoulomb", "velocity": "cm/s"},
    "electron": {"style": "electron", "length": "bohr", "energy": "hartree", "time": "fs", "mass": "amu",
                 "force": "hartree/bohr", "charge": "e", "velocity": "bohr/atu"},
    "micro": {"style": "micro", "length": "um", "energy": "pg*um^2/us^2", "time": "us", "mass": "pg",
              "force": "pg*um/us^2", "charge": "pC", "velocity": "um/us"},
    "nano": {"style": "nano", "length": "nm", "energy": "ag*nm^2/ns^2", "time": "ns", "mass": "ag",
             "force": "ag*nm/ns^2", "charge": "e", "velocity": "nm/ns"},
}
#: ASE's own units: what its readers of extxyz / xyz / json / db / gromacs
#: hand out (gromacs nm are converted to angstrom by ASE).
ASE_UNITS = {"style": "ase", "length": "angstrom", "energy": "eV", "mass": "amu",
             "force": "eV/angstrom", "charge": "e"}
UNKNOWN_UNITS = {"style": "unknown"}

#: ASE formats that hand out the file's numbers as they are (ASE's LAMMPS
#: readers assume 'metal', whose length and force factors are 1), so the
#: units are whatever the LAMMPS run used: unknown unless the user says.
_LAMMPS_FORMATS = ("lammps-dump-text", "lammps-dump-binary", "lammps-data")
#: Formats whose readers attach a placeholder SinglePointCalculator with
#: energy=0.0: their energy is never data.
_NO_ENERGY_FORMATS = ("lammps-dump-text", "lammps-dump-binary", "lammps-data")


def units_for(name):
    """The ``collection.units`` document for a ``--units`` name: a LAMMPS
    unit style (lj real metal si cgs electron micro nano), ``ase`` or
    ``unknown``. ValueError otherwise."""
    if name in LAMMPS_UNITS:
        return dict(LAMMPS_UNITS[name])
    if name == "ase":
        return dict(ASE_UNITS)
    if name == "unknown":
        return dict(UNKNOWN_UNITS)
    raise UsageError(f"unknown units {name!r}: expected one of {', '.join(LAMMPS_UNITS)}, ase, unknown")


#: The layout's canonical column keys and their one dtype (one value per
#: row wherever they appear); libzmrec refuses them at any other dtype.
CANONICAL_COLUMNS = {
    **dict.fromkeys(("x", "y", "z", "vx", "vy", "vz", "fx", "fy", "fz", "charge", "mass", "quatw", "quati",
                     "quatj", "quatk", "mux", "muy", "muz", "axis_x", "axis_y", "axis_z", "occupancy",
                     "b_factor"), "f64"),
    **dict.fromkeys(("id", "atomic_number", "type_id", "mol_id", "res_id", "atomi", "atomj", "atomk", "atoml",
                     "atomm", "ibead", "bond_type", "bond_number", "atom_map"), "u64"),
    "formal_charge": "i64", "ix": "i32", "iy": "i32", "iz": "i32",
    **dict.fromkeys(("free", "is_14", "exclude_14"), "bool"),
    **dict.fromkeys(("element", "type", "name", "res_name", "bead_type", "chain", "icode", "altloc", "style"),
                    "string"),
}
#: The canonical per-step meta keys (all f64).
CANONICAL_META = ("pe", "ke", "etotal", "temp", "press", "volume")

#: ASE per-atom array names and the canonical key they are stored under.
_ASE_ARRAYS = {"initial_charges": "charge", "masses": "mass", "id": "id", "mol-id": "mol_id",
               "mol_id": "mol_id", "mol": "mol_id"}


def _as_canonical(name, a):
    """``a`` at ``name``'s canonical dtype, or None when it cannot be that
    exactly (the caller then keeps it under another name)."""
    want = CANONICAL_COLUMNS[name]
    if a.ndim != 1:
        return None
    if want == "string":
        return [str(x) for x in a.tolist()] if a.dtype.kind in "USO" else None
    if want == "f64":
        return a.astype(np.float64) if a.dtype.kind in "fiu" else None
    if want == "bool":
        return a if a.dtype.kind == "b" else None
    if a.dtype.kind not in "iu":
        return None
    info = np.iinfo(DTYPES[want])
    if a.size and (a.min() < info.min or a.max() > info.max):
        return None
    return a.astype(DTYPES[want])


def _static_columns(atoms, fmt):
    """The per-atom columns of one image that do not change along a file,
    under their canonical keys: element (string), atomic_number (u64), a
    numeric LAMMPS type as type_id (u64), a type label as type (string),
    charge and mass (f64), id / mol_id (u64); other arrays under their ASE
    name (float f64, integer i64, strings, bool)."""
    cols = {"element": atoms.get_chemical_symbols(),
            "atomic_number": np.asarray(atoms.numbers, dtype=np.uint64)}
    for name, arr in atoms.arrays.items():
        if name in ("numbers", "positions"):
            continue
        if name == "momenta" and fmt in _LAMMPS_FORMATS:
            continue  # velocities, stored with the positions as vx vy vz
        a = np.asarray(arr)
        key = _ASE_ARRAYS.get(name, name)
        if name == "type":
            key = "type" if a.dtype.kind in "USO" else "type_id"
        if key in CANONICAL_COLUMNS:
            v = _as_canonical(key, a)
            if v is not None:
                cols[key] = v
                continue
            key = f"ase_{name}"  # not storable at the canonical dtype
        if a.dtype.kind in "US" or a.dtype == object:
            cols[key] = [str(x) for x in a.tolist()]
        elif a.dtype.kind == "f":
            cols[key] = a.astype(np.float64)
        elif a.dtype.kind in "iu":
            cols[key] = a.astype(np.int64)
        elif a.dtype.kind == "b":
            cols[key] = a
    return cols


def _dynamic_columns(atoms, fmt):
    """x y z, plus fx fy fz when the file has forces and (LAMMPS) vx vy vz
    when it has velocities, each f64 (N,)."""
    pos = np.asarray(atoms.positions, dtype=np.float64)
    cols = {"x": pos[:, 0].copy(), "y": pos[:, 1].copy(), "z": pos[:, 2].copy()}
    _, forces = _calc_results(atoms, fmt)
    if forces is not None:
        f = np.asarray(forces, dtype=np.float64)
        cols.update(fx=f[:, 0].copy(), fy=f[:, 1].copy(), fz=f[:, 2].copy())
    if fmt in _LAMMPS_FORMATS and "momenta" in atoms.arrays:
        from ase.calculators.lammps import convert
        # back to the file's numbers (ASE read them as 'metal')
        v = np.asarray(convert(atoms.get_velocities(), "velocity", "ASE", "metal"), dtype=np.float64)
        cols.update(vx=v[:, 0].copy(), vy=v[:, 1].copy(), vz=v[:, 2].copy())
    return cols


def _box(atoms):
    """The layout's box of an ASE image, or None for no cell at all. ASE's
    cell rows are the lattice vectors, the layout's vectors columns: the
    matrix is transposed here, the ASE boundary. An undefined cell (rank
    below 3) is periodic on no axis and its vectors are the identity."""
    cell = np.asarray(atoms.cell[:], dtype=float)
    if not atoms.pbc.any() and not cell.any():
        return None
    # ASE keeps a LAMMPS box's lower corner (xlo, ylo, zlo) as the cell
    # displacement and leaves positions as in the file: it is the origin.
    origin = np.asarray(atoms.get_celldisp(), dtype=float).ravel()
    defined = bool(atoms.cell.rank == 3)
    return {"vectors": cell.T.copy() if defined else np.eye(3), "origin": [float(x) for x in origin],
            "boundary": [bool(x) and defined for x in atoms.pbc], "cell_defined": defined}


def to_atoms(frame, block="atoms"):
    """An ASE ``Atoms`` of a frame dict (a system, or a resolved frame from
    :meth:`Reader.frame`): symbols from ``element`` (else numbers from
    ``atomic_number``), positions from ``x y z``, and the box: cell rows =
    the lattice vectors (the columns of the layout's ``vectors``), ``pbc``
    = boundary, the origin as the cell displacement. An undefined cell
    gives no cell (zeros) and no periodicity. Needs ASE."""
    import ase

    b = frame["blocks"][block]
    cols = b.columns if isinstance(b, Block) else b
    kw = {"positions": np.stack([np.asarray(cols[c], dtype=np.float64) for c in "xyz"], axis=1)}
    if "element" in cols:
        kw["symbols"] = [str(e) for e in np.asarray(cols["element"], dtype=object).tolist()]
    elif "atomic_number" in cols:
        kw["numbers"] = np.asarray(cols["atomic_number"], dtype=np.int64)
    box = frame.get("box")
    atoms = ase.Atoms(**kw)
    if box is not None and box["cell_defined"]:
        atoms.set_cell(np.asarray(box["vectors"], dtype=float).T)
        atoms.set_pbc([bool(x) for x in box["boundary"]])
        atoms.set_celldisp(np.asarray(box["origin"], dtype=float))
    elif box is not None:
        atoms.set_celldisp(np.asarray(box["origin"], dtype=float))
    return atoms


def _calc_results(atoms, fmt):
    """(energy, forces) really present in the file, else None."""
    calc = atoms.calc
    res = getattr(calc, "results", {}) if calc is not None else {}
    energy = None if fmt in _NO_ENERGY_FORMATS else res.get("energy")
    return energy, res.get("forces")


def _info_scalars(atoms):
    """The scalar ASE ``info`` entries of one image (numpy scalars as
    Python values); ``timestep`` is the step, not meta."""
    out = {}
    for k, v in atoms.info.items():
        if k != "timestep" and isinstance(v, (bool, int, float, str, np.bool_, np.integer, np.floating)):
            out[k] = v.item() if isinstance(v, np.generic) else v
    return out


def _info_declarations(images, taken):
    """sequence_schema.meta declarations for the scalar ``info`` keys of
    trajectory images (every image of every multi-image input), so each
    image's keys reach its frame. A key's tag follows its values: bool,
    i64 (u64 beyond), f64 (integers and reals mixed too) or string, else
    json. A key some images lack gets a fill: "NaN" for f64, else the key
    is declared json with fill null. Keys in ``taken`` (declared already)
    are left out."""
    kinds, counts, big = {}, {}, set()
    for im in images:
        for k, v in _info_scalars(im).items():
            kind = "bool" if isinstance(v, bool) else "int" if isinstance(v, int) else \
                "float" if isinstance(v, float) else "str"
            kinds.setdefault(k, set()).add(kind)
            counts[k] = counts.get(k, 0) + 1
            if kind == "int" and v >= 2 ** 63:
                big.add(k)
    decl = {}
    for k, ks in kinds.items():
        if k in taken:
            continue
        everywhere = counts[k] == len(images)
        if ks <= {"int", "float"} and ("float" in ks or k in CANONICAL_META):
            decl[k] = {"dtype": "f64"} if everywhere else {"dtype": "f64", "fill": "NaN"}
        elif everywhere and len(ks) == 1 and k not in CANONICAL_META:
            tag = {"bool": "bool", "int": "u64" if k in big else "i64", "str": "string"}[next(iter(ks))]
            decl[k] = {"dtype": tag}
        elif k not in CANONICAL_META:
            decl[k] = {"dtype": "json", "fill": None}
    return decl


def _system_from_atoms(atoms, fmt, dynamic=True, with_atoms=True, with_info=True):
    """The system frame of one image: its static columns, plus (``dynamic``:
    a file of one image) positions, forces, velocities; without
    ``with_atoms`` (a trajectory whose atom count changes) no atoms block;
    with ``with_info`` (one image: its info is the record's) the image's
    scalar ASE info keys as meta."""
    cols = _static_columns(atoms, fmt)
    if dynamic:
        cols.update(_dynamic_columns(atoms, fmt))
    meta, types = {}, {}
    energy, _ = _calc_results(atoms, fmt)
    if energy is not None:
        meta["pe"], types["pe"] = float(energy), "f64"
    for k, v in (_info_scalars(atoms) if with_info else {}).items():
        meta.setdefault(k, v)
    d = {"blocks": {"atoms": cols} if with_atoms else {}, "meta": meta, "meta_types": types}
    box = _box(atoms)
    if box is not None:
        d["box"] = box
    return d


def _update_from_atoms(atoms, k, fmt, with_energy, with_static=False, info_keys=()):
    """One image as a trajectory update: positions (forces, velocities),
    with ``with_static`` the static columns too, energy as ``pe``, its
    declared info keys as per-step meta, the LAMMPS timestep (else the
    image number) as step, and the box."""
    cols = _static_columns(atoms, fmt) if with_static else {}
    cols.update(_dynamic_columns(atoms, fmt))
    energy, _ = _calc_results(atoms, fmt)
    d = {"blocks": {_TRAJ_BLOCK: cols}, "meta": {}}
    if with_energy and energy is not None:
        d["meta"]["pe"] = float(energy)
    info = _info_scalars(atoms)
    d["meta"].update({key: info[key] for key in info_keys if key in info})
    d["step"] = int(atoms.info.get("timestep", k))
    box = _box(atoms)
    if box is not None:
        d["box"] = box
    return d


#: LAMMPS dump columns ASE reads only to order or type the atoms, and the
#: ASE array each is kept as (loaderx's importer reads them itself).
_LAMMPS_KEPT = {"id": "id", "mol": "mol-id", "mass": "masses"}


def _lammps_dump_columns(path):
    """Per image of a LAMMPS text dump, {ASE array name: values} of its
    ``id``, ``mol`` and ``mass`` columns, rows ordered by id as ASE orders
    them. ASE's reader uses id for the order and mass for the element and
    keeps none of them."""
    import gzip

    opener = gzip.open if str(path).endswith(".gz") else open
    images = []
    with opener(path, "rt") as f:
        n = None
        for line in f:
            if line.startswith("ITEM: NUMBER OF ATOMS"):
                n = int(next(f).split()[0])
            elif line.startswith("ITEM: ATOMS") and n is not None:
                names = line.split()[2:]
                rows = [next(f).split() for _ in range(n)]
                keep = {c: i for i, c in enumerate(names) if c in _LAMMPS_KEPT}
                cols = {}
                if "id" in keep:
                    ids = np.array([int(r[keep["id"]]) for r in rows], dtype=np.int64)
                    order = np.argsort(ids, kind="stable")
                else:
                    order = np.arange(n)
                for c, i in keep.items():
                    vals = np.array([float(r[i]) if c == "mass" else int(r[i]) for r in rows])
                    cols[_LAMMPS_KEPT[c]] = vals[order]
                images.append(cols)
    return images


def _read_images(path, fmt):
    """Every image of a file (ASE), with a LAMMPS text dump's id, mol and
    mass columns attached as ASE arrays (``id``, ``mol-id``, ``masses``)."""
    import ase.io

    try:
        images = ase.io.read(path, index=":", format=fmt)
    except Exception as e:
        raise ValueError(f"{path}: ASE's {fmt} reader failed: {type(e).__name__}: {e}") from e
    if not isinstance(images, list):
        images = [images]
    if not images:
        raise ValueError(f"{path}: ASE read no image ({fmt})")
    if fmt == "lammps-dump-text":
        extra = _lammps_dump_columns(path)
        if len(extra) == len(images):
            for im, cols in zip(images, extra):
                for name, vals in cols.items():
                    if len(vals) != len(im):
                        continue
                    if name == "masses":
                        im.set_masses(vals)
                    else:
                        im.new_array(name, vals.astype(np.int64))
    return images


_COLLECTION_FORMATS = ("json", "db")


def check_format(name):
    """``name`` if ASE can read that format, else FormatError."""
    from ase.io.formats import ioformats
    fmt = ioformats.get(name)
    if fmt is None or not fmt.can_read:
        near = sorted(k for k, f in ioformats.items() if f.can_read and (name or "")[:3] in k)
        hint = f" (similar: {', '.join(near[:6])})" if near else ""
        raise FormatError(f"unknown or unreadable format {name!r}: not an ASE format name ASE can read{hint}")
    return name


def guess_format(path):
    """ASE's guess of ``path``'s format; FormatError when it cannot tell."""
    from ase.io.formats import UnknownFileTypeError, filetype
    try:
        name = filetype(path, guess=True)
    except UnknownFileTypeError:
        name = None
    except OSError:
        raise
    try:
        return check_format(name)
    except FormatError:
        raise FormatError(f"cannot guess the format of {path}; give --format NAME "
                          "(ASE format names: lammps-dump-text, extxyz, xyz, json, db, gromacs, ...)") from None


class _Progress:
    def __init__(self, enabled):
        self.enabled = enabled
        self.last = 0.0

    def __call__(self, done, total, records, frames, final=False):
        now = _time.monotonic()
        if not self.enabled or (not final and now - self.last < 0.2):
            return
        self.last = now
        width = 30
        fill = int(width * done / max(total, 1))
        sys.stderr.write(f"\r[{'#' * fill}{'.' * (width - fill)}] {done}/{total} files, "
                         f"{records} records, {frames} frames")
        if final:
            sys.stderr.write("\n")
        sys.stderr.flush()


def _remove_quietly(*paths):
    for p in paths:
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass


def import_files(paths, out, format=None, progress=None, units=None):
    """Import files with ASE into a new collection ``out``.

    ASE databases (formats ``json`` / ``db``, e.g. ASE's g2 / s22 / dcdft
    collections) become one record per row (system only, energy as meta
    when the row has one). Any other format becomes one record per file:
    the system holds the first image (element, atomic_number, per-atom
    arrays, positions, box with its origin) and, when the file holds more
    than one image, the trajectory holds every image's positions (+ forces
    when the file has them), energy (when the file has one: never for
    LAMMPS dumps, whose ASE reader invents 0.0) and step (LAMMPS timestep).

    A trajectory's images keep their scalar ASE ``info`` entries as
    per-step meta (declared from every image of every input), a LAMMPS
    text dump its ``id``, ``mol`` and ``mass`` columns (as ``id``,
    ``mol_id``, ``mass``), which ASE reads but drops. Boxes are written in
    the layout's convention (lattice vectors as columns: ASE's cell
    transposed).

    ``units``: a name for :func:`units_for` or a units dict; default
    ``"unknown"`` when any input is a LAMMPS file (ASE hands out its
    numbers as they are) else ``"ase"`` (angstrom, eV). Formats are checked
    (or guessed) and every input is read (all of them are held in memory
    until written) before anything is written (:class:`FormatError`, or
    ValueError naming the file ASE could not read). The collection is written to
    ``out.partial-<pid>`` and renamed to ``out`` only when complete: a
    failed import leaves nothing behind. Returns {'records', 'frames'}."""
    import ase.db

    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    paths = [os.fspath(p) for p in paths]
    out = os.fspath(out)
    if not paths:
        raise ValueError("import: no input files")
    for p in paths:
        if not os.path.exists(p):
            raise FileNotFoundError(errno.ENOENT, "input file not found", p)
    fmts = [check_format(format) if format else guess_format(p) for p in paths]
    if isinstance(units, dict):
        units_doc = dict(units)
    else:
        units_doc = units_for(units or ("unknown" if any(f in _LAMMPS_FORMATS for f in fmts) else "ase"))
    for p in (out, out + "-lock"):
        if os.path.lexists(p):
            raise FileExistsError(errno.EEXIST, "output exists", p)
    if progress is None:
        progress = sys.stderr.isatty()
    bar = _Progress(progress)
    # every file is read before anything is written: one ASE cannot read is
    # found first, and the per-step meta keys are declared from all of them
    images = [None if f in _COLLECTION_FORMATS else _read_images(p, f) for p, f in zip(paths, fmts)]
    with_energy = any(f not in _NO_ENERGY_FORMATS for f in fmts)
    # blocks are declared by the first frame presenting them (the writer)
    meta_decl = {"pe": {"dtype": "f64", "fill": "NaN"}} if with_energy else {}
    info_decl = _info_declarations([im for ims in images if ims and len(ims) > 1 for im in ims], set(meta_decl))
    schema = {"meta": {**meta_decl, **info_decl}}
    partial = f"{out}.partial-{os.getpid()}"
    _remove_quietly(partial, partial + "-lock")
    nrec = nfr = 0
    try:
        with Writer(partial, units=units_doc, schema=schema,
                    collection={"source": {"importer": "loaderx.mrec (ASE)"}}) as w:
            for i, (p, fmt) in enumerate(zip(paths, fmts)):
                if fmt in _COLLECTION_FORMATS:
                    with ase.db.connect(p, type=fmt) as db:
                        for row in db.select():
                            atoms = row.toatoms()
                            meta = {"source": os.path.basename(p), "id": row.id}
                            if row.get("name") is not None:
                                meta["name"] = row.get("name")
                            w.add_record(meta=meta, system=_system_from_atoms(atoms, fmt))
                            nrec += 1
                            bar(i, len(paths), nrec, nfr)
                else:
                    ims = images[i]
                    meta = {"source": os.path.basename(p), "format": fmt}
                    if len(ims) > 1:
                        # a trajectory block sharing the system's name keeps
                        # its row count: a changing atom count has no system atoms
                        fixed = len({len(a) for a in ims}) == 1
                        w.add_record(meta=meta, system=_system_from_atoms(ims[0], fmt, dynamic=False,
                                                                          with_atoms=fixed, with_info=False))
                        for k, a in enumerate(ims):
                            w.add_frame(_update_from_atoms(a, k, fmt, with_energy, with_static=not fixed,
                                                           info_keys=info_decl))
                            nfr += 1
                            bar(i, len(paths), nrec, nfr)
                    else:
                        w.add_record(meta=meta, system=_system_from_atoms(ims[0], fmt))
                    images[i] = None  # written: let it go
                    nrec += 1
                bar(i + 1, len(paths), nrec, nfr)
        # complete: publish under the final name (link refuses an existing one)
        try:
            os.link(partial, out)
        except FileExistsError:
            raise FileExistsError(errno.EEXIST, "output appeared during the import", out) from None
        except OSError:
            os.replace(partial, out)
    except BaseException:
        _remove_quietly(partial, partial + "-lock")
        raise
    _remove_quietly(partial, partial + "-lock")
    bar(len(paths), len(paths), nrec, nfr, final=True)
    return {"records": nrec, "frames": nfr}


# ----------------------------------------------------------- loader streams

#: The position columns the loader streams read by default.
POSITION_COLUMNS = ("x", "y", "z")


def _column_names(column):
    names = (column,) if isinstance(column, str) else tuple(column)
    if not names or not all(isinstance(c, str) and c and "," not in c for c in names):
        raise ValueError(f"column: a column name or a sequence of names, got {column!r}")
    return names


def _item_value(cols, names):
    """One column as stored, or several 1-d columns side by side (n, k)."""
    if len(names) == 1:
        return np.asarray(cols[names[0]], dtype=np.float64)
    return np.stack([np.asarray(cols[c], dtype=np.float64) for c in names], axis=1)


def frame_items(reader, block="atoms", column=POSITION_COLUMNS, scalars=("step", "pe"),
                include_systems=True):
    """Yield (record, frame, positions f64, {scalar: value}) for every
    frame of every record, resolving carry-forward in one pass per record.
    ``column``: one column (as stored) or several 1-d columns stacked to
    (n, k); by default ``x y z`` as (n_atoms, 3). A record without a
    trajectory yields its system once (frame -1) when ``include_systems``;
    its scalars come from the system meta (NaN / -1 when absent)."""
    names = _column_names(column)
    for r in range(len(reader)):
        info = reader.record_info(r)
        if info["n_frames"]:
            for k, fr in enumerate(reader.frames(r)):
                b = fr["blocks"][block]
                cols = b.columns if isinstance(b, Block) else b
                vals = {s: fr.get(s, fr["meta"].get(s)) for s in scalars}
                yield r, k, _item_value(cols, names), vals
        elif include_systems:
            sysd = reader.system(r)
            if sysd is None or block not in sysd["blocks"]:
                continue
            b = sysd["blocks"][block]
            cols = b.columns if isinstance(b, Block) else b
            if names[0] not in cols:
                continue
            vals = {s: sysd["meta"].get(s) for s in scalars}
            yield r, -1, _item_value(cols, names), vals


class _LmdbSource(_Closing):
    """One native source (loaderx._zr): the collection opened for the
    loader's worker threads plus its item list; shared by the streams of
    one :func:`lmdb_streams` call. Reopened in a forked child."""

    def __init__(self, path, nolock, block, column, scalars, include_systems):
        self.path = os.fspath(path)
        _check_exists(self.path)
        self._args = (self.path, 1 if nolock else 0, block, column, list(scalars), 1 if include_systems else 0)
        self._cap = _zr.zmr_py_source_open(*self._args)
        self._pid = os.getpid()
        self.length = _zr.zmr_py_source_length(self._cap)

    def capsule(self):
        from .errors import closed
        if self._cap is None:
            raise closed("mrec stream")
        if os.getpid() != self._pid:
            # a forked child: LMDB environments must be opened after fork();
            # the parent's handle is left alone (never freed here)
            self._cap = _zr.zmr_py_source_open(*self._args)
            self._pid = os.getpid()
        return self._cap

    @property
    def closed(self):
        return self._cap is None

    def close(self):
        if self._cap is None:
            return
        # A loader reading the streams keeps the native source until it
        # closes; its next batch raises ClosedError naming the collection.
        cap, self._cap = self._cap, None
        if os.getpid() == self._pid:
            _zr.zmr_py_source_free(cap)


class LmdbStream:
    """A loader stream read straight from an mrec-lmdb collection (see
    :func:`lmdb_streams`): ``len()``, ``dtype``, ``ragged``, ``item_shape``
    (dense streams: ``()``), ``closed``, ``close()`` (closes every stream
    of its :func:`lmdb_streams` call; a DataLoader reading them is closed
    with them: its next batch raises ClosedError naming the collection)."""

    _zld_stream = True  # the DataLoader's generic-stream protocol

    def __init__(self, source, which, name, dtype, ragged):
        self._source = source
        self._which = which
        self.name = name
        self.dtype = np.dtype(dtype)
        self.ragged = ragged
        if not ragged:
            self.item_shape = ()  # scalar records; a ragged stream has none (like RaggedStore)

    def __len__(self):
        return self._source.length

    @property
    def closed(self):
        return self._source.closed

    def close(self):
        self._source.close()

    def _handle(self):
        return (self._source.capsule(), self._which)

    def __reduce__(self):
        # by path (e.g. for spawned DDP workers): the stream reopens its
        # own source there
        if self.closed:
            raise TypeError(f"cannot pickle a closed {self!r}")
        return (_reopen_lmdb_stream, (self._source._args, self._which, self.name, self.dtype.str, self.ragged))

    def __repr__(self):
        state = "closed" if self.closed else f"{len(self)} records"
        return f"LmdbStream({self._source.path!r}, {self.name!r}, {'ragged' if self.ragged else 'dense'}, {state})"


def _reopen_lmdb_stream(args, which, name, dtype, ragged):
    path, flags, block, column, scalars, include_systems = args
    src = _LmdbSource(path, bool(flags), block, column, scalars, bool(include_systems))
    return LmdbStream(src, which, name, dtype, ragged)


def lmdb_streams(source, block="atoms", column=POSITION_COLUMNS, scalars=("step", "pe"),
                 include_systems=True, nolock=False):
    """A collection as DataLoader streams read directly from LMDB, no
    conversion: ``{"positions": ragged f64 (one (n_atoms, 3) array per
    frame), "record": dense u64, "step": dense i64 (-1 for none), <other
    scalar>: dense f64 (NaN for none)}``, item for item the stores
    :func:`to_zrecord` writes (same items, same order, same values), so a
    DataLoader with the same seed yields the same batches over either.

    ``source``: a path or a :class:`Reader` (its path is reopened: the
    loader's worker threads use their own handle). Frames are resolved on
    the worker threads (carry-forward: the last update holding ``block``).
    Close with ``close()`` on any of the streams (or let them be
    collected); a DataLoader reading them keeps the native source until
    it closes, and its next batch after the close raises ClosedError."""
    path = source.path if isinstance(source, Reader) else os.fspath(source)
    scalars = tuple(scalars)
    for name in ("positions", "record"):
        if name in scalars:
            raise ValueError(f"scalar name {name!r} collides with a stream name")
    src = _LmdbSource(path, nolock, block, ",".join(_column_names(column)), scalars, include_systems)
    if src.length == 0:
        src.close()
        raise ValueError(f"{path}: no frames (and no system holding {block}/{column}) to stream")
    out = {"positions": LmdbStream(src, 0, "positions", np.float64, True),
           "record": LmdbStream(src, 1, "record", np.uint64, False)}
    for k, name in enumerate(scalars):
        out[name] = LmdbStream(src, 2 + k, name, np.int64 if name == "step" else np.float64, False)
    return out


def to_zrecord(reader, out_dir, block="atoms", column=POSITION_COLUMNS, scalars=("step", "pe"),
               include_systems=True, codec="zstd"):
    """Convert a collection's frames into zrecord stores the DataLoader
    draws from: ``positions`` (RaggedStore f64, one (n_atoms, 3) record per
    frame), ``record`` (DenseStore u64: the mrec record index), and one
    DenseStore per scalar (``step`` i64 with -1 for none, others f64 with
    NaN for none). Returns {name: open store}; every store has one entry
    per frame, in collection order: the items :func:`lmdb_streams` reads.
    ``reader``: a :class:`Reader` or a path. ``codec``: "raw", "zstd" or
    "auto". The stores are written under ``<name>.partial`` and renamed
    into place only once all are complete: a failure (a missing column, an
    unwritable directory) raises and leaves none of them at its name."""
    from .zrecord import DenseStore, RaggedStore

    path = reader.path if isinstance(reader, Reader) else os.fspath(reader)
    nolock = reader.nolock if isinstance(reader, Reader) else False
    scalars = tuple(scalars)
    src = _LmdbSource(path, nolock, block, ",".join(_column_names(column)), scalars, include_systems)
    try:
        _zr.zmr_py_source_to_stores(src.capsule(), os.fspath(out_dir), codec)
    finally:
        src.close()
    stores = {"positions": RaggedStore.open(os.path.join(out_dir, "positions")),
              "record": DenseStore.open(os.path.join(out_dir, "record"))}
    for s in scalars:
        stores[s] = DenseStore.open(os.path.join(out_dir, s))
    return stores


# ----------------------------------------------------------- command line

def main(argv=None, prog="python3 -m loaderx.mrec"):
    """Command line (``zr mrec import`` runs this with prog="zr mrec").
    Exit status 0 ok, 1 failure (an input ASE cannot read, a rule broken),
    2 usage (bad arguments, unknown or unguessable format, unknown units),
    3 a file cannot be opened or the output exists; errors are one line on
    stderr naming the file."""
    import argparse

    from .errors import NotAStoreError, StoreBusy

    ap = argparse.ArgumentParser(prog=prog, description="mrec-lmdb collections")
    sub = ap.add_subparsers(dest="cmd", required=True)
    imp = sub.add_parser("import", help="import files with ASE into a new collection",
                         description="Import files with ASE into a new collection OUT (written aside and "
                                     "published only when complete). This importer is the Python package "
                                     "loaderx's (loaderx.mrec) and needs ASE; `zr mrec import` runs it in "
                                     "$ZR_PYTHON, else python3 on PATH.",
                         epilog=f"exit status: 0 ok, 1 an input cannot be imported, 2 usage, 3 cannot open "
                                f"an input or OUT exists\nexample: {prog} import dump.lammpstrj --units real "
                                "-o run.mrec.lmdb",
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    imp.add_argument("files", nargs="+")
    imp.add_argument("--format", "-f", default=None,
                     help="ASE format name (lammps-dump-text, extxyz, xyz, json, db, gromacs, ...); "
                          "guessed per file when left out")
    imp.add_argument("-o", "--output", required=True, help="OUT.mrec.lmdb (must not exist)")
    imp.add_argument("--units", default=None,
                     help="units of the input numbers, stored in the collection: a LAMMPS unit style "
                          f"({' '.join(LAMMPS_UNITS)}), ase (angstrom, eV) or unknown; default unknown for "
                          "LAMMPS files (their numbers are taken as written), ase otherwise")
    imp.add_argument("--no-progress", action="store_true")
    val = sub.add_parser("validate", help="check every rule of the layout")
    val.add_argument("file")
    args = ap.parse_args(argv)
    where = f"{prog} {args.cmd}"
    try:
        if args.cmd == "import":
            res = import_files(args.files, args.output, format=args.format, units=args.units,
                               progress=False if args.no_progress else None)
            print(f"{args.output}: {res['records']} records, {res['frames']} frames")
        else:
            validate(args.file)
            print(f"{args.file}: ok")
    except UsageError as e:
        print(f"{where}: {e}", file=sys.stderr)
        return 2
    except (FileExistsError, FileNotFoundError, PermissionError, IsADirectoryError, NotAStoreError,
            StoreBusy) as e:
        print(f"{where}: {e}", file=sys.stderr)
        return 3
    except ValueError as e:
        print(f"{where}: {e}", file=sys.stderr)
        return 1
    except ImportError as e:
        print(f"{where}: needs ASE for importing ({e}); pip install ase", file=sys.stderr)
        return 1
    except (OSError, NotImplementedError) as e:
        print(f"{where}: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # an ASE reader failing on a malformed input file
        print(f"{where}: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
