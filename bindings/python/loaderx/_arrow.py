"""Arrow columns as store records; pyarrow is the reader.

One rule maps an Arrow column type to a store, for
:func:`loaderx.shards.from_arrow`, :func:`loaderx.shards.write_spark` and
``zr ingest`` of Parquet / Arrow IPC / Feather files:

* a number or a bool (int8..int64, uint8..uint64, float16/32/64, bool):
  a dense store of scalar records, item_shape ``()``;
* ``fixed_size_list<T>[n]`` (nested: ``[n][m]...``), ``fixed_size_binary[n]``
  (uint8), and an extension type with a fixed ``shape`` (Arrow's
  ``fixed_shape_tensor``, Hugging Face's ``Array2D`` .. ``Array5D``, also as
  the "huggingface" schema metadata of a ``save_to_disk`` file declares
  them): a dense store, item_shape ``(n, m, ...)``;
* ``list`` / ``large_list`` (nested, fixed-size lists inside them too),
  ``binary`` and ``string`` (their bytes, as uint8): a ragged store, one
  record per row, shaped by the nesting. Every sublist of one row must be
  as long as its siblings (a row is an n-d array): ``[[1, 2], [3, 4]]`` is
  a (2, 2) record, ``[[1], [2, 3]]`` is refused.

Dictionary-encoded columns are decoded, list/binary views read as lists,
other extension types as their storage type. ``shapes={name: item_shape}``
makes a list column dense: each row must hold that shape, or that many
elements as a flat list. ``ragged=[name]`` makes a dense column ragged.
Refused with an error naming the column, the row and the reason: nulls,
empty rows (a record holds at least one element), rows of the wrong shape,
and other types (struct, map, timestamp, decimal, ...; TypeError).
"""

import os

import numpy as np

from . import _zr
from .zrecord import DICT_TIERS, DenseStore, RaggedStore

# Records per append slice: about this many bytes of decoded values.
SLICE_BYTES = 16 << 20


def _pa():
    try:
        import pyarrow
    except ImportError as exc:
        raise ImportError("reading Arrow and Parquet needs pyarrow (pip install pyarrow): "
                          f"{exc}") from exc
    return pyarrow


# ---------------------------------------------------------------- types


def _leaf_dtype(t):
    pa = _pa()
    if pa.types.is_boolean(t):
        return np.dtype(bool)
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        return np.dtype(t.to_pandas_dtype()).newbyteorder("<")
    return None


def _fixed_shape(t):
    """The item shape an extension type declares, if it is all ints >= 1."""
    shape = getattr(t, "shape", None)
    try:
        shape = tuple(int(d) for d in shape) if shape is not None else None
    except (TypeError, ValueError):
        return None  # e.g. a leading None: a dynamic first dimension
    return shape if shape and all(d >= 1 for d in shape) else None


