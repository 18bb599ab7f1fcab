"""Many stores as one dataset: concatenated shards and weighted mixtures.

A store has one writer. A dataset bigger than one writer is written as
many stores ("shards"), in parallel, by many processes or machines, and
read back as one:

``ConcatStore(shards, readonly=True)`` opens shards of one identity (the
same dtype and item_shape, or the same ragged dtype; codecs may differ) as
one store: ``len()`` is the sum, index ``i`` is located by prefix sums,
``store[i]`` / ``store[a:b]`` / ``store[int_array]`` read like a
DenseStore or RaggedStore, and a ``DataLoader`` takes it anywhere it takes
a store. ``shards`` is a glob pattern (sorted), a list of paths, or a list
of open stores (borrowed: they stay yours, and closing one closes the
concatenation first). A gather is one native call whose records land
straight in the result, threaded like one store's. Several concatenations
in one loader must be sharded alike (shard k of each of equal length), so
that index i is the same example in all of them: the loader checks it.

``write_shard(path, write)`` is the crash-safe way to write one shard: it
creates the store at ``path + ".partial"``, calls ``write(store)``, makes
it durable and renames it to ``path``, so a writer killed midway leaves the
shard absent (or a stale ``.partial``, which the next attempt replaces),
never half-written at ``path``.

``from_arrow(source, out, ...)`` and ``write_spark(df, out, ...)`` write
a dataset where it already lives, Arrow tables (Parquet, Arrow IPC,
Hugging Face datasets) or a Spark DataFrame, as a directory of sharded
columns: ``out/<column>/part-NNNNN``, one store per column and shard,
shard k of every column holding the same rows, so that
``ConcatStore(out + "/<column>/*")`` opens each column as one stream,
aligned with the others. ``out`` appears whole once every shard is durable,
or not at all.

``Mixture(sources, weights, modes=None)`` samples several datasets of
different lengths by weight. ``sources`` maps a source name to a dataset,
a dict ``{stream: store, ConcatStore, path or glob}`` with the same stream
names (and identities) in every source. Passed to ``DataLoader`` in place
of the stream dict, each batch position draws its source by weight and its
index inside the source by that source's own mode (``modes``: one mode for
all, or per source; None = the loader's ``mode``), as a pure function of
(seed, step, rank): resume with ``state()`` is exact and batch k is the same
whatever the thread count. The loader's ``last_indices`` are then positions
in a virtual index space; ``mixture.locate(loader)`` turns them into
(source names, indices inside the sources).
"""

import errno
import glob as _glob
import os
import weakref

import numpy as np

from . import _zr
from ._closing import Closing as _Closing
from .errors import closed
from .zrecord import DenseStore, RaggedStore, _normalize_key, _unpack_ragged, open_store
from .zsampler import _parse_mode, _u64

__all__ = ["ConcatStore", "Mixture", "from_arrow", "push", "shard_paths", "write_shard",
           "write_spark"]


def shard_paths(shards):
    """The shard list ``shards`` names: a glob pattern (any of ``*?[``)
    gives its matches sorted (ValueError if none match), another path is
    one shard, a sequence is taken as it is."""
    if isinstance(shards, (str, os.PathLike)):
        p = os.fspath(shards)
        if _is_url(p):
            # A shard set at a URL lists its shards in its manifest
            # (written last by push); without one, the URL is one store.
            urls = _zr.zsh_py_shard_urls(p)
            return urls if urls is not None else [p]
        if any(c in p for c in "*?["):
            found = sorted(_glob.glob(p))
            # a shard being written (.partial) or replaced (.old) is not one
            found = [f for f in found if not f.endswith((".partial", ".old"))]
            if not found:
                raise ValueError(f"no shards match {p!r}")
            return found
        return [p]
    items = list(shards)
    if not items:
        raise ValueError("no shards given, expected at least one store or path")
    return [s if isinstance(s, (DenseStore, RaggedStore)) else os.fspath(s) for s in items]


def _is_url(p):
    return isinstance(p, str) and p.startswith(("http://", "https://", "s3://"))


