"""DataLoader: the endless, step-based prefetching loader.

``DataLoader(streams, batch_size=256, mode='cyclic', seed=0,
num_workers=0, prefetch=0, transform=None, rank=0, world_size=1,
start_step=0, readahead=None)`` reads a dict of index-aligned streams
(open DenseStore / RaggedStore objects of equal length, or other stream
objects speaking the same protocol, such as :func:`loaderx.mrec.lmdb_streams`
reading an LMDB collection directly). Step ``k`` draws
the sampler's indices for ``k`` (see :mod:`loaderx.zsampler`; ``mode`` is a
name or a ``Sampler.Mode``), gathers every stream at those same indices on
native worker threads without the GIL (``num_workers``, 0 = CPU count; up
to ``prefetch`` batches ahead, 0 = 2 * num_workers) and yields
``{name: value}`` in the dict's order:

* dense stream: an ndarray of shape ``(batch_size, *item_shape)`` and the
  store's dtype (``(batch_size,)`` for scalar records such as labels);
* ragged stream: a list of ``batch_size`` ndarrays with each record's own
  shape.

Determinism: batch ``k`` is a function of (streams, seed, mode,
batch_size, rank, world_size, k) only: the same whatever ``num_workers``,
``prefetch``, ``readahead`` or timing.

No copies: the arrays own the native batch buffers directly; ragged
records are views into their stream's one buffer. They are the caller's.

Transform: ``transform(batch) -> anything`` runs on the loader's own
transform threads (``min(num_workers, prefetch)`` Python threads fed by the
native loader), on each batch in turn, so the consumer gets transformed
batches; results are handed out in step order.

Resume: ``state()`` is ``{'seed', 'step', 'mode', 'batch_size', 'rank',
'world_size'}`` with ``step`` the next step; ``DataLoader(streams,
**state)`` (``step=`` is accepted as ``start_step``) or
``DataLoader.from_state(streams, state)`` yields exactly the batch that
would have come next.

Readahead: the loader knows its future indices, so for the step
``readahead`` steps beyond each one it starts building it asks the OS to
read those records' bytes ahead (posix_fadvise WILLNEED). ``None`` (the
default) is adaptive: as far as ``prefetch`` when the stores hold more
bytes than half of physical memory, else off (on page-cached data the
hints only cost time); ``N`` always hints, 0 = off. Pure hint: it never
changes a batch.

Memory: undelivered batches are bounded by ``prefetch`` (with a transform:
``max(prefetch, transform_threads + 1)``), whatever the store size.

Errors: a failure in a gather or in the transform surfaces at the
consumer's ``next()`` for that step (all earlier batches are delivered
first) as :class:`LoaderError` (a RuntimeError) whose ``step`` attribute
and message name the step; the loader is then closed. ``close()``, leaving
a ``with`` block and garbage collection never hang, also while workers are
blocked on a full queue or another thread is waiting in ``next()``.

Fork: a loader's threads do not survive ``fork()``. In a child process the
loader rebuilds itself at its current step the first time it is used, over
stores that reopen themselves there (read-only stores do; a writable
store raises a clear error instead). Closing it in the child never touches
the parent's threads.

The stores must stay open: the loader keeps references to them, and
closing a store closes the loaders reading it first.
"""

import os
import sys
import threading
import weakref

import numpy as np

from . import _zr
from ._closing import Closing as _Closing
from .errors import ClosedError, closed
from .zrecord import DenseStore, RaggedStore, _unpack_ragged
from .zsampler import _config, _u64

__all__ = ["DataLoader", "LoaderError"]

_AUTO = (1 << 32) - 1  # ZLD_READAHEAD_AUTO


class LoaderError(RuntimeError):
    """A batch could not be produced. ``step`` is the failing step; the
    cause (a store error or the transform's exception) is ``__cause__``
    when it was a Python exception, and in the message either way."""

    def __init__(self, step, message):
        super().__init__(f"loader failed at step {step}: {message}")
        self.step = step


def _decode(parts, decoders, names, count):
    batch = {}
    for name, (dense, dtype, item_shape), (data, bounds) in zip(names, decoders, parts):
        if dense:
            batch[name] = data.view(dtype).reshape((count,) + item_shape)
        else:
            batch[name] = _unpack_ragged(data, bounds, dtype)
    return batch