class ColumnSpec:
    """How one Arrow column becomes records.

    ``kind`` 'dense' (``item_shape``) or 'ragged' (records of ``ndim``
    dims); ``dtype`` the little-endian numpy dtype of the values;
    ``levels`` one entry per list level from the outside in: an int for a
    fixed size, None for a variable one (binary and string columns end in
    a level of bytes)."""

    def __init__(self, name, arrow_type, shape=None, ragged=False):
        pa = _pa()
        self.name, self.arrow_type = name, arrow_type
        levels, t, declared = [], arrow_type, None
        while True:
            if isinstance(t, pa.BaseExtensionType):
                perm = getattr(t, "permutation", None)
                if perm is not None and list(perm) != list(range(len(perm))):
                    raise TypeError(f"column {name!r}: a tensor with permuted dimensions "
                                    f"({t}) is not read; store it in row-major order")
                if not levels and declared is None:
                    declared = _fixed_shape(t)
                t = t.storage_type
            elif pa.types.is_dictionary(t):
                t = t.value_type
            elif pa.types.is_fixed_size_list(t):
                levels.append(t.list_size)
                t = t.value_type
            elif pa.types.is_list(t) or pa.types.is_large_list(t) or _is_view(t, "list"):
                levels.append(None)
                t = t.value_type
            elif pa.types.is_fixed_size_binary(t):
                levels.append(t.byte_width)
                self.dtype = np.dtype(np.uint8)
                break
            elif (pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_string(t)
                  or pa.types.is_large_string(t) or _is_view(t, "binary")
                  or _is_view(t, "string")):
                levels.append(None)
                self.dtype = np.dtype(np.uint8)
                break
            else:
                dt = _leaf_dtype(t)
                if dt is None:
                    raise TypeError(f"column {name!r} has type {arrow_type}, which holds {t}: "
                                    "not a number, bool, list or binary; leave the column out "
                                    "or convert it first")
                self.dtype = dt
                break
        self.levels = levels
        if shape is None:
            shape = declared
        if shape is not None and not ragged:
            shape = tuple(int(d) for d in (shape if isinstance(shape, (tuple, list)) else (shape,)))
            if any(d < 1 for d in shape):
                raise ValueError(f"column {name!r}: shape {shape} has a dimension < 1")
            if not levels and shape:
                raise ValueError(f"column {name!r} holds scalars ({arrow_type}); it cannot take "
                                 f"the shape {shape}")
            if None not in levels and tuple(levels) != shape and \
                    int(np.prod(levels)) != int(np.prod(shape)):
                raise ValueError(f"column {name!r} holds records of shape {tuple(levels)}, not "
                                 f"{shape}")
            self.kind, self.item_shape = "dense", shape
        elif ragged or None in levels:
            self.kind, self.ndim = "ragged", len(levels)
        else:
            if any(d < 1 for d in levels):
                raise ValueError(f"column {name!r}: type {arrow_type} has a zero-size "
                                 "dimension, its records hold no values")
            self.kind, self.item_shape = "dense", tuple(levels)
        self._shaped = shape is not None and not ragged and None in levels

    def __repr__(self):
        what = (f"item_shape={self.item_shape}" if self.kind == "dense"
                else f"ndim={self.ndim}")
        return f"ColumnSpec({self.name!r}, {self.kind}, {self.dtype.str}, {what})"

    def identity(self):
        """What a store of this column is: (kind, dtype str, item_shape or None)."""
        return (self.kind, self.dtype.str, self.item_shape if self.kind == "dense" else None)

    # ------------------------------------------------------------ stores

    def create(self, path, codec="zstd", dict_bytes=None):
        """A new store for this column at ``path``."""
        if self.kind == "dense":
            return DenseStore.create(path, self.dtype, self.item_shape, codec=codec,
                                     dict_bytes=dict_bytes)
        return RaggedStore.create(path, self.dtype, codec=codec, dict_bytes=dict_bytes)

    @staticmethod
    def append(store, records):
        """Append what :meth:`convert` returned."""
        if isinstance(records, np.ndarray):
            return store.append(records)
        packed, bounds = records
        if len(bounds) < 2:  # a slice of no rows: nothing to append
            return len(store)
        return store._append_packed(packed, bounds)

    @staticmethod
    def samples(records):
        """The records as a list of byte arrays (dictionary training)."""
        if isinstance(records, np.ndarray):
            return [records[j] for j in range(records.shape[0])]
        packed, bounds = records
        return [packed[int(bounds[j]):int(bounds[j + 1])] for j in range(len(bounds) - 1)]

    # -------------------------------------------------------- conversion

    def convert(self, array, row0=0):
        """The records of one Arrow array (or chunked array) of this column:
        an ndarray ``(rows, *item_shape)`` for a dense column, ``(packed,
        bounds)`` for a ragged one (uint8 records ``[u64le ndim][u64le
        dims][payload]`` back to back, record j at ``packed[bounds[j]:
        bounds[j+1]]``). ``row0`` is the first row's index in the whole
        column (for error messages). ValueError naming the row for a null,
        an empty row or a row of the wrong shape."""
        pa = _pa()
        if isinstance(array, pa.ChunkedArray):
            array = pa.concat_arrays(array.chunks) if array.num_chunks != 1 else array.chunk(0)
        rows = len(array)
        values, offsets = self._flatten(array, row0)
        if self.kind == "dense" and not self._shaped:
            return values.reshape((rows,) + self.item_shape)
        dims, eoff = self._shapes(offsets, rows, row0)
        if self.kind == "dense":
            return self._dense(values, dims, eoff, rows, row0)
        return _pack(values, dims, eoff)

    def _flatten(self, array, row0):
        """(leaf values as a 1-d ndarray, [per-level int64 offsets from 0])."""
        pa = _pa()
        offsets, cur = [], _unwrap(array)
        for size in self.levels:
            self._no_nulls(cur, offsets, row0)
            n = len(cur)
            t = cur.type
            if pa.types.is_fixed_size_binary(t):
                o = np.arange(n + 1, dtype=np.int64) * size
                raw = np.frombuffer(cur.buffers()[1], np.uint8)
                offsets.append(o)
                return raw[cur.offset * size:(cur.offset + n) * size], offsets
            if _is_bytes(t):
                wide = pa.types.is_large_binary(t) or pa.types.is_large_string(t)
                o = np.frombuffer(cur.buffers()[1], np.int64 if wide else np.int32)
                o = o[cur.offset:cur.offset + n + 1].astype(np.int64)
                raw = np.frombuffer(cur.buffers()[2], np.uint8) if n and o[-1] > o[0] \
                    else np.empty(0, np.uint8)
                offsets.append(o - o[0])
                return raw[o[0]:o[-1]], offsets
            if size is not None:
                o = np.arange(n + 1, dtype=np.int64) * size
            else:
                o = np.asarray(cur.offsets).astype(np.int64)
                o -= o[0]
            offsets.append(o)
            cur = _unwrap(cur.flatten())
        self._no_nulls(cur, offsets, row0)
        values = cur.to_numpy(zero_copy_only=False)
        return np.ascontiguousarray(values, dtype=self.dtype), offsets

    def _no_nulls(self, arr, offsets, row0):
        if arr.null_count:
            i = int(np.flatnonzero(np.asarray(arr.is_null()))[0])
            raise ValueError(f"column {self.name!r}, row {row0 + _row_of(i, offsets)}: a null "
                             "value; stores hold no nulls (fill or drop them first)")

    def _shapes(self, offsets, rows, row0):
        """Each row's dims (rows x levels int64) and leaf element offsets
        (rows + 1), checking that every row is a non-empty n-d array."""
        g = np.arange(rows + 1, dtype=np.int64)
        dims = np.empty((rows, len(offsets)), dtype=np.int64)
        for j, o in enumerate(offsets):
            lens = np.diff(o)
            cnt = np.diff(g)
            first = lens[g[:-1]] if rows else lens[:0]
            if j:
                bad = lens != np.repeat(first, cnt)
                if bad.any():
                    i = int(np.flatnonzero(bad)[0])
                    r = int(np.searchsorted(g, i, side="right") - 1)
                    raise ValueError(f"column {self.name!r}, row {row0 + r}: its lists at depth "
                                     f"{j} differ in length, the row is not an n-d array")
            zero = first == 0
            if zero.any():
                r = int(np.flatnonzero(zero)[0])
                raise ValueError(f"column {self.name!r}, row {row0 + r}: an empty row (a record "
                                 "holds at least one element)")
            dims[:, j] = first
            g = o[g]
        return dims, g

    def _dense(self, values, dims, eoff, rows, row0):
        shape = self.item_shape
        size = int(np.prod(shape))
        count = np.diff(eoff)
        if dims.shape[1] == len(shape):
            bad = np.any(dims != np.array(shape, dtype=np.int64), axis=1)
        else:
            bad = count != size  # a flat list of prod(shape) values
            if dims.shape[1] != 1:
                bad |= True
        if bad.any():
            r = int(np.flatnonzero(bad)[0])
            raise ValueError(f"column {self.name!r}, row {row0 + r}: holds shape "
                             f"{tuple(int(d) for d in dims[r])}, expected {shape}"
                             + (f" or {size} values" if len(shape) > 1 else ""))
        return values.reshape((rows,) + shape)


