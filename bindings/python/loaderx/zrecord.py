"""Zrecord: persistent typed record stores.

Two contracts over one on-disk format (a store is a directory):

``DenseStore``
    every record is one array of the store's fixed ``item_shape`` and
    ``dtype``. Reads are fixed-stride gathers; a selection of ``n`` records
    comes back as one ``(n, *item_shape)`` array.
``RaggedStore``
    every record keeps its own shape (any ndim <= 32, ``()`` included, and
    zero-size shapes such as ``(0,)`` or ``(0, 4)``: an empty token list,
    an image without boxes). A selection comes back as a list of arrays.

Indexing (both): ``store[i]`` (int or numpy integer, negatives wrap) is one
record; ``store[a:b:c]`` (any step), ``store[[i, j]]`` / an int ndarray,
``store[mask]`` (bool, length ``len(store)``) and ``store[i, j, k]`` (a
tuple of ints: a record *set*, never ``store[i][j][k]``) select several.
Out-of-range indices raise ``IndexError``; an empty selection gives an
empty array / empty list.

The dtype set is closed: bool, int8..int64, uint8..uint64, float16/32/64,
complex64/128, stored little-endian (``np.dtype(x).str``, e.g. ``'<f4'``).
A big-endian dtype given to ``create`` (``'>i4'``) makes the little-endian
store of that type (``'<i4'``), and ``append`` accepts data of the same type
in either byte order (the other order is converted, one copy), so
``create(p, data.dtype, data.shape[1:]); append(data)`` works for
big-endian arrays too; a different type is refused (no casting).

Errors (see :mod:`loaderx.errors`): ``FileExistsError`` on ``create`` of an
existing path, :class:`NotAStoreError` (a ``ValueError``) on ``open`` of a
path that is not a store, :class:`StoreBusy` (a ``BlockingIOError``) when
another handle holds the store, ``ValueError`` (``ClosedError``) on use
after ``close``, ``ValueError`` on a dtype/shape mismatch in ``append``,
``TypeError`` for ``dtype=None`` in ``create`` (numpy would silently read
it as float64) and for a bare 0-D/1-D ndarray given to
``RaggedStore.append`` (ambiguous: ``append([arr])`` is one record,
``append(list(arr))`` one scalar record per element).

Gathering into a buffer of one's own: ``DenseStore.gather(idx, out=arr)``
writes the records into ``arr`` (numpy ``take``'s ``out``) and returns it,
so a loop that reuses ``arr`` never allocates nor first-touches a fresh
batch. ``RaggedStore.gather_packed(idx)`` returns a :class:`RaggedBatch`:
the payloads back to back in one array plus element offsets and shapes.

Result buffers: a result of 1 MiB or more from ``store[idx]`` is a view of
a buffer drawn from a small process-wide pool (at most 4 buffers and
256 MiB in all). A buffer goes back to the pool only when no array uses it
any more (its reference count says so), and the next result of about its
size reuses it, without the page faults and kernel zero-fill of fresh
memory. :func:`release_buffers` frees the idle ones.

Threads: reads and appends release the GIL and may run concurrently on one
store from several threads; ``close`` must not race with them.
"""

import errno
import operator
import os
import sys
import threading
import time
import weakref

import numpy as np

from . import _zr
from ._closing import Closing as _Closing
from ._interrupt import interruptible as _interruptible
from .errors import (ZR_EIO, ClosedError, CorruptStoreError, NotAStoreError,
                     StoreBusy, StoreNotFoundError, ZrError, closed, from_status)

__all__ = [
    "DenseStore", "RaggedStore", "RaggedBatch", "open_store", "release_buffers",
    "DTYPES", "CODECS", "DICT_TIERS",
    "NotAStoreError", "StoreNotFoundError", "StoreBusy", "CorruptStoreError", "ClosedError",
    "ZrError",
]

#: The closed set of record dtypes, as numpy little-endian dtype strings.
DTYPES = tuple(np.dtype(t).newbyteorder("<").str for t in (
    np.bool_, np.int8, np.int16, np.int32, np.int64,
    np.uint8, np.uint16, np.uint32, np.uint64,
    np.float16, np.float32, np.float64, np.complex64, np.complex128))

#: Codecs a store can be created with ('zstd_dict' needs ``dict_bytes``;
#: 'auto' picks raw or zstd at the first append).
CODECS = ("raw", "zstd", "zstd_dict", "auto")

_CODEC_IDS = {"raw": _zr.ZRE_CODEC_RAW, "zstd": _zr.ZRE_CODEC_ZSTD,
              "zstd_dict": _zr.ZRE_CODEC_ZSTD_DICT}

#: Dictionary tiers for ``loaderx.utils.train_dict``: name -> dict with the
#: dictionary size and the training sample budget, in bytes. A caller picks
#: a tier, never a number; 'balanced' is the default.
DICT_TIERS = {
    "fast": {"dict_bytes": _zr.ZRS_DICT_FAST_DICT_BYTES,
             "sample_bytes": _zr.ZRS_DICT_FAST_SAMPLE_BYTES},
    "balanced": {"dict_bytes": _zr.ZRS_DICT_BALANCED_DICT_BYTES,
                 "sample_bytes": _zr.ZRS_DICT_BALANCED_SAMPLE_BYTES},
    "max": {"dict_bytes": _zr.ZRS_DICT_MAX_DICT_BYTES,
            "sample_bytes": _zr.ZRS_DICT_MAX_SAMPLE_BYTES},
}

_MAX_NDIM = _zr.ZRS_MAX_NDIM

# Every open store of this process, for the fork hook below.
_OPEN_STORES = weakref.WeakSet()


def _forget_in_child():
    """After fork(), in the child: close the inherited descriptors of every
    open store (zrs_forget_after_fork). The child shares the parent's open
    file descriptions, so without this a child that never touches a store
    would keep the parent's store lock alive after the parent closed it.
    Nothing else of the handle is touched; see _Store._after_fork."""
    for st in list(_OPEN_STORES):
        h = st._h
        if h is not None:
            _zr.zrs_forget_after_fork(h)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)