def push(shards, url):
    """Upload local stores to ``url`` (``http(s)://`` with PUT, or
    ``s3://bucket/prefix``) so that readers open them there read-only.

    One store (a path): it becomes the store at ``url`` (meta.zr is sent
    last, so no reader opens it half-uploaded). Several (a list or a glob,
    as :class:`ConcatStore` takes): each goes to ``url/<its folder
    name>``, then the manifest ``url/shards.zr`` last of all, and
    ``ConcatStore(url)`` opens the whole set. S3 credentials, region and
    endpoint come from the AWS environment variables and profile files.
    Raises FileExistsError if the URL already holds a store, OSError naming
    the object when an upload fails (after retries)."""
    url = os.fspath(url)
    if not _is_url(url):
        raise ValueError(f"{url!r} is not an http://, https:// or s3:// URL")
    if isinstance(shards, (str, os.PathLike)) and not any(c in os.fspath(shards) for c in "*?["):
        _zr.zsh_py_push(os.fspath(shards), url)
        return url
    paths = shard_paths(shards)
    if any(not isinstance(p, str) or _is_url(p) for p in paths):
        raise TypeError("push takes local store paths, not open stores or URLs")
    _zr.zsh_py_push_shards(paths, url)
    return url


def write_shard(path, create, write, upload=None):
    """Write one shard crash-safely: ``create(partial_path)`` must create
    and return a new store there (e.g. ``lambda p: DenseStore.create(p,
    "<f4", (28, 28))``), ``write(store)`` fills it; then the store is
    closed (synced) and renamed from ``path + ".partial"`` to ``path``. A
    ``.partial`` left by a killed earlier attempt is removed first, and an
    existing ``path`` (a finished earlier attempt) is replaced only after
    the new shard is complete (it is moved to ``path + ".old"`` for the
    moment of the swap; a swap killed in between is undone by the next
    call, and a swap whose second rename fails is undone before the error
    is raised, so ``path`` keeps the earlier shard). Globs given to
    :class:`ConcatStore` skip ``.partial`` and ``.old``. With ``upload`` (a
    URL), the finished shard is then pushed there (:func:`push`, meta.zr
    last); write the set's manifest with ``push(list_of_shards, set_url)``
    or read the shards by their URLs. Returns ``path``."""
    path = os.fspath(path)
    partial = _prepare_partial(path)
    store = create(partial)
    try:
        write(store)
    finally:
        store.close()  # syncs: payload, record table, header
    _swap_in(partial, path)
    if upload is not None:
        push(path, upload)
    return path


def from_arrow(source, out, columns=None, *, shapes=None, ragged=(), codec="zstd",
               dict_bytes=None, dict_tier="balanced", shard_rows=None, overwrite=False):
    """Write Arrow data as a dataset of sharded columns at ``out`` (see the
    module doc); pyarrow reads it. Returns ``{column: [shard paths]}``,
    e.g. ``{c: ConcatStore(p) for c, p in from_arrow(t, "ds").items()}``.

    source: a ``pyarrow.Table`` / ``RecordBatch`` / ``RecordBatchReader``,
        a ``pyarrow.dataset.Dataset``, a Hugging Face ``datasets.Dataset``
        (through its Arrow table, rows in the dataset's order), any object
        with ``__arrow_c_stream__``, or a path: a Parquet file, an Arrow IPC
        file or stream (Feather v2, the ``.arrow`` files of a Hugging Face
        ``save_to_disk``), a Feather v1 file, or a directory of Parquet
        files. Read in slices of about 16 MiB, so memory stays bounded.
    columns: the column names to write, in order (default: all).
    shapes: ``{column: item_shape}`` makes a list column dense, each row
        holding that shape (nested lists) or that many values (a flat
        list). ragged: column names to write ragged though they are fixed.
        Types map to stores as follows (the same for write_spark and
        ``zr ingest``): numbers and bools give dense scalar records;
        fixed-size lists, fixed-size binary, Arrow's ``fixed_shape_tensor``
        and Hugging Face's ``Array2D``-``Array5D`` give dense records of
        their shape; variable lists (nested too), binary and strings (as
        uint8 bytes) give ragged records, one per row, shaped by the
        nesting. TypeError names a column of another type; ValueError the
        column and row of a null, an empty row or a row of the wrong shape.
    codec: 'zstd' (default), 'raw' or 'zstd_dict', or a dict by column.
        dict_bytes: a zstd_dict dictionary (or a dict by column); without
        one, a dictionary of ``dict_tier`` is trained on the column's first
        records and used by all its shards.
    shard_rows: rows per shard (default None: one shard per column).
    overwrite: replace an existing ``out`` (FileExistsError otherwise),
        only once the new dataset is complete.

    A writer killed midway leaves ``out`` as it was, and its
    ``out.partial`` is removed by the next call."""
    from ._dataset import from_arrow as write

    return write(source, out, columns, shapes=shapes, ragged=ragged, codec=codec,
                 dict_bytes=dict_bytes, dict_tier=dict_tier, shard_rows=shard_rows,
                 overwrite=overwrite)