def _is_view(t, what):
    pa = _pa()
    test = getattr(pa.types, f"is_{what}_view", None)
    return bool(test and test(t)) or (what == "list" and
                                      bool(getattr(pa.types, "is_large_list_view", None)
                                           and pa.types.is_large_list_view(t)))


def _is_bytes(t):
    pa = _pa()
    return (pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_string(t)
            or pa.types.is_large_string(t))


def _unwrap(arr):
    """Extension arrays as their storage, dictionaries decoded, views as
    their large non-view types."""
    pa = _pa()
    while True:
        t = arr.type
        if isinstance(t, pa.BaseExtensionType):
            arr = arr.storage
        elif pa.types.is_dictionary(t):
            arr = arr.dictionary_decode()
        elif _is_view(t, "list"):
            arr = arr.cast(pa.large_list(t.value_field))
        elif _is_view(t, "binary"):
            arr = arr.cast(pa.large_binary())
        elif _is_view(t, "string"):
            arr = arr.cast(pa.large_string())
        else:
            return arr


def _row_of(i, offsets):
    """The row holding element i of the level below ``offsets``."""
    for o in reversed(offsets):
        i = int(np.searchsorted(o, i, side="right") - 1)
    return i


def _pack(values, dims, eoff):
    """Ragged records ``[u64le ndim][u64le dims][payload]`` from each row's
    dims and its values ``values[eoff[r]:eoff[r+1]]``: (packed uint8,
    bounds uint64), packed natively (zrs_ragged_encode)."""
    rows, nd = dims.shape
    return _zr.zrs_ragged_encode_rows(np.ascontiguousarray(values),
                                      np.ascontiguousarray(dims, dtype=np.uint64),
                                      np.ascontiguousarray(eoff, dtype=np.uint64), nd,
                                      values.dtype.str)