def _normalize_dtype(dtype):
    """``np.dtype(dtype)`` in little-endian form, restricted to DTYPES.
    ``None`` is refused: numpy reads it as float64, which is never what a
    missing dtype means."""
    if dtype is None:
        raise TypeError("dtype is required, got None (numpy would read None as float64); "
                        "pass the records' dtype, e.g. np.float32 or '<f4'")
    try:
        dt = np.dtype(dtype)  # numpy's objects and spellings, as numpy reads them
    except TypeError as exc:
        raise ValueError(f"unsupported dtype {dtype!r}: {exc}") from None
    try:  # the set and the byte order: the one C rule (zrs_dtype_from_name)
        code, _big_endian = _zr.zrs_dtype_from_name(dt.str)
    except ValueError:
        raise ValueError(f"unsupported dtype {dtype!r} ({dt.str}); expected one of "
                         f"{', '.join(np.dtype(d).name for d in DTYPES)}") from None
    return np.dtype(_zr.zrs_dtype_str(code))


def _as_store_order(arr, want):
    """``arr`` converted to the store's little-endian dtype ``want`` when it
    holds the same type in the other byte order (one copy); unchanged
    otherwise, for the caller's dtype check to refuse."""
    got = arr.dtype
    if got != want and got.newbyteorder("<") == want:
        return arr.astype(want, order="C")
    return arr


def _normalize_codec(codec, dict_bytes):
    """(codec id, dictionary bytes or None)."""
    if codec not in _CODEC_IDS:
        if codec == "auto":
            raise ValueError("dict_bytes is only meaningful with codec 'zstd_dict', not 'auto'")
        raise ValueError(f"unknown codec {codec!r}; expected one of {CODECS}")
    if codec == "zstd_dict":
        if dict_bytes is None:
            raise ValueError("codec 'zstd_dict' needs dict_bytes: train a dictionary first "
                             "with loaderx.utils.train_dict on the settled data")
        try:
            d = bytes(memoryview(dict_bytes).cast("B"))
        except TypeError:
            raise TypeError("dict_bytes must be a bytes-like object, got "
                            f"{type(dict_bytes).__name__}") from None
        if not d:
            raise ValueError("dict_bytes is empty")
        return _CODEC_IDS[codec], d
    if dict_bytes is not None:
        raise ValueError(f"dict_bytes is only meaningful with codec 'zstd_dict', not {codec!r}")
    return _CODEC_IDS[codec], None


def _normalize_item_shape(item_shape):
    if isinstance(item_shape, (int, np.integer)) and not isinstance(item_shape, bool):
        item_shape = (item_shape,)
    try:
        shape = tuple(operator.index(d) for d in item_shape)
    except TypeError:
        raise ValueError(f"item_shape must be a tuple of ints, got {item_shape!r}") from None
    if len(shape) > _MAX_NDIM:
        raise ValueError(f"item_shape has {len(shape)} dims, at most {_MAX_NDIM} allowed")
    if any(d < 1 for d in shape):
        raise ValueError(f"item_shape dims must all be >= 1, got {shape}")
    return shape


def _fspath(path):
    path = os.fspath(path)
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    return path


def _normalize_key(key, n):
    """Turn an index expression into ``(True, i)`` for one record (i
    already wrapped into [0, n)) or ``(False, idx)`` with idx a C-contiguous
    int64 ndarray of absolute indices (any ndim; 1-D except for int
    arrays of higher rank)."""
    if isinstance(key, (bool, np.bool_)):
        raise TypeError("a store index must be an int, slice, int array, bool mask "
                        "or tuple of ints, not a bool")
    if isinstance(key, (int, np.integer)):
        i = int(key)
        if i < -n or i >= n:
            raise IndexError(f"index {i} out of range for store of {n} records")
        return True, i + n if i < 0 else i
    if isinstance(key, slice):
        return False, np.arange(*key.indices(n), dtype=np.int64)
    if isinstance(key, tuple):
        try:
            items = [operator.index(k) for k in key]
        except TypeError:
            raise TypeError("a tuple index selects a record set and must hold ints only, "
                            f"got {key!r}") from None
        if any(isinstance(k, (bool, np.bool_)) for k in key):
            raise TypeError(f"a tuple index must hold ints, not bools: {key!r}")
        arr = np.array(items, dtype=np.int64)
    else:
        arr = np.asarray(key)
        if arr.dtype == np.bool_:
            if arr.ndim != 1 or arr.shape[0] != n:
                raise IndexError(f"boolean mask has shape {arr.shape}, expected ({n},) "
                                 f"to match the store length")
            return False, np.flatnonzero(arr).astype(np.int64, copy=False)
        if arr.size == 0:
            return False, np.empty(arr.shape, dtype=np.int64)
        if arr.dtype.kind == "u":
            if arr.max() > np.iinfo(np.int64).max:
                raise IndexError(f"index {int(arr.max())} out of range for store of {n} records")
            arr = arr.astype(np.int64)
        elif arr.dtype.kind != "i":
            raise TypeError(f"index arrays must hold integers or bools, got dtype {arr.dtype}")
        if arr.ndim == 0:
            return _normalize_key(int(arr), n)
    arr = np.ascontiguousarray(arr, dtype=np.int64)
    if arr.size:
        # Two reductions settle the common case (all indices already in
        # [0, n)); the masks are built only when something needs wrapping or
        # is out of range. This runs once per gather, so it is on the hot
        # path of every small-record batch.
        lo, hi = int(arr.min()), int(arr.max())
        if lo < 0 or hi >= n:
            bad = (arr < -n) | (arr >= n)
            if bad.any():
                first = int(arr.reshape(-1)[np.flatnonzero(bad.reshape(-1))[0]])
                raise IndexError(f"index {first} out of range for store of {n} records")
            arr = np.where(arr < 0, arr + n, arr)
    return False, arr