def write_spark(df, out, columns=None, *, shapes=None, ragged=(), codec="zstd", dict_bytes=None,
                overwrite=False):
    """Write a Spark DataFrame as a dataset of sharded columns at ``out``:
    one shard per partition (``part-<partition>``), written by the
    executors through :func:`write_shard`. Returns ``{column: [shard
    paths]}`` in partition order, like :func:`from_arrow`.

    Each task writes into a directory of its own attempt, and the driver
    commits only the attempts Spark accepted (one per partition), so a
    retried or speculative task never duplicates or loses a shard, and a
    failed job leaves ``out`` as it was. ``out`` must be a path the driver
    and every executor see (local mode; NFS or a mounted file system on a
    cluster); executors need loaderx and pyarrow.

    Columns are typed from the DataFrame's Arrow schema as in
    :func:`from_arrow`. Spark has no fixed-size arrays: an ``ArrayType`` or
    ``BinaryType`` column is ragged unless ``shapes`` gives its item
    shape (``shapes={"image": (28, 28)}`` for 784 bytes or a 28 x 28
    nested array per row). codec as in from_arrow; 'zstd_dict' needs
    ``dict_bytes`` (one dictionary for every partition: train it once with
    :func:`loaderx.utils.train_dict`)."""
    from ._spark import write_spark as write

    return write(df, out, columns, shapes=shapes, ragged=ragged, codec=codec,
                 dict_bytes=dict_bytes, overwrite=overwrite)


def _prepare_partial(path):
    """``path + ".partial"``, free for a new attempt: a leftover of a killed
    attempt is removed, and a replacement killed between its two renames
    (``path`` absent, ``path + ".old"`` present) is undone first."""
    import shutil

    partial, old = path + ".partial", path + ".old"
    if os.path.lexists(partial):
        shutil.rmtree(partial)
    if os.path.lexists(old):
        if os.path.lexists(path):
            shutil.rmtree(old)
        else:
            os.rename(old, path)
    return partial


def _swap_in(partial, path):
    """Rename the finished directory ``partial`` to ``path``, replacing an
    existing ``path`` through ``path + ".old"``; the directory entry is
    made durable. When the second rename fails, the first is undone before
    the error is raised (``path`` keeps what it held); if even that fails,
    the error says where the earlier copy waits (the next
    :func:`_prepare_partial` puts it back)."""
    import shutil

    old = path + ".old"
    if os.path.lexists(path):
        os.rename(path, old)
        try:
            os.rename(partial, path)
        except BaseException as exc:
            try:
                os.rename(old, path)
            except OSError as undo:
                raise OSError(exc.errno if isinstance(exc, OSError) else None,
                              f"cannot replace {path!r} with {partial!r} ({exc}), nor put the "
                              f"earlier copy back ({undo}): it waits at {old!r}, and the next "
                              "write of this path restores it") from exc
            raise
        shutil.rmtree(old)
    else:
        os.rename(partial, path)
    _fsync_dir(os.path.dirname(os.path.abspath(path)))


def _fsync_dir(d):
    """Make the entries of directory ``d`` durable. Skipped where a
    directory cannot be opened or fsynced at all (Windows; file systems
    answering EINVAL or ENOTSUP); any other fsync failure (EIO, ENOSPC) is
    raised, as a rename that may not survive a power loss is not done."""
    try:
        fd = os.open(d, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EBADF):
            raise OSError(exc.errno,
                          f"cannot make the entries of {d!r} durable: {exc.strerror}") from exc
    finally:
        os.close(fd)