def column_specs(schema, columns=None, shapes=None, ragged=()):
    """{name: ColumnSpec} for ``columns`` (default: every column of the
    Arrow ``schema``) in that order; KeyError naming the columns that
    exist for an unknown name, TypeError for a column of another type."""
    names = list(schema.names)
    if columns is None:
        columns = names
    elif isinstance(columns, str):
        columns = [columns]
    columns = list(columns)
    shapes = dict(shapes or {})
    ragged = {ragged} if isinstance(ragged, str) else set(ragged)
    for c in list(columns) + list(shapes) + list(ragged):
        if c not in names:
            raise KeyError(f"no column {c!r}; the columns are {names}")
    for c in list(shapes) + list(ragged):
        if c not in columns:
            raise ValueError(f"column {c!r} is given a shape or ragged=, but is not written")
    if len(set(columns)) != len(columns):
        raise ValueError(f"columns {columns} name a column twice")
    for c in columns:
        check_name(c)
    declared = _hf_shapes(schema)
    return {c: ColumnSpec(c, schema.field(c).type, shapes.get(c, declared.get(c)), c in ragged)
            for c in columns}


def _hf_shapes(schema):
    """{column: item shape} of the Hugging Face Array2D..Array5D features
    that a schema's "huggingface" metadata declares: a file written by
    ``save_to_disk`` keeps them there, read without the datasets package."""
    import json

    raw = (schema.metadata or {}).get(b"huggingface")
    try:
        feats = json.loads(raw)["info"]["features"] if raw else {}
    except (ValueError, KeyError, TypeError):
        return {}
    out = {}
    for name, f in feats.items() if isinstance(feats, dict) else ():
        if isinstance(f, dict) and str(f.get("_type", "")).startswith("Array") and \
                isinstance(f.get("shape"), list) and \
                all(isinstance(d, int) and d >= 1 for d in f["shape"]):
            out[name] = tuple(f["shape"])
    return out


def check_name(name):
    """A column name usable as a file name (it names its stores)."""
    if not name or name in (".", "..") or "/" in name or "\0" in name or \
            name.startswith(".") or (os.sep != "/" and os.sep in name):
        raise ValueError(f"column name {name!r} cannot name a directory of shards; rename the "
                         "column (no '/', no leading '.')")


# -------------------------------------------------------------- sources


def _magic(path):
    with open(path, "rb") as f:
        head = f.read(8)
    if head[:4] == b"PAR1":
        return "parquet"
    if head[:6] == b"ARROW1":
        return "arrow"
    if head[:4] == b"\xff\xff\xff\xff":
        return "stream"
    if head[:4] == b"FEA1":
        return "feather1"
    return None