class _Native:
    """One native loader handle with safe concurrent use: ``enter()`` /
    ``leave()`` bracket every native call, and ``close()`` stops the
    workers (waking blocked callers), waits for every caller to leave, and
    only then frees the handle."""

    def __init__(self, handle, stores):
        self.h = handle
        self.pid = os.getpid()
        self.lock = threading.Condition()
        self.users = 0
        self.closing = False
        # Each store keeps a strong reference to this handle (not to the
        # DataLoader) and closes it before freeing its own native handle.
        # Strong both ways on purpose: when a loader and its stores become
        # garbage together, the collector runs every finalizer before it
        # clears any reference, so whichever finalizer runs first still
        # finds the loader handle and stops its workers before a store is
        # freed (a weak reference would already be cleared: use after free).
        self.stores = stores
        for st in stores:
            st._loaders.add(self)

    def enter(self):
        with self.lock:
            if self.closing:
                raise closed("loader")
            self.users += 1
            return self.h

    def leave(self):
        with self.lock:
            self.users -= 1
            if self.users == 0:
                self.lock.notify_all()

    def failed_step(self):
        with self.lock:
            return None if self.closing else _zr.zld_failed_step(self.h)

    def close(self):
        if self.closing:
            return
        if os.getpid() != self.pid:
            self.closing = True  # forked child: the workers are the parent's
        elif sys.is_finalizing():
            # Interpreter shutdown: a daemon thread that was in a native call
            # can never take the GIL back, so waiting for `users` would hang
            # the exit. zld_close itself only waits for callers still inside
            # the library (a frozen thread has already left it) and joins
            # the native workers, so the stores stay valid until it returns.
            self.closing = True
            _zr.zld_stop(self.h)
            _zr.zld_close(self.h)
        else:
            with self.lock:
                if self.closing:
                    return
                self.closing = True
            _zr.zld_stop(self.h)  # wakes callers blocked in zld_next
            with self.lock:
                while self.users > 0:
                    self.lock.wait()
            _zr.zld_close(self.h)
        for st in self.stores:
            st._loaders.discard(self)


class _Transformer:
    """Transform threads: each takes the next native batch (GIL released
    while waiting), decodes it, applies the transform and parks the result
    by step; the consumer takes results in step order. At most ``slots``
    batches are held here, between a thread taking them and the consumer
    receiving them."""

    def __init__(self, native, nstreams, decode, transform_ref, nthreads):
        self.native = native
        self.nstreams = nstreams
        self.decode = decode
        # A weak reference to the DataLoader's _TransformBox: the threads
        # must not keep the user's transform (often a bound method of an
        # object that holds the loader) alive, or an abandoned loader could
        # never be collected and would hold its stores' locks forever.
        self.transform_ref = transform_ref
        self.cv = threading.Condition()
        self.slots = nthreads
        self.held = 0
        self.results = {}      # step -> (indices, batch, error)
        self.fail_step = None  # smallest failing step seen
        self.stopping = False
        self.threads = [threading.Thread(target=self._run, name=f"loaderx-transform-{i}",
                                         daemon=True) for i in range(nthreads)]
        for t in self.threads:
            t.start()

    def _fail(self, step, error):
        # with self.cv held
        if step not in self.results:
            self.results[step] = (None, None, error)
        if self.fail_step is None or step < self.fail_step:
            self.fail_step = step
        self.cv.notify_all()

    def _run(self):
        try:
            self._loop()
        except BaseException as exc:  # a bug here must not leave the consumer waiting
            with self.cv:
                self._fail(self.fail_step if self.fail_step is not None else -1, exc)

    def _loop(self):
        native = self.native
        while True:
            with self.cv:
                while (not self.stopping and self.fail_step is None
                       and self.held >= self.slots):
                    self.cv.wait()
                if self.stopping or self.fail_step is not None:
                    return
                self.held += 1
            try:
                h = native.enter()
            except Exception:  # closed under us (e.g. by one of its stores)
                with self.cv:
                    self.held -= 1
                    self._closed()
                return
            try:
                step, indices, parts = _zr.zld_next_arrays(h, self.nstreams)
            except Exception as exc:
                step = native.failed_step()
                with self.cv:
                    self.held -= 1
                    if native.closing:  # woken by a close, not a failed gather
                        self._closed()
                    elif not self.stopping:
                        self._fail(step if step is not None else -1, exc)
                return
            finally:
                native.leave()
            box = self.transform_ref()
            if box is None:  # the DataLoader is gone; it closes us
                with self.cv:
                    self.held -= 1
                return
            try:
                batch = self.decode(parts, len(indices))
                batch = box.fn(batch)
                item = (indices, batch, None)
            except BaseException as exc:
                item = (indices, None, exc)
            del box
            with self.cv:
                self.results[step] = item
                if item[2] is not None and (self.fail_step is None or step < self.fail_step):
                    self.fail_step = step
                self.cv.notify_all()

    def _closed(self):
        # with self.cv held: the native loader is gone, so no result will
        # ever come; every waiting consumer must get a ClosedError.
        self.stopping = True
        self.cv.notify_all()

    def take(self, step):
        with self.cv:
            while self.stopping or step not in self.results:
                if self.stopping:
                    raise closed("loader")
                if self.fail_step is not None and self.fail_step < 0:
                    break
                self.cv.wait()
            item = self.results.pop(step, None)
            if item is None:  # an internal failure, see _run
                item = self.results.pop(self.fail_step)
            else:
                self.held -= 1
            self.cv.notify_all()
            return item

    def stop(self):
        with self.cv:
            self.stopping = True
            self.cv.notify_all()

    def join(self):
        me = threading.current_thread()
        for t in self.threads:
            if t is not me:
                t.join()
        with self.cv:
            self.results.clear()