class ConcatStore(_Closing):
    """Shards of one identity as one store (see the module doc)."""

    _zld_stream = True  # the DataLoader's generic-stream protocol
    _zsh_stream = True  # created by loaderx.shards (zsh_py_loader_create)

    def __init__(self, shards, readonly=True):
        self._h = None
        self._own, self._stores = [], []
        items = shard_paths(shards)
        try:
            for it in items:
                if isinstance(it, (DenseStore, RaggedStore)):
                    if it.closed:
                        raise closed(f"shard {it.path!r}")
                    self._stores.append(it)
                else:
                    s = open_store(it, readonly=readonly)
                    self._own.append(s)
                    self._stores.append(s)
            self._pid = os.getpid()
            self._h = _zr.zsh_py_concat_create([s._handle() for s in self._stores])
        except BaseException:
            for s in self._own:
                s.close()
            raise
        first = self._stores[0]
        self.ragged = isinstance(first, RaggedStore)
        self._dtype = first.dtype
        if not self.ragged:
            self.item_shape = first.item_shape
        h = self._h
        self._offsets = np.array([int(_zr.zrs_concat_offset(h, k))
                                  for k in range(len(self._stores) + 1)], dtype=np.int64)

    # ---------------------------------------------------------- handles

    def _handle(self):
        h = self._h
        if h is None or (self._pid == os.getpid() and _zr.zrs_concat_is_closed(h)):
            raise closed("concatenated store")  # by close(), or a borrowed shard's
        if self._pid != os.getpid():
            # A forked child: the shards reopen themselves (read-only ones
            # do); the parent's concatenation is left untouched.
            self._h = h = _zr.zsh_py_concat_create([s._handle() for s in self._stores])
            self._pid = os.getpid()
        return h

    @property
    def closed(self):
        """True once closed, or once a shard it borrows was closed (the
        library keeps the count: zrs_concat_is_closed)."""
        h = self._h
        return h is None or (self._pid == os.getpid() and bool(_zr.zrs_concat_is_closed(h)))

    def close(self):
        """Close this concatenation (a DataLoader reading it is closed by
        it), then the shards it opened itself (borrowed stores stay open).
        Idempotent."""
        h = self._h
        if h is None:
            return
        self._h = None
        if self._pid == os.getpid():
            _zr.zrs_concat_close(h)
        for s in self._own:
            s.close()

    def __reduce__(self):
        if self._h is None or not all(s.readonly for s in self._stores):
            raise TypeError("only an open ConcatStore of read-only shards can be pickled; it "
                            "reopens its shards by path")
        return (ConcatStore, ([s.path for s in self._stores], True))

    # -------------------------------------------------------- properties

    @property
    def dtype(self):
        return self._dtype

    @property
    def shards(self):
        """The shard stores, in order."""
        return list(self._stores)

    @property
    def paths(self):
        return [s.path for s in self._stores]

    @property
    def path(self):
        """The first shard's path (what loader errors name)."""
        return self._stores[0].path

    @property
    def offsets(self):
        """Prefix sums: shard k holds indices ``offsets[k]:offsets[k+1]``."""
        return self._offsets.copy()

    def __len__(self):
        return int(_zr.zrs_concat_length(self._handle()))

    def info(self):
        d = {"kind": "ragged" if self.ragged else "dense", "dtype": self._dtype.str,
             "shards": len(self._stores), "records": len(self), "paths": self.paths}
        if not self.ragged:
            d["item_shape"] = self.item_shape
        return d

    def __repr__(self):
        state = "closed" if self._h is None else f"{len(self)} records"
        kind = "ragged" if self.ragged else f"item_shape={self.item_shape}"
        return (f"ConcatStore({len(self._stores)} shards from {self.path!r}, "
                f"dtype={self._dtype.str!r}, {kind}, {state})")

    # ------------------------------------------------------------ reads

    def locate(self, idx):
        """``(shard, local)`` int arrays for the global indices ``idx``."""
        arr = np.ascontiguousarray(np.asarray(idx, dtype=np.int64).reshape(-1))
        sh, lo = _zr.zsh_py_concat_locate(self._handle(), arr)
        return sh.astype(np.int64), lo.astype(np.int64)

    def _gather(self, idx):
        h = self._handle()
        if not self.ragged:
            out = np.empty(idx.shape + self.item_shape, dtype=self._dtype)
            if idx.size:
                _zr.zsh_py_concat_gather_dense(h, idx.reshape(-1), out)
            return out
        if idx.size == 0:
            return []
        flat = idx.reshape(-1)
        sizes = _zr.zsh_py_concat_ragged_sizes(h, flat)
        bounds = np.zeros(flat.size + 1, dtype=np.uint64)
        np.cumsum(sizes, out=bounds[1:])
        buf = np.empty(int(bounds[-1]), dtype=np.uint8)
        _zr.zsh_py_concat_gather_ragged(h, flat, buf, bounds)
        return _unpack_ragged(buf, bounds, self._dtype)

    def gather(self, idx):
        """Records at ``idx`` (any index form of ``store[...]``)."""
        return self[idx]

    def __getitem__(self, key):
        one, sel = _normalize_key(key, len(self))
        if one:
            return self._gather(np.array([sel], dtype=np.int64))[0]
        if self.ragged and sel.ndim != 1:
            raise IndexError(f"a ragged store takes 1-D index arrays, got shape {sel.shape}")
        return self._gather(sel)

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]