def _unpack_ragged(buf, bounds, dtype):
    """Split a uint8 ndarray of packed ragged records ([u64le ndim][u64le
    dims][payload] each, record j at buf[bounds[j]:bounds[j+1]]) into a
    list of ndarrays of ``dtype``: views into ``buf``, made by one native
    call (CorruptStoreError naming the batch position for a bad prefix)."""
    dtype = np.dtype(dtype)
    return _zr.zrs_ragged_arrays(buf, np.ascontiguousarray(bounds, dtype=np.uint64),
                                 _zr.zrs_dtype_parse(dtype.str), dtype)


class _BufferPool:
    """Reused result buffers for gathers of _MIN_BYTES or more (see the
    module docstring). A pooled buffer is a uint8 ndarray that only this
    pool references while idle: every array handed out is a view whose
    base is that buffer, so its reference count tells when the last view
    has gone. Fresh memory costs a page fault and a kernel zero-fill per
    page on its first write (about as long as the gather's own copy of a
    dense 37 MiB batch); a reused buffer is already mapped."""

    _MIN_BYTES = 1 << 20
    _SLOTS = 4
    _CAP_BYTES = 256 << 20

    def __init__(self):
        self._lock = threading.Lock()
        self._bufs = []

    def _idle(self, k):
        # References: the list and getrefcount's argument.
        return sys.getrefcount(self._bufs[k]) <= 2

    def empty(self, shape, dtype):
        """An uninitialised C-contiguous array of ``shape`` and ``dtype``."""
        dtype = np.dtype(dtype)
        count = 1
        for d in shape:
            count *= d
        nbytes = count * dtype.itemsize
        if nbytes < self._MIN_BYTES:
            return np.empty(shape, dtype)
        with self._lock:
            bufs = self._bufs
            spare = None
            for k in range(len(bufs)):
                if self._idle(k):
                    size = bufs[k].size
                    if nbytes <= size <= nbytes + (nbytes >> 2):
                        return bufs[k][:nbytes].view(dtype).reshape(shape)
                    spare = k
            held = sum(b.size for b in bufs)
            if spare is not None and held - bufs[spare].size + nbytes <= self._CAP_BYTES:
                del bufs[spare]
                held = sum(b.size for b in bufs)
            if len(bufs) >= self._SLOTS or held + nbytes > self._CAP_BYTES:
                return np.empty(shape, dtype)
            buf = np.empty(nbytes, dtype=np.uint8)
            bufs.append(buf)
            return buf.view(dtype).reshape(shape)

    def release(self):
        """Free the idle buffers; returns how many bytes were released."""
        with self._lock:
            keep, freed = [], 0
            for k in range(len(self._bufs)):
                if self._idle(k):
                    freed += self._bufs[k].size
                else:
                    keep.append(self._bufs[k])
            self._bufs = keep
        return freed


_POOL = _BufferPool()
_POOL_MIN_BYTES = _BufferPool._MIN_BYTES


def release_buffers():
    """Free the idle result buffers that ``store[idx]`` keeps for reuse
    (see the module docstring). Buffers still viewed by some array stay.
    Returns the number of bytes released."""
    return _POOL.release()


_INT64_MAX = np.iinfo(np.int64).max


def _fast_index(key):
    """A 1-D C-contiguous int64 array for the native gather, without a
    copy, when ``key`` already is one (or a uint64 one below 2**63), else
    None. Negative entries are left to the native call (which wraps them
    and checks every index against the length it sees)."""
    if type(key) is not np.ndarray or key.ndim != 1 or not key.flags.c_contiguous:
        return None
    kind, size = key.dtype.kind, key.dtype.itemsize
    if size != 8 or kind not in "iu" or not key.dtype.isnative:
        return None
    if kind == "u":
        if key.size and int(key.max()) > _INT64_MAX:
            return None
        return key.view(np.int64)
    return key


class RaggedBatch:
    """A gathered ragged batch as one buffer (``RaggedStore.gather_packed``).

    ``data``: 1-D ndarray of the store's dtype, every record's elements
    back to back in batch order (C order within a record).
    ``offsets``: int64 ndarray of ``len + 1`` element offsets; record ``j``
    is ``data[offsets[j]:offsets[j+1]]``.
    ``shapes``: list of the records' shape tuples.

    ``batch[j]`` is record ``j`` as a view of ``data`` in its own shape;
    ``batch.arrays()`` all of them as a list; ``batch.sizes`` the element
    count of each record (int64 ndarray)."""

    __slots__ = ("data", "offsets", "shapes")

    def __init__(self, data, offsets, shapes):
        self.data, self.offsets, self.shapes = data, offsets, shapes

    def __len__(self):
        return len(self.shapes)

    def __getitem__(self, j):
        n = len(self.shapes)
        j = operator.index(j)
        if j < -n or j >= n:
            raise IndexError(f"record {j} out of range for a batch of {n} records")
        j = j + n if j < 0 else j
        o = self.offsets
        return self.data[int(o[j]):int(o[j + 1])].reshape(self.shapes[j])

    @property
    def sizes(self):
        """Elements per record, int64 ndarray of ``len(self)``."""
        return np.diff(self.offsets)

    def arrays(self):
        """Every record as a view of ``data`` in its own shape (a list)."""
        o = self.offsets.tolist()
        d = self.data
        return [d[o[j]:o[j + 1]].reshape(sh) for j, sh in enumerate(self.shapes)]

    def __repr__(self):
        return (f"RaggedBatch({len(self)} records, {self.data.size} elements of "
                f"{self.data.dtype.str})")


# Big appends and gathers go to the native library in slices of at most
# this many bytes: the interpreter runs signal handlers between native
# calls only, so Ctrl-C takes effect within one slice instead of after the
# whole call. Gathers take whole slices (a read is fast whatever the
# codec); appends size each slice by the speed of the last one
# (zrs_slice_bytes: about 50 ms each, so zstd_dict's slow level 19 gets
# small slices and raw big ones). An interrupted append has committed the
# slices before the interrupt: a prefix of whole records (len() tells how
# many), never a partial record.
_SLICE_BYTES = 32 << 20