class _TransformBox:
    """Holds the user's transform; owned by the DataLoader only, seen weakly
    by the transform threads (see _Transformer)."""

    __slots__ = ("fn", "__weakref__")

    def __init__(self, fn):
        self.fn = fn


class DataLoader(_Closing):
    """Endless loader over a dict of aligned streams; see the module doc.

    Raises ValueError for an empty or mismatched stream dict (lengths
    named) or an invalid sampler configuration (e.g. cyclic with
    batch_size * world_size > length), and ClosedError (a ValueError)
    naming the stream for a closed store.

    A DataLoader cannot be pickled (TypeError): it owns native threads.
    Pickle its read-only stores and its ``state()``, and rebuild it with
    ``DataLoader.from_state(streams, state)``.
    """

    def __init__(self, streams, batch_size=256, mode="cyclic", seed=0, num_workers=0,
                 prefetch=0, transform=None, rank=0, world_size=1, start_step=0,
                 readahead=None, step=None):
        self._native = None
        self._tf = None
        mixture = streams if getattr(streams, "_zsh_mixture", False) else None  # loaderx.shards
        if mixture is not None:
            streams = mixture._bind(batch_size, mode, seed, world_size)
        if not hasattr(streams, "items") or len(streams) == 0:
            raise ValueError("streams must be a non-empty dict {name: DenseStore/RaggedStore}")
        names, stores = [], []
        for name, s in streams.items():
            if not isinstance(s, (DenseStore, RaggedStore)) and not getattr(s, "_zld_stream", False):
                raise TypeError(f"stream {name!r} must be a DenseStore or RaggedStore (or a "
                                f"loader stream such as loaderx.mrec.lmdb_streams), got {type(s).__name__}")
            if s.closed:
                path = getattr(s, "path", None)
                where = f" {path!r}" if isinstance(path, str) else ""
                raise ClosedError(f"stream {name!r}: store{where} is closed")
            names.append(name)
            stores.append(s)
        lengths = [len(s) for s in stores]
        if any(n != lengths[0] for n in lengths):
            desc = ", ".join(f"{k!r}: {n}" for k, n in zip(names, lengths))
            raise ValueError(f"streams must have equal lengths, got {{{desc}}}")
        if lengths[0] == 0:
            raise ValueError("streams are empty (0 records)")
        if transform is not None and not callable(transform):
            raise TypeError("transform must be callable or None")
        if step is not None:
            step = _u64("step", step)
            if start_step not in (0, step):
                raise ValueError(f"step ({step}) and start_step ({start_step}) disagree; "
                                 "give one of them")
            start_step = step
        self._mode, cfg = _config(lengths[0], batch_size, mode, seed, rank, world_size)
        if mixture is not None:
            cfg = mixture._native_cfg(cfg)
        start_step = _u64("start_step", start_step)
        num_workers = _u64("num_workers", num_workers) or (os.cpu_count() or 1)
        prefetch = _u64("prefetch", prefetch) or 2 * num_workers
        if readahead is None:
            readahead = _AUTO
        else:
            readahead = min(_u64("readahead", readahead), _AUTO)
        self._names = names
        self._stores = stores  # keeps the handles alive as long as the loader
        self._decoders = [(isinstance(s, DenseStore) or (not isinstance(s, RaggedStore) and not s.ragged),
                           s.dtype, getattr(s, "item_shape", None)) for s in stores]
        self._cfg = cfg
        self._step = start_step
        self._num_workers = num_workers
        self._prefetch = prefetch
        self._readahead = readahead
        self.last_indices = None
        self._tbox = _TransformBox(transform) if transform is not None else None
        self._start()

    def _start(self):
        """Create the native loader (and transform threads) at self._step."""
        cfg = self._cfg
        nthreads = min(self._num_workers, self._prefetch) if self._tbox is not None else 0
        # With a transform, the transform threads hold up to nthreads
        # batches; the native ring gets the rest of the prefetch budget.
        native_prefetch = max(1, self._prefetch - nthreads)
        options = {"batch_size": cfg["batch_size"], "mode": cfg["mode"],
                   "seed": cfg["seed"], "rank": cfg["rank"],
                   "world_size": cfg["world_size"], "start_step": self._step,
                   "num_workers": self._num_workers, "prefetch": native_prefetch,
                   "readahead": self._readahead}
        handles = [s._handle() for s in self._stores]
        if all(isinstance(s, (DenseStore, RaggedStore)) for s in self._stores):
            self._native = _Native(_zr.zld_create(handles, options), self._stores)
        elif any(getattr(s, "_zsh_stream", False) for s in self._stores):  # loaderx.shards
            self._native = _Native(_zr.zsh_py_loader_create(handles, options), self._stores)
        else:  # generic streams (zld_create_streams), stores mixed in as they are
            self._native = _Native(_zr.zmr_py_loader_create(handles, options), self._stores)
        if nthreads:
            names, decoders = self._names, self._decoders

            def decode(parts, count):
                return _decode(parts, decoders, names, count)

            self._tf = _Transformer(self._native, len(names), decode,
                                    weakref.ref(self._tbox), nthreads)

    @classmethod
    def from_state(cls, streams, state, **options):
        """A loader over ``streams`` that continues from ``state`` (a dict
        from :meth:`state`); ``options`` (num_workers, prefetch, transform,
        readahead) do not change the batches."""
        kw = dict(state)
        kw.setdefault("start_step", kw.pop("step", 0))
        kw.update(options)
        return cls(streams, **kw)

    # ----------------------------------------------------------- batches

    def _fork_check(self):
        """In a forked child, rebuild the native side at the current step
        (the stores reopen themselves, or raise)."""
        native = self._native
        if native is None:
            raise closed("loader")
        if native.pid == os.getpid():
            return native, self._tf
        native.closing = True  # never touch the parent's threads
        self._native = None
        self._tf = None
        self._start()
        return self._native, self._tf

    def next(self):
        """The next batch (see the module doc); advances the step."""
        native, tf = self._fork_check()
        if native.closing:  # closed by one of its stores: no prefetched batches either
            self.close()
            raise closed("loader")
        step = self._step
        if tf is not None:
            indices, batch, error = tf.take(step)
            if error is not None:
                self.close()
                raise LoaderError(step, f"{type(error).__name__}: {error}") from error
        else:
            h = native.enter()
            try:
                got, indices, parts = _zr.zld_next_arrays(h, len(self._names))
            except Exception as exc:
                failed = native.failed_step()
                native.leave()
                if failed is None:
                    raise
                self.close()
                raise LoaderError(failed, str(exc)) from exc
            native.leave()
            batch = _decode(parts, self._decoders, self._names, len(indices))
        self._step = step + 1
        self.last_indices = indices.view(np.int64)  # a fresh copy already; indices < 2**63
        return batch

    __next__ = next

    def __iter__(self):
        return self

    # ------------------------------------------------------------- state

    @property
    def step(self):
        """The step the next ``next()`` returns."""
        return self._step

    @property
    def batch_size(self):
        return self._cfg["batch_size"]

    @property
    def names(self):
        """Stream names, in batch order."""
        return list(self._names)

    def state(self):
        """What resumes this run exactly: ``{'seed', 'step', 'mode',
        'batch_size', 'rank', 'world_size'}`` with ``step`` the next step.
        ``DataLoader(streams, **state)`` continues with that batch."""
        cfg = self._cfg
        return {"seed": cfg["seed"], "step": self._step, "mode": self._mode.name.lower(),
                "batch_size": cfg["batch_size"], "rank": cfg["rank"],
                "world_size": cfg["world_size"]}

    # --------------------------------------------------------- lifecycle

    @property
    def closed(self):
        """True once closed, also when a store it reads was closed (which
        closes the loader first)."""
        return self._native is None or self._native.closing

    def close(self):
        """Stop the workers and free undelivered batches. Idempotent and
        safe from any thread (a thread blocked in ``next()`` gets a
        ClosedError); batches already handed out stay valid."""
        native, tf = self._native, self._tf
        self._native = None
        self._tf = None
        if native is not None and native.pid != os.getpid():
            # A forked child: the threads (and any lock they held at the
            # fork) belong to the parent; drop the handle untouched.
            native.close()
            tf = native = None
        if tf is not None:
            tf.stop()
        if native is not None:
            native.close()
        if tf is not None and not sys.is_finalizing():
            tf.join()

    def __reduce_ex__(self, protocol):
        # Without this, pickle fails deep inside on the SWIG handle with
        # "cannot pickle 'SwigPyObject' object", which says nothing useful.
        raise TypeError("a DataLoader cannot be pickled; pickle its read-only stores and "
                        "its state() and rebuild it (DataLoader.from_state(streams, state))")

    def __repr__(self):
        state = "closed" if self._native is None else f"step={self._step}"
        return (f"DataLoader(streams={self._names}, batch_size={self.batch_size}, "
                f"mode={self._mode.name.lower()!r}, seed={self._cfg['seed']}, {state})")