def _as_concat(v, owned):
    if isinstance(v, ConcatStore):
        return v
    c = ConcatStore([v] if isinstance(v, (DenseStore, RaggedStore)) else v)
    if not isinstance(v, (DenseStore, RaggedStore)):
        owned.append(c)
    return c


class Mixture(_Closing):
    """Several datasets sampled by weight (see the module doc).

    ``sources``: ``{name: {stream: store | ConcatStore | path | glob}}``
    (or a list of such dicts, named 0, 1, ...); ``weights``: one positive
    number per source (a dict by name or a sequence in source order;
    relative, normalised here); ``modes``: None (every source uses the
    loader's mode), one mode for all, or one per source ('iid' for a
    source smaller than the global batch)."""

    _zsh_mixture = True

    def __init__(self, sources, weights, modes=None):
        if isinstance(sources, dict):
            names, datasets = list(sources.keys()), list(sources.values())
        else:
            datasets = list(sources)
            names = list(range(len(datasets)))
        if not datasets:
            raise ValueError("a mixture needs at least one source")
        if isinstance(weights, dict):
            missing = [n for n in names if n not in weights]
            if missing or len(weights) != len(names):
                raise ValueError(f"weights must name every source exactly: sources {names}, "
                                 f"weights {list(weights)}")
            weights = [weights[n] for n in names]
        weights = [float(w) for w in weights]
        if len(weights) != len(names):
            raise ValueError(f"{len(names)} sources but {len(weights)} weights")
        for n, w in zip(names, weights):
            if not (w > 0.0) or w == float("inf"):
                raise ValueError(f"weight of source {n!r} is {w}, expected a finite number > 0")
        if modes is None or isinstance(modes, (str, int)) or hasattr(modes, "name"):
            modes = [modes] * len(names)
        elif isinstance(modes, dict):
            modes = [modes.get(n) for n in names]
        modes = [None if m is None else _parse_mode(m) for m in modes]
        if len(modes) != len(names):
            raise ValueError(f"{len(names)} sources but {len(modes)} modes")
        streams = None
        self._owned = []
        self._concats = []  # [source][stream]
        try:
            for n, ds in zip(names, datasets):
                if not hasattr(ds, "items") or not ds:
                    raise ValueError(f"source {n!r} must be a non-empty dict {{stream: store}}")
                if streams is None:
                    streams = list(ds.keys())
                elif set(ds.keys()) != set(streams):
                    raise ValueError(f"source {n!r} has streams {sorted(map(str, ds))}, the "
                                     f"first source has {sorted(map(str, streams))}: every "
                                     "source needs the same stream names")
                self._concats.append([_as_concat(ds[s], self._owned) for s in streams])
        except BaseException:
            for c in self._owned:
                c.close()
            raise
        self.names = names
        self.weights = [w / sum(weights) for w in weights]
        self._weights = weights
        self.modes = modes
        self.streams = streams
        self._bindings = weakref.WeakSet()
        self._closed = False

    def __len__(self):
        return len(self.streams)

    def lengths(self):
        """Records per source, by name."""
        return {n: len(cs[0]) for n, cs in zip(self.names, self._concats)}

    @property
    def closed(self):
        return self._closed

    def close(self):
        """Close every loader reading this mixture, then the shards it
        opened from paths. Idempotent."""
        if self._closed:
            return
        self._closed = True
        for b in list(self._bindings):
            b.close()
        for c in self._owned:
            c.close()

    def _bind(self, batch_size, mode, seed, world_size):
        """The stream dict a DataLoader reads for this mixture."""
        if self._closed:
            raise closed("mixture")
        b = _Binding(self, _u64("batch_size", batch_size, 1), _parse_mode(mode),
                     _u64("seed", seed), _u64("world_size", world_size, 1))
        self._bindings.add(b)
        return {name: s for name, s in zip(self.streams, b.streams)}

    @staticmethod
    def _native_cfg(cfg):
        """The loader's own sampler walks the mixture's virtual index space
        in order; the mixture draws sources and indices."""
        return dict(cfg, mode=_zr.ZSM_SEQUENTIAL)

    def locate(self, loader, indices=None):
        """``(sources, indices)`` for a mixture loader's batch: the source
        name and the index inside that source of every record of
        ``loader.last_indices`` (or of ``indices``, virtual indices of that
        loader)."""
        first = loader._stores[0]
        if not isinstance(first, _MixtureStream) or first._binding.mixture is not self:
            raise ValueError("this loader does not read this mixture")
        v = loader.last_indices if indices is None else indices
        v = np.ascontiguousarray(np.asarray(v, dtype=np.int64).reshape(-1))
        src, loc = _zr.zsh_py_mixture_locate(first._binding._handle(), v)
        names = np.array(self.names, dtype=object)
        return names[src.astype(np.int64)], loc.astype(np.int64)

    def __repr__(self):
        shares = ", ".join(f"{n!r}: {w:.3g}" for n, w in zip(self.names, self.weights))
        return f"Mixture({{{shares}}}, streams={self.streams})"