def _slice_records(record_bytes):
    """Records per slice for records of `record_bytes` bytes (>= 1)."""
    return max(1, _SLICE_BYTES // max(1, record_bytes))


def _timed_slices(nbytes, bounds=None, count=None):
    """(first, end) record ranges for an append, each sized by
    zrs_slice_bytes from the time the previous one took (the caller sends
    them one by one and reports each duration through the generator's
    send). Dense: `count` records of nbytes/count bytes; ragged: byte
    `bounds` (count + 1 offsets). At least one record per range."""
    n = count if bounds is None else len(bounds) - 1
    rec = nbytes // n if bounds is None else 0
    a, last = 0, (0, 0)
    while a < n:
        want = _zr.zrs_slice_bytes(last[0], last[1], _SLICE_BYTES)
        if bounds is None:
            b = min(n, a + max(1, want // rec))
        else:
            b = int(np.searchsorted(bounds, int(bounds[a]) + want, side="right")) - 1
            b = min(n, max(a + 1, b))
        took = yield a, b
        last = ((b - a) * rec if bounds is None else int(bounds[b]) - int(bounds[a]), took)
        a = b


def _send_slices(slices, send):
    """Run send(a, b) over _timed_slices, timing each; the first result."""
    first = None
    try:
        a, b = next(slices)
        while True:
            t0 = time.perf_counter_ns()
            got = send(a, b)
            first = got if first is None else first
            a, b = slices.send(max(1, time.perf_counter_ns() - t0))
    except StopIteration:
        pass
    return first


def _byte_slices(bounds):
    """(first, end) record ranges of about _SLICE_BYTES each from ragged
    byte bounds (count + 1 offsets); at least one record per range."""
    n = len(bounds) - 1
    if int(bounds[-1]) <= _SLICE_BYTES:
        return [(0, n)]
    cuts = np.searchsorted(bounds, np.arange(_SLICE_BYTES, int(bounds[-1]), _SLICE_BYTES,
                                             dtype=np.uint64), side="right") - 1
    edges = sorted(set([0] + [int(c) for c in cuts if 0 < c < n] + [n]))
    return list(zip(edges[:-1], edges[1:]))


class _Store(_Closing):
    """Shared handle management of DenseStore and RaggedStore."""

    _kind = None

    def __init__(self, handle):
        # Private: use the create()/open() classmethods.
        self._h = handle
        self._pending = None  # codec='auto' before its first append: makes the handle
        self._path = _zr.zrs_path(handle)
        self._dtype = np.dtype(_zr.zrs_dtype_str(_zr.zrs_get_dtype(handle)))
        self._codec = _zr.zre_codec_name(_zr.zrs_get_codec(handle))
        # The process that opened the handle (fork detection, see _handle).
        self._pid = os.getpid()
        _OPEN_STORES.add(self)

    @classmethod
    def _auto(cls, path, dtype, make, **fields):
        """A store created with codec='auto': nothing on disk until its
        first append picks the codec (zrs_codec_auto) and make(codec id)
        creates it."""
        if os.path.lexists(path):
            raise FileExistsError(errno.EEXIST, f"create: {path} already exists", path)
        self = cls.__new__(cls)
        self._h, self._pending = None, make
        self._path, self._dtype, self._codec = path, dtype, "auto"
        self._pid = os.getpid()
        for k, v in fields.items():
            setattr(self, k, v)
        _OPEN_STORES.add(self)
        return self

    def _materialize(self, codec):
        """Create the store of a codec='auto' store with `codec`."""
        make = self._pending
        self._h = make(_CODEC_IDS[codec])
        self._pending = None
        self._codec = codec

    def _choose_codec(self, data, bounds, record_size, count):
        """codec='auto' at the first append: raw unless zstd shrinks a
        sample of these records by ZRS_AUTO_MIN_SAVING_PCT percent."""
        codec, _, _ = _zr.zrs_codec_auto(data, bounds, record_size, count)
        self._materialize("zstd" if codec == _zr.ZRE_CODEC_ZSTD else "raw")

    @classmethod
    def _from_open_handle(cls, handle, path):
        kind = _zr.zrs_get_kind(handle)
        if kind != cls._kind:
            _zr.zrs_close(handle)
            other = "DenseStore" if kind == _zr.ZRS_DENSE else "RaggedStore"
            raise ValueError(f"{path!r} is a {other.replace('Store', '').lower()} store; "
                             f"open it with {other}.open")
        return cls(handle)

    @classmethod
    def open(cls, path, readonly=False, recover=False):
        """Open an existing store for reading and appending, or with
        ``readonly=True`` for reading only. As in LMDB, one writable handle
        and any number of read-only handles, in any processes, may be open
        at once. A read-only handle sees the records committed when it
        opened; :meth:`refresh` shows it later commits.

        ``recover=True`` (writable only): after a crash or power loss lost
        appends that were never synced, keep every record that reached the
        disk (every record whose ``sync()`` returned) and rewrite the
        header to them; a plain open refuses such a store, naming this.

        Raises StoreNotFoundError (a FileNotFoundError and a
        NotAStoreError) for a missing path, NotAStoreError if ``path`` is
        not a store (missing or malformed store.zr), StoreBusy if another
        writable handle has it open (for a writable open; the message
        names readonly=True) or a delete/compact runs on it, an OSError
        naming readonly=True for a writable open on read-only media,
        ValueError if it is a store of the other kind."""
        path = _fspath(path)
        return cls._from_open_handle(_open_handle(path, readonly, recover), path)

    # ---------------------------------------------------------- lifecycle

    def _handle(self):
        h = self._h
        if h is None:
            if self._pending is None:
                raise closed("store")
            # codec='auto', used before its first append: the default codec.
            self._materialize("zstd")
            h = self._h
        if self._pid != os.getpid():
            h = self._after_fork()
        return h

    def _is_readonly(self):
        check = getattr(_zr, "zrs_is_readonly", None)
        return bool(check and self._h is not None and check(self._h))

    def _after_fork(self):
        """First use in a forked child. The fork hook (_forget_in_child)
        already closed the handle's inherited descriptors, so the child
        does not pin the parent's lock; the rest of the handle (threads,
        mutexes, memory) is the parent's state copied mid-flight, so it is
        dropped without zrs_close (which would sync and free it) and leaks
        in the child by design. A read-only store reopens itself by path; a
        writable one raises, since the store's one writer stays the
        parent."""
        readonly = self._is_readonly()
        parent = self._pid
        self._h = None
        if not readonly:
            raise RuntimeError(
                f"store {self._path!r} was opened writable in process {parent} and is "
                f"used in process {os.getpid()} after fork(): a writable handle cannot "
                "cross a fork (the store's one writer stays the parent); open the store "
                "again in the child, or open it read-only (readonly=True) to share it")
        fresh = type(self).open(self._path, readonly=True)
        self._h, fresh._h = fresh._h, None
        self._pid = os.getpid()
        return self._h

    def __reduce__(self):
        # Pickling (e.g. the spawn start method) reopens the store by path,
        # read-only, in the receiving process: a writable store pickled for
        # spawn workers becomes a reader there (the one writer stays with
        # this process), seeing the records committed when it reopens.
        if self._h is None:
            raise TypeError(f"cannot pickle {type(self).__name__} {self._path!r}: it is closed")
        return (_reopen_readonly, (type(self), self._path))

    def refresh(self):
        """See the records committed since this handle opened or last
        refreshed; returns the new ``len(self)``. A read-only handle's
        length changes only here (it grows to the writer's committed
        length, never past it). A writable handle always sees its own
        appends, so this only returns its length."""
        h = self._handle()
        _zr.zrs_refresh(h)
        return int(_zr.zrs_length(h))

    @property
    def closed(self):
        """True once close() was called."""
        return self._h is None and self._pending is None

    def close(self):
        """Make everything durable, release the lock and the handle.
        Idempotent. A DataLoader still reading this store is closed by it:
        its ``closed`` turns True and its ``next()`` raises ClosedError.
        A codec='auto' store closed before any append is created (zstd),
        so the path holds an empty store."""
        if self._pending is not None and self._pid == os.getpid():
            self._materialize("zstd")
        h = self._h
        if h is None:
            return
        self._h = None
        if self._pid != os.getpid():
            return  # a forked child: the parent's handle is left untouched
        _zr.zrs_close(h)

    # -------------------------------------------------------- maintenance

    @property
    def readonly(self):
        """True for a handle opened with ``readonly=True``."""
        return bool(_zr.zrs_is_readonly(self._handle()))

    def delete(self, idx):
        """Delete records by swap-last: every index form of reads (int,
        slice, int array, bool mask, tuple of ints; negatives wrap;
        duplicates count once). Applied in descending index order, each
        hole takes the current last record, so the live records stay
        exactly ``0..len(self)`` and survivors past the new length are
        renumbered. Atomic (a crash leaves all or nothing). Needs exclusive
        use: StoreBusy while a DataLoader or another thread reads this
        store; NotImplementedError on a read-only handle. The bytes are
        reclaimed by :meth:`compact`."""
        h = self._handle()  # StoreBusy from the library while a loader reads it
        one, sel = _normalize_key(idx, int(_zr.zrs_length(h)))
        arr = np.array([sel], dtype=np.int64) if one else sel.reshape(-1)
        if arr.size:
            _zr.zrs_delete(h, np.ascontiguousarray(arr, dtype=np.int64))

    def stats(self):
        """Space accounting: ``{'records', 'live_bytes', 'chunk_bytes',
        'reclaimable'}`` (bytes as stored; ``reclaimable`` is what
        :meth:`compact` can release, an upper bound)."""
        st = _zr.zre_get_stats(_zr.zrs_engine(self._handle()))
        return {k: int(st[k]) for k in ("records", "live_bytes", "chunk_bytes", "reclaimable")}

    def compact(self):
        """Reclaim the bytes of deleted records, in place and offline (it
        needs exclusive use, like :meth:`delete`). Indices and contents do
        not change. Safe to interrupt: Ctrl-C stops it after the batch in
        flight (at most 4,096 records or 64 MiB) and raises
        KeyboardInterrupt; every record then reads as before, and running
        compact again finishes the job."""
        h = self._handle()  # StoreBusy from the library while a loader reads it
        engine = _zr.zrs_engine(h)
        _zr.zre_interrupt(engine, 0)  # withdraw a request an earlier Ctrl-C left
        _interruptible(_zr.zrs_compact, h, stop=lambda: _zr.zre_interrupt(engine, 1))

    def sync(self):
        """Make every appended record durable (payload, then record table,
        then header). ``close()`` syncs too."""
        _zr.zrs_sync(self._handle())

    # -------------------------------------------------------- properties

    @property
    def dtype(self):
        """The record dtype (np.dtype, little-endian)."""
        return self._dtype

    @property
    def codec(self):
        """'raw', 'zstd' or 'zstd_dict' ('auto' for a codec='auto' store
        before its first append)."""
        return self._codec

    @property
    def path(self):
        """The store directory, as given at create/open."""
        return self._path

    @property
    def uuid(self):
        """The store's uuid (str, 36 characters), which names its records:
        made at create, kept by appends, compact and ``zr recode``,
        replaced by :meth:`delete`. A loader state records it, so a resume
        on another store, or after a delete, is refused. None for a store
        written before uuids existed (until its first delete)."""
        return _zr.zrs_get_uuid(self._handle())

    def __len__(self):
        # Fixed between refresh() calls on a read-only handle; a writable
        # handle's length grows with its own appends.
        if self._pending is not None:
            return 0
        return int(_zr.zrs_length(self._handle()))

    def info(self):
        """A dict describing the store: kind, dtype, codec, path, records,
        uuid (and item_shape for a dense store)."""
        d = {"kind": "dense" if self._kind == _zr.ZRS_DENSE else "ragged",
             "dtype": self._dtype.str, "codec": self._codec, "path": self._path,
             "records": len(self), "uuid": self.uuid}
        if self._kind == _zr.ZRS_DENSE:
            d["item_shape"] = self._item_shape
        return d


class DenseStore(_Store):
    """A store of fixed-shape records: every record is one
    ``item_shape`` array of ``dtype``.

    ``store[i]`` returns one record: an ``item_shape`` ndarray, or a numpy
    scalar for a scalar store (``item_shape == ()``), like indexing a 1-D
    numpy array. Any other selection of n records returns a fresh
    ``(n, *item_shape)`` ndarray (``(*idx.shape, *item_shape)`` for an
    N-d int index array), gathered in one native call without the GIL.
    """

    _kind = _zr.ZRS_DENSE

    def __init__(self, handle):
        super().__init__(handle)
        self._item_shape = tuple(int(d) for d in _zr.zrs_item_shape(handle))
        self._record_size = int(_zr.zrs_record_size(handle))
        self._slice_n = _slice_records(self._record_size)

    @classmethod
    def create(cls, path, dtype, item_shape, codec="zstd", dict_bytes=None):
        """Create a new dense store at ``path`` (which must not exist:
        FileExistsError) and return it open for appending.

        dtype: anything ``np.dtype()`` takes, within DTYPES (ValueError
            naming the dtype otherwise) except None (TypeError: numpy
            would read it as float64); stored little-endian ('>i4' makes
            an '<i4' store, and append converts '>i4' data).
        item_shape: tuple of ints >= 1 (``()`` for scalar records, e.g.
            labels; a bare int means a 1-tuple).
        codec: 'zstd' (default, level 3 per record), 'raw', 'auto', or
            'zstd_dict' (level 19 against ``dict_bytes``, a dictionary from
            :func:`loaderx.utils.train_dict`; required for it, refused for
            the others). 'auto' picks at the first append: raw unless zstd
            shrinks a sample of those records by at least 10%
            (zrs_codec_auto; an int64 label becomes a 21-byte zstd frame,
            so labels and other small incompressible records go raw). An
            'auto' store is created on disk at that first append (or at
            anything else that needs it before then, with zstd).
        """
        path = _fspath(path)
        dt = _normalize_dtype(dtype)
        shape = _normalize_item_shape(item_shape)
        dt_id = _zr.zrs_dtype_parse(dt.str)
        if codec == "auto" and dict_bytes is None:
            size = dt.itemsize * int(np.prod(shape, dtype=np.int64))
            return cls._auto(path, dt, lambda c: _zr.zrs_create_dense(path, dt_id, shape, c),
                             _item_shape=shape, _record_size=size,
                             _slice_n=_slice_records(size))
        codec_id, d = _normalize_codec(codec, dict_bytes)
        if d is not None:
            return cls(_zr.zrs_create_dense_dict(path, dt_id, shape, codec_id, d))
        return cls(_zr.zrs_create_dense(path, dt_id, shape, codec_id))

    @property
    def item_shape(self):
        """The shape of one record (tuple; ``()`` for scalar records)."""
        return self._item_shape

    @property
    def nbytes(self):
        """Uncompressed bytes of all records (len * record bytes)."""
        return len(self) * self._record_size

    def __repr__(self):
        state = "closed" if self._h is None else f"{len(self)} records"
        return (f"DenseStore({self._path!r}, dtype={self._dtype.str!r}, "
                f"item_shape={self._item_shape}, codec={self._codec!r}, {state})")

    def append(self, x):
        """Append ``B`` records from ``x``, an array of shape
        ``(B, *item_shape)`` (a 1-D array for a scalar store) and exactly
        the store's dtype (no casting: ValueError naming expected and got).
        The same type in the other byte order (e.g. ``'>i4'`` data for an
        ``'<i4'`` store) is accepted and converted (one copy).
        Non-contiguous input is copied once to C order. Returns the index
        of the first new record (``len(self)`` for B == 0, a no-op).
        Nothing is written if anything is refused."""
        h = None if self._pending is not None else self._handle()
        arr = x if isinstance(x, np.ndarray) else np.asarray(x)
        arr = _as_store_order(arr, self._dtype)
        if arr.dtype != self._dtype:
            raise ValueError(f"append: expected dtype {self._dtype.str} ({self._dtype.name}), "
                             f"got {arr.dtype.str} ({arr.dtype.name}); cast explicitly "
                             "with .astype() if intended")
        if arr.ndim != 1 + len(self._item_shape) or tuple(arr.shape[1:]) != self._item_shape:
            exp = "(B, " + ", ".join(str(d) for d in self._item_shape) + ")" \
                if self._item_shape else "(B,)"
            raise ValueError(f"append: expected shape {exp} for item_shape {self._item_shape}, "
                             f"got {tuple(arr.shape)}")
        count = arr.shape[0]
        if count == 0:
            return len(self) if h is None else int(_zr.zrs_length(h))
        arr = np.ascontiguousarray(arr)
        if self._pending is not None:
            self._choose_codec(arr, None, self._record_size, count)
        # In timed slices, so that Ctrl-C is seen between them (see _SLICE_BYTES).
        return _send_slices(_timed_slices(arr.nbytes, count=count), lambda a, b: int(
            _zr.zrs_append_dense(self._handle(), arr[a:b], b - a)))

    def _gather(self, idx, out=None, key=None):
        """Records at the absolute (or, with `key`, not yet checked) int64
        indices `idx` into `out` (a fresh array if None). With `key`, an
        IndexError of the native check is re-raised by _normalize_key(key)
        so the message is the same on both paths."""
        n = idx.size
        if out is None:
            shape = idx.shape + self._item_shape
            out = (np.empty(shape, self._dtype) if n * self._record_size < _POOL_MIN_BYTES
                   else _POOL.empty(shape, self._dtype))
        if n:
            h = self._handle()
            per = self._slice_n
            try:
                if n <= per:
                    # Both are C-contiguous buffers: no reshape needed.
                    _zr.zrs_gather_dense(h, idx, out)
                else:
                    flat, dst = idx.reshape(-1), out.reshape((n,) + self._item_shape)
                    for a in range(0, n, per):
                        _zr.zrs_gather_dense(self._handle(), flat[a:a + per], dst[a:a + per])
            except IndexError:
                if key is not None:
                    _normalize_key(key, int(_zr.zrs_length(self._handle())))
                raise
        return out

    def _check_out(self, out, shape):
        if not isinstance(out, np.ndarray):
            raise TypeError(f"gather: out must be a numpy ndarray, got {type(out).__name__}")
        if out.dtype != self._dtype:
            raise ValueError(f"gather: out has dtype {out.dtype.str} ({out.dtype.name}), the "
                             f"store's is {self._dtype.str} ({self._dtype.name}); no casting")
        if out.shape != shape:
            raise ValueError(f"gather: out has shape {out.shape}, the selection needs {shape}")
        if not out.flags.c_contiguous:
            raise ValueError("gather: out must be C-contiguous")
        if not out.flags.writeable:
            raise ValueError("gather: out is read-only")

    def gather(self, idx, out=None):
        """The records at ``idx``, like numpy's ``take(..., axis=0)``:
        ``idx`` is any selection ``store[idx]`` takes (an int gives one
        record of shape ``item_shape``); the result has shape
        ``(*idx_shape, *item_shape)``.

        out: None (a fresh array, as ``store[idx]``) or an ndarray to
            write into and return: exactly the store's dtype (no casting),
            exactly the result's shape, C-contiguous and writable. A wrong
            ``out`` is refused before anything is read: TypeError if it is
            not an ndarray, ValueError naming the mismatch otherwise.
            An index error (IndexError) leaves ``out``'s contents
            unspecified. Reusing one ``out`` across batches saves the
            allocation and the page faults of a fresh array."""
        h = self._handle()
        fast = _fast_index(idx)
        if fast is not None:
            sel, key = fast, idx
        else:
            one, sel = _normalize_key(idx, int(_zr.zrs_length(h)))
            if one:
                sel = np.array(sel, dtype=np.int64)
            key = None
        if out is not None:
            self._check_out(out, sel.shape + self._item_shape)
            if np.may_share_memory(out, sel):
                sel = sel.copy()  # the indices are read while out is written
        return self._gather(sel, out, key)

    def __getitem__(self, key):
        fast = _fast_index(key)
        if fast is not None:
            return self._gather(fast, None, key)
        h = self._handle()
        one, sel = _normalize_key(key, int(_zr.zrs_length(h)))
        if one:
            rec = self._gather(np.array([sel], dtype=np.int64))[0]
            return rec
        return self._gather(sel)

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]


class RaggedStore(_Store):
    """A store of variable-shape records of one dtype: each record keeps
    its own shape (ndim <= 32; ``()`` and zero-size shapes such as
    ``(0, 4)`` allowed).

    ``store[i]`` returns one ndarray of the record's exact shape; any other
    selection returns a list of ndarrays (views into one freshly gathered
    buffer, so they share memory with each other but not with the store).
    A RaggedStore has no ``item_shape`` attribute (AttributeError).
    """

    _kind = _zr.ZRS_RAGGED

    @classmethod
    def create(cls, path, dtype, codec="zstd", dict_bytes=None):
        """Create a new ragged store of ``dtype`` at ``path`` (must not
        exist: FileExistsError); arguments as in DenseStore.create."""
        path = _fspath(path)
        dt = _normalize_dtype(dtype)
        dt_id = _zr.zrs_dtype_parse(dt.str)
        if codec == "auto" and dict_bytes is None:
            return cls._auto(path, dt, lambda c: _zr.zrs_create_ragged(path, dt_id, c))
        codec_id, d = _normalize_codec(codec, dict_bytes)
        if d is not None:
            return cls(_zr.zrs_create_ragged_dict(path, dt_id, codec_id, d))
        return cls(_zr.zrs_create_ragged(path, dt_id, codec_id))

    def __repr__(self):
        state = "closed" if self._h is None else f"{len(self)} records"
        return (f"RaggedStore({self._path!r}, dtype={self._dtype.str!r}, "
                f"codec={self._codec!r}, {state})")

    def append(self, records):
        """Append one record per array in ``records`` (any iterable, e.g. a
        list or a generator; consumed fully before anything is written).
        Each must have exactly the store's dtype (or the same type in the
        other byte order, converted with one copy) and ndim <= 32
        (ValueError naming the record otherwise); a record may have no
        elements (shape ``(0,)``, ``(0, 4)``: its shape is kept). Records
        are packed as [u64le ndim][u64le dims][payload] into one buffer and
        appended in one native call. Returns the first new index
        (``len(self)`` for no records, a no-op).

        A bare ndarray as ``records``: 2-D or more means one record per row
        (``arr[0]``, ``arr[1]``, ...); 0-D or 1-D is refused (TypeError),
        since it is ambiguous: write ``append([arr])`` for one record, or
        ``append(list(arr))`` for one scalar record per element."""
        h = None if self._pending is not None else self._handle()
        if isinstance(records, np.ndarray) and records.ndim < 2:
            raise TypeError(
                f"append: a bare {records.ndim}-D ndarray of shape {records.shape} is ambiguous "
                "(records is an iterable of records); use append([arr]) to append it as one "
                "record, or append(list(arr)) to append one scalar record per element")
        dt = self._dtype
        arrays = []
        for j, r in enumerate(records):
            a = r if isinstance(r, np.ndarray) else np.asarray(r)
            a = _as_store_order(a, dt)
            if a.dtype != dt:
                raise ValueError(f"append: record {j}: expected dtype {dt.str} ({dt.name}), "
                                 f"got {a.dtype.str} ({a.dtype.name})")
            arrays.append(np.require(a, requirements="C"))  # keeps 0-d records 0-d
        if not arrays:
            return len(self) if h is None else int(_zr.zrs_length(h))
        # Packed natively (zrs_ragged_encode), which checks each shape.
        packed, bounds = _zr.zrs_ragged_encode(arrays, dt.str)
        return self._append_packed(packed, bounds)

    def _append_packed(self, packed, bounds):
        """Append records already packed (uint8 ``packed``, record j at
        ``packed[bounds[j]:bounds[j+1]]``, uint64 ``bounds`` from 0, at
        least one record) in committed slices; returns the first new index."""
        if self._pending is not None:
            self._choose_codec(packed, bounds, 0, len(bounds) - 1)

        def send(a, b):
            lo = int(bounds[a])
            return int(_zr.zrs_append_ragged(self._handle(), packed[lo:int(bounds[b])],
                                             bounds[a:b + 1] - np.uint64(lo)))
        return _send_slices(_timed_slices(int(bounds[-1]), bounds=bounds), send)

    def _gather_buffer(self, idx):
        """(buf, bounds) of the packed records at int64 indices idx."""
        h = self._handle()
        # A batch below the pool's size (where a fresh array costs nothing
        # extra) in one native call; larger ones in slices, pooled.
        once = _zr.zrs_ragged_gather_once(h, idx, _POOL_MIN_BYTES)
        if once is not None:
            return once
        sizes = _zr.zrs_ragged_sizes(h, idx)
        bounds = np.zeros(idx.size + 1, dtype=np.uint64)
        np.cumsum(sizes, out=bounds[1:])
        buf = _POOL.empty((int(bounds[-1]),), np.uint8)
        for a, b in _byte_slices(bounds):
            lo = int(bounds[a])
            _zr.zrs_gather_ragged(self._handle(), idx[a:b], buf[lo:int(bounds[b])],
                                  bounds[a:b + 1] - np.uint64(lo))
        return buf, bounds

    def _gather(self, idx):
        if idx.size == 0:
            return []
        buf, bounds = self._gather_buffer(idx)
        return _zr.zrs_ragged_arrays(buf, bounds, _zr.zrs_get_dtype(self._handle()),
                                     self._dtype)

    def _select(self, key):
        """1-D int64 absolute indices of a selection (an int gives one)."""
        one, sel = _normalize_key(key, int(_zr.zrs_length(self._handle())))
        if one:
            return np.array([sel], dtype=np.int64)
        if sel.ndim != 1:
            raise IndexError(f"a ragged store takes 1-D index arrays, got shape {sel.shape}")
        return sel

    def gather_packed(self, idx):
        """The records at ``idx`` (any selection ``store[idx]`` takes; an
        int is a batch of one) as one :class:`RaggedBatch`: their elements
        back to back in one array, with element offsets and shapes, in
        selection order. The payloads are gathered with their shape
        prefixes and then moved down over them in one native pass (one
        extra copy of the batch, in cache for small records)."""
        fast = _fast_index(idx)
        sel = fast if fast is not None else self._select(idx)
        if sel.size == 0:
            return RaggedBatch(np.empty(0, self._dtype), np.zeros(1, np.int64), [])
        try:
            buf, bounds = self._gather_buffer(sel)
        except IndexError:
            if fast is not None:
                _normalize_key(idx, len(self))  # the message of the Python check
            raise
        elements, offsets, shapes = _zr.zrs_ragged_pack(buf, bounds,
                                                        _zr.zrs_get_dtype(self._handle()))
        data = buf[:elements * self._dtype.itemsize].view(self._dtype)
        return RaggedBatch(data, offsets, shapes)

    def __getitem__(self, key):
        fast = _fast_index(key)
        if fast is not None:
            try:
                return self._gather(fast)
            except IndexError:
                _normalize_key(key, len(self))
                raise
        if isinstance(key, (int, np.integer)) and not isinstance(key, (bool, np.bool_)):
            return self._gather(self._select(key))[0]
        return self._gather(self._select(key))

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]


def _reopen_readonly(cls, path):
    """Unpickling helper: open `path` read-only as `cls`."""
    return cls.open(path, readonly=True)


def _open_handle(path, readonly, recover=False):
    """zrs_open_ex; a writable open refused because another writer holds
    the store, or because the medium or the permissions are read-only,
    says how to read it anyway (readonly=True)."""
    flags = (_zr.ZRE_OPEN_READONLY if readonly else 0) | (_zr.ZRE_OPEN_RECOVER if recover else 0)
    try:
        return _zr.zrs_open_ex(path, flags)
    except OSError as exc:
        ro_media = getattr(exc, "errno", None) in (errno.EROFS, errno.EACCES, errno.EPERM)
        if readonly or not (ro_media or (isinstance(exc, StoreBusy) and "writable" in str(exc))):
            raise
        hint = ("; to read it beside that writer, open it with readonly=True"
                if isinstance(exc, StoreBusy)
                else "; on read-only media or without write permission, open it with "
                     "readonly=True (a read-only open writes nothing)")
        raise from_status(getattr(exc, "status", None) or ZR_EIO, str(exc) + hint,
                          getattr(exc, "errno", 0) or 0) from None


def open_store(path, readonly=False):
    """Open the store at ``path`` as a DenseStore or RaggedStore, whichever
    its store.zr says (``readonly`` as in ``DenseStore.open``)."""
    path = _fspath(path)
    h = _open_handle(path, readonly)
    cls = DenseStore if _zr.zrs_get_kind(h) == _zr.ZRS_DENSE else RaggedStore
    return cls(h)