class Source:
    """An Arrow source read in record batches.

    ``source``: a ``pyarrow.Table`` or ``RecordBatch``, a
    ``RecordBatchReader``, a ``pyarrow.dataset.Dataset``, a Hugging Face
    ``datasets.Dataset`` (its rows in order, after any select/shuffle), an
    object with ``__arrow_c_stream__`` (polars, DuckDB, ...), or a path: a
    Parquet file, an Arrow IPC file or stream (Feather v2; the ``.arrow``
    files of a Hugging Face ``save_to_disk``), a Feather v1 file, or a
    directory of Parquet files. ``schema`` and ``num_rows`` (None when
    unknown up front) describe it; :meth:`batches` reads ``columns``."""

    def __init__(self, source):
        pa = _pa()
        self._src, self.num_rows, self.path = source, None, None
        if isinstance(source, (str, bytes, os.PathLike)):
            self.path = os.fsdecode(os.fspath(source))
            self._open_path(self.path)
        elif isinstance(source, (pa.Table, pa.RecordBatch)):
            self.kind, self.schema, self.num_rows = "table", source.schema, source.num_rows
        elif isinstance(source, pa.RecordBatchReader):
            self.kind, self.schema = "reader", source.schema
        elif _is_dataset(source):
            self.kind, self.schema = "dataset", source.schema
        elif _is_hf(source):
            self.kind, self.schema, self.num_rows = "hf", source.features.arrow_schema, len(source)
        elif hasattr(source, "__arrow_c_stream__"):
            self._src = pa.RecordBatchReader.from_stream(source)
            self.kind, self.schema = "reader", self._src.schema
        else:
            raise TypeError("expected a pyarrow Table, RecordBatch, RecordBatchReader or "
                            "dataset, a Hugging Face Dataset, an Arrow stream or a path, got "
                            f"{type(source).__name__}")

    def _open_path(self, path):
        pa = _pa()
        if os.path.isdir(path):
            import pyarrow.dataset as pads
            self.kind, self._src = "dataset", pads.dataset(path, format="parquet")
            self.schema = self._src.schema
            return
        kind = _magic(path)
        if kind == "parquet":
            import pyarrow.parquet as pq
            self._src = pq.ParquetFile(path)
            self.kind, self.schema = "parquet", self._src.schema_arrow
            self.num_rows = self._src.metadata.num_rows
        elif kind == "arrow":
            self._src = pa.ipc.open_file(pa.memory_map(path))
            self.kind, self.schema = "ipc", self._src.schema
            self.num_rows = sum(self._src.get_batch(i).num_rows
                                for i in range(self._src.num_record_batches))
        elif kind == "stream":
            self._src = pa.ipc.open_stream(pa.memory_map(path))
            self.kind, self.schema = "reader", self._src.schema
        elif kind == "feather1":
            import pyarrow.feather as feather
            self._src = feather.read_table(path, memory_map=True)
            self.kind, self.schema, self.num_rows = "table", self._src.schema, self._src.num_rows
        else:
            raise ValueError(f"{path}: not a Parquet, Arrow IPC or Feather file")

    def batches(self, columns, slice_bytes=SLICE_BYTES):
        """RecordBatches of ``columns``, in row order, each about
        ``slice_bytes`` of values or less."""
        pa = _pa()
        src, kind = self._src, self.kind
        if kind == "parquet":
            md = src.metadata
            size = sum(md.row_group(i).total_byte_size for i in range(md.num_row_groups))
            per = max(1, slice_bytes // max(1, size // max(1, md.num_rows)))
            it = src.iter_batches(batch_size=per, columns=columns, use_threads=True)
        elif kind == "ipc":
            it = (src.get_batch(i).select(columns) for i in range(src.num_record_batches))
        elif kind == "table":
            it = src.select(columns).to_batches() if isinstance(src, pa.Table) \
                else [src.select(columns)]
        elif kind == "reader":
            it = (b.select(columns) for b in src)
        elif kind == "dataset":
            it = src.to_batches(columns=columns)
        else:  # a Hugging Face Dataset: rows through its indices mapping
            rows = max(1, min(65536, slice_bytes // max(1, _hf_row_bytes(src))))
            it = (_as_batch(t) for t in
                  src.select_columns(columns).with_format("arrow").iter(batch_size=rows))
        for b in it:
            yield from _slices(b, slice_bytes)


def _is_dataset(obj):
    try:
        import pyarrow.dataset as pads
    except ImportError:
        return False
    return isinstance(obj, pads.Dataset)


def _is_hf(obj):
    return type(obj).__module__.split(".")[0] == "datasets" and hasattr(obj, "with_format") \
        and hasattr(obj, "features")


def _hf_row_bytes(ds):
    n = len(ds)
    return ds.data.nbytes // n if n else 1


def _as_batch(t):
    pa = _pa()
    if isinstance(t, pa.RecordBatch):
        return t
    t = t.combine_chunks()
    return t.to_batches()[0] if t.num_rows else pa.RecordBatch.from_pylist([], schema=t.schema)


def _slices(batch, slice_bytes):
    n = batch.num_rows
    if n == 0:
        return
    per = max(1, slice_bytes // max(1, batch.nbytes // n))
    for lo in range(0, n, per):
        yield batch.slice(lo, per) if per < n else batch


# --------------------------------------------------------------- writing


def dict_for(records, codec, dict_bytes, tier):
    """The dictionary of a new store: ``dict_bytes`` as given, else (for
    zstd_dict) one trained on the store's first records."""
    if codec != "zstd_dict" or dict_bytes is not None:
        return dict_bytes
    from .utils import train_dict
    if tier not in DICT_TIERS:
        raise ValueError(f"unknown dictionary tier {tier!r}; expected one of "
                         f"{', '.join(DICT_TIERS)}")
    return train_dict(ColumnSpec.samples(records), tier)