class _Binding(_Closing):
    """A mixture bound to one loader's (batch_size, mode, seed,
    world_size): the native zld_mixture and its streams."""

    def __init__(self, mixture, batch_size, mode, seed, world_size):
        self.mixture = mixture
        self._args = (batch_size, seed, world_size)
        self._modes = [int((m or mode).value) for m in mixture.modes]
        self._h = None
        self._make()
        self.streams = [_MixtureStream(self, k, cs) for k, cs in
                        enumerate(mixture._concats[0])]

    def _make(self):
        m = self.mixture
        handles = [c._handle() for cs in m._concats for c in cs]
        bs, seed, ws = self._args
        self._h = _zr.zsh_py_mixture_create(handles, len(m._concats), len(m.streams),
                                            m._weights, self._modes, seed, bs, ws)
        self._pid = os.getpid()
        self.length = int(_zr.zld_mixture_length(self._h))

    def _handle(self):
        if self._h is None:
            raise closed("mixture")
        if self._pid != os.getpid():
            self._make()  # a forked child: rebuilt over the reopened shards
        return self._h

    @property
    def closed(self):
        return self._h is None

    def close(self):
        h = self._h
        if h is None:
            return
        self._h = None
        if self._pid == os.getpid():  # freed once no loader reads it
            _zr.zld_mixture_free(h)


class _MixtureStream:
    """One named stream of a bound mixture, as the DataLoader sees it."""

    _zld_stream = True
    _zsh_stream = True

    def __init__(self, binding, k, concat):
        self._binding = binding
        self._k = k
        self.ragged = concat.ragged
        self.dtype = concat.dtype
        self.path = concat.path
        if not concat.ragged:
            self.item_shape = concat.item_shape

    def __len__(self):
        return self._binding.length

    @property
    def closed(self):
        return self._binding.closed

    def close(self):
        self._binding.close()

    def _handle(self):
        return (self._binding._handle(), self._k)
