"""DataLoader: the endless, step-based prefetching loader.

``DataLoader(streams, batch_size=256, mode='cyclic', seed=0,
num_workers=None, prefetch=0, transform=None, rank=0, world_size=1,
start_step=0, readahead=None)`` reads a dict of index-aligned streams
(open DenseStore / RaggedStore objects of equal length, or other stream
objects speaking the same protocol, such as :func:`loaderx.mrec.lmdb_streams`
reading an LMDB collection directly). Step ``k`` draws
the sampler's indices for ``k`` (see :mod:`loaderx.zsampler`; ``mode`` is a
name or a ``Sampler.Mode``), gathers every stream at those same indices on
native worker threads without the GIL (``num_workers``, None = CPU count;
0 = no worker threads, as torch: each batch is gathered, and transformed,
on the thread calling ``next()``; up to ``prefetch`` batches ahead, 0 = 2 *
num_workers) and yields
``{name: value}`` in the dict's order:

* dense stream: an ndarray of shape ``(batch_size, *item_shape)`` and the
  store's dtype (``(batch_size,)`` for scalar records such as labels);
* ragged stream: a list of ``batch_size`` ndarrays with each record's own
  shape.

Length bucketing: ``mode='bucket', lengths=L, window=64`` (``L`` one
length per record, e.g. its tokens) draws batches of records of similar
length, so padded token batches waste little: the cyclic order is cut into
windows of ``window`` global batches, each sorted by length; the same
indices as ``loaderx.zsampler.BucketSampler(L, batch_size, window, seed,
rank, world_size)``, a pure function of (seed, step) like every mode.

Packing: ``mode='pack', pack_length=L`` (``pack_policy`` 'best_fit',
'first_fit' or 'concat'; ``pack_window`` documents per best-fit window,
None = 1024; ``pack_overlong`` 'split', 'truncate' or 'drop') packs ragged
token records (documents) into ``batch_size`` rows of exactly ``L``
elements, natively (libzsampler plans the rows of each epoch, libzloader
fills them). Every stream must be ragged, each aligned with the first
record by record (a loss mask is packed the same way); each batch is
``{name: [rows, L, *item]}`` of the stream's dtype (padding 0) plus int32
``segment_ids`` [rows, L] (1, 2, ... per document piece of a row, 0 =
padding), ``positions`` [rows, L] (restart at 0 per piece), ``seq_lens``
[rows, S] (each piece's length, then 0s; S the batch's most pieces in a
row) and ``cu_seqlens`` [pieces + 1] (0 then running sums, row after row,
over ``tokens[segment_ids > 0]``). ``last_indices`` is the document of each
piece. ValueError for a dense or unaligned stream (naming the record), a
stream named as one of those four keys, a Mixture, or packing options
without mode='pack'. ``PassLoader(..., pack_length=L)`` is one pass of
packed rows, each document exactly once.

Determinism: batch ``k`` is a function of (streams, seed, mode,
batch_size, rank, world_size, k) only: the same whatever ``num_workers``,
``prefetch``, ``readahead`` or timing.

No copies: the arrays own the native batch buffers directly; ragged
records are views into their stream's one buffer. They are the caller's.

Transform: ``transform(batch) -> anything`` runs on the loader's own
transform threads (``min(num_workers, prefetch)`` Python threads fed by the
native loader), on each batch in turn, so the consumer gets transformed
batches; results are handed out in step order.

Flips: ``flip={name: p}`` flips each record of those dense streams along
its last axis with probability ``p`` (torchvision's
``RandomHorizontalFlip(p)`` for ``(C, H, W)`` or ``(H, W)`` images; any
dtype of itemsize 1, 2, 4 or 8), natively on the gather threads, in place,
without the GIL. Which records flip is a pure function of (seed, step,
position in the global batch), so batches stay identical across worker
counts and on resume, and streams given the same ``p`` (an image and its
mask) flip together. ``loader.flipped(name, step)`` says which records of a
step's batch were flipped (e.g. to mirror their boxes). ValueError for a
ragged, scalar or unknown stream, or ``p`` outside [0, 1].

Resume: ``state()`` is a dict of what decides the batches: ``{'step',
'seed', 'mode', 'batch_size', 'rank', 'world_size'}`` (``'window'`` in mode
'bucket', ``'flip'`` with flips, ``'pack_length'``, ``'pack_policy'``,
``'pack_window'`` and ``'pack_overlong'`` in mode 'pack') and ``'fingerprint'``, which records each
stream's name, length and store identity (the store's uuid, or its shards),
a Mixture's sources, weights and modes, and pass options; ``step`` is the
next step. Plain JSON values: save it with ``json`` or ``torch.save``.
``DataLoader.from_state(streams, state)`` (or ``DataLoader(streams,
**state)``, or ``load_state_dict(state)``) yields exactly the batch that
would have come next, and refuses (ValueError naming every difference) a
state saved on other data: another store, records deleted, streams renamed
or reordered, other flips or options. Data that only grew (the same
stores, records appended) is refused too, unless ``allow_grown=True``:
then the cycle in flight finishes on the old length and later cycles draw
from the new one (see docs/PYTHON.md). A state saved by an older version
(no fingerprint) still loads, with a :class:`ResumeWarning` saying what
could not be checked.

Readahead: the loader knows its future indices, so for the step
``readahead`` steps beyond each one it starts building it asks the OS to
read those records' bytes ahead (posix_fadvise WILLNEED). ``None`` (the
default) is adaptive, decided when the loader starts and again every 64
steps (a store read into the cache during training stops being hinted, an
evicted one is hinted again): as far as
``prefetch`` when less than 95% of the stores' bytes are in the OS page
cache (sampled with mincore; on Windows, when they exceed half of physical
memory), else off (on page-cached data the hints only cost time); ``N``
always hints, 0 = off. Pure hint: it never changes a batch.

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

The loader keeps references to its stores, and the library counts its
borrow of each: closing a store under a loader is safe, and closes the
loader (``closed`` turns True, ``next()`` raises ClosedError).
"""

import atexit
import difflib
import inspect
import json
import os
import sys
import threading
import time
import warnings
import weakref

import numpy as np

from . import _zr
from ._closing import Closing as _Closing
from .errors import ClosedError, closed
from .zrecord import DenseStore, RaggedStore, _unpack_ragged
from .zsampler import _config, _u64

__all__ = ["DataLoader", "PassLoader", "LoaderError", "ResumeWarning", "TransformInfo", "pad"]

_AUTO = (1 << 32) - 1  # ZLD_READAHEAD_AUTO
_STATE_KEYS = ("step", "seed", "mode", "batch_size", "rank", "world_size", "window", "flip",
               "fingerprint", "pack_policy", "pack_length", "pack_window", "pack_overlong")
# What mode='pack' adds to each batch, after the streams (zld_batch parts
# nstreams + ZLD_PACK_*).
_PACK_KEYS = ("segment_ids", "positions", "seq_lens", "cu_seqlens")
_PACK_OPTIONS = ("pack_length", "pack_policy", "pack_window", "pack_overlong")


class ResumeWarning(UserWarning):
    """A resume went ahead but could not check everything (a state saved
    by an older version, a store from before uuids), or continued on grown
    data as asked; the message says which."""


def _json_value(v):
    """json.dumps's fallback for numpy scalars in a state dict."""
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating):
        return float(v)
    raise TypeError(f"a loader state holds JSON values only, got {type(v).__name__}")


def _state_text(state):
    """A state dict as the JSON text the native resume check reads."""
    if not hasattr(state, "items"):
        raise TypeError(f"a loader state is a dict (from state()), got {type(state).__name__}")
    return json.dumps(dict(state), default=_json_value)


class LoaderError(RuntimeError):
    """A batch could not be produced. ``step`` is the failing step; the
    cause (a store error or the transform's exception) is ``__cause__``
    when it was a Python exception, and in the message either way."""

    def __init__(self, step, message):
        super().__init__(f"loader failed at step {step}: {message}")
        self.step = step


def _decode(parts, decoders, names, count, mask_key=None, valid=0):
    """A native batch as the dict handed out; an even_batches pass adds its
    mask under mask_key (True on the first `valid` rows, the real records)."""
    batch = {}
    for name, (dense, dtype, item_shape), (data, bounds) in zip(names, decoders, parts):
        if dense:
            batch[name] = data.view(dtype).reshape((count,) + item_shape)
        else:
            batch[name] = _unpack_ragged(data, bounds, dtype)
    if mask_key is not None:
        batch[mask_key] = np.arange(count) < valid
    return batch


def _decode_pack(parts, dtypes, shapes, names, length):
    """A pack-mode batch: each stream [rows, length, *item] of its dtype,
    then the int32 layout arrays (see the module doc)."""
    n = len(names)
    seg = parts[n][0].view(np.int32)
    rows = seg.size // length
    batch = {}
    for name, dtype, shape, (data, _bounds) in zip(names, dtypes, shapes, parts):
        batch[name] = data.view(dtype).reshape((rows, length) + shape)
    batch["segment_ids"] = seg.reshape(rows, length)
    batch["positions"] = parts[n + 1][0].view(np.int32).reshape(rows, length)
    batch["seq_lens"] = parts[n + 2][0].view(np.int32).reshape(rows, -1)
    batch["cu_seqlens"] = parts[n + 3][0].view(np.int32)
    return batch


def _pack_options(mode, pack_length, pack_policy, pack_window, pack_overlong, names, mixture):
    """The native pack options for mode='pack' (None otherwise); the
    values themselves are checked natively."""
    given = [k for k, v in zip(_PACK_OPTIONS, (pack_length, pack_policy, pack_window,
                                                pack_overlong)) if v is not None]
    if not (isinstance(mode, str) and mode.lower() == "pack"):
        if given:
            raise ValueError(f"{', '.join(given)} {'applies' if len(given) == 1 else 'apply'} "
                             "only to mode='pack'")
        return None
    if mixture is not None:
        raise ValueError("mode='pack' does not apply to a Mixture (pack its streams' stores)")
    clash = [k for k in _PACK_KEYS if k in names]
    if clash:
        raise ValueError(f"mode='pack' adds the keys {list(_PACK_KEYS)} to each batch, and a "
                         f"stream is named {clash[0]!r}; rename the stream")
    return {"pack": 1, "pack_length": _u64("pack_length", 0 if pack_length is None else pack_length),
            "pack_window": _u64("pack_window", 0 if pack_window is None else pack_window),
            "pack_policy": pack_policy, "pack_overlong": pack_overlong}


class _Native:
    """One native loader handle with safe concurrent use: ``call()``
    brackets every native call on it, and ``close()`` stops the workers
    (waking blocked callers), waits for every caller to leave, and only
    then frees the handle.

    Interrupt safety: a KeyboardInterrupt is delivered only between
    bytecodes, so every state change here is either a plain attribute
    store or done inside one native call (``zld_close_slot`` takes the
    handle out of ``hslot`` and frees it in one step). ``close()`` may be
    interrupted anywhere and called again: it resumes where it stopped,
    never frees twice and never waits on a notification it missed."""

    def __init__(self, handle):
        # The native loader holds what its streams read itself (stores,
        # concatenations, mixtures, mrec sources), so they may be closed
        # or collected in any order: a closed one makes the loader closed
        # (gone()).
        self.hslot = [handle]  # [handle], [None] once freed
        self.pid = os.getpid()
        self.lock = threading.Condition()
        self.users = 0
        self.closing = False

    def call(self, fn, *args):
        """fn(handle, *args) as a registered user of the handle."""
        entered = False
        try:
            with self.lock:
                if self.closing:
                    raise closed("loader")
                self.users += 1
                entered = True
            return fn(self.hslot[0], *args)
        finally:
            if entered:
                with self.lock:
                    self.users -= 1
                    if self.users == 0:
                        self.lock.notify_all()

    def gone(self):
        """True once closed, or once a store it reads was closed (the
        library says so: zld_is_closed)."""
        with self.lock:
            h = self.hslot[0]
            return self.closing or h is None or bool(_zr.zld_is_closed(h))

    def closed_error(self):
        """The ClosedError for a gone() loader: with the library's detail
        naming the stream and the store when a store it reads was closed."""
        with self.lock:
            h = self.hslot[0]
            if not self.closing and h is not None and _zr.zld_is_closed(h):
                why = _zr.zr_last_error()  # set by zld_is_closed on this thread
                if why:
                    return ClosedError(f"loader is closed: {why}")
        return closed("loader")

    def failed_step(self):
        with self.lock:
            h = self.hslot[0]
            return None if self.closing or h is None else _zr.zld_failed_step(h)

    def close(self):
        if self.hslot[0] is None:
            self.closing = True
        elif os.getpid() != self.pid:
            self.closing = True  # forked child: the workers are the parent's
            self.hslot[0] = None
        elif sys.is_finalizing():
            # Interpreter shutdown: a daemon thread that was in a native call
            # can never take the GIL back, so waiting for `users` would hang
            # the exit. zld_close itself only waits for callers still inside
            # the library (a frozen thread has already left it) and joins
            # the native workers, so the stores stay valid until it returns.
            self.closing = True
            _zr.zld_close_slot(self.hslot)
        else:
            with self.lock:
                self.closing = True
                h = self.hslot[0]
                if h is not None:
                    # Wakes callers blocked in zld_next (they only need the
                    # GIL, which zld_stop releases, to leave); idempotent.
                    _zr.zld_stop(h)
                while self.users > 0:
                    self.lock.wait(0.05)
                _zr.zld_close_slot(self.hslot)


class _Transformer:
    """Transform threads: each takes the next native batch (GIL released
    while waiting), decodes it, applies the transform and parks the result
    by step; the consumer reads results in step order. At most ``slots``
    batches are held here, between a thread taking them and the consumer
    moving past them.

    The consumer never removes a result while handing it out: ``peek(step)``
    first drops the results of the steps before ``step`` (delivered
    already), then waits for ``step``'s. An interrupted ``next()`` therefore
    finds its batch again on the next call."""

    def __init__(self, native, nstreams, decode, transform_ref, nthreads, info):
        self.native = native
        self.nstreams = nstreams
        self.decode = decode
        # A weak reference to the DataLoader's _TransformBox: the threads
        # must not keep the user's transform (often a bound method of an
        # object that holds the loader) alive, or an abandoned loader could
        # never be collected and would hold its stores' locks forever.
        self.transform_ref = transform_ref
        self.info = info  # step, indices -> TransformInfo (or None)
        self.cv = threading.Condition()
        self.slots = nthreads
        self.held = 0
        self.results = {}      # step -> (indices, batch, error)
        self.fail_step = None  # smallest failing step seen
        self.end_step = None   # finite pass: the step after the last batch
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
        slot = [None]
        while True:
            with self.cv:
                while (not self.stopping and self.fail_step is None
                       and self.end_step is None and self.held >= self.slots):
                    self.cv.wait(0.1)  # timed: a notification lost to an interrupt costs 0.1 s
                if self.stopping or self.fail_step is not None or self.end_step is not None:
                    return
                self.held += 1
            try:
                more = native.call(_zr.zld_next_arrays, self.nstreams, slot)
            except Exception as exc:
                step = native.failed_step()
                with self.cv:
                    self.held -= 1
                    if native.gone():  # woken by a close (its own or a store's)
                        self._closed()
                    elif not self.stopping:
                        self._fail(step if step is not None else -1, exc)
                return
            if more is False:  # a finite pass is over
                with self.cv:
                    self.held -= 1
                    self.end_step = native.call(_zr.zld_next_step)
                    self.cv.notify_all()
                return
            step, indices, parts, valid = slot[0]
            slot[0] = None
            box = self.transform_ref()
            if box is None:  # the DataLoader is gone; it closes us
                with self.cv:
                    self.held -= 1
                return
            try:
                batch = self.decode(parts, len(indices), valid)
                item = (indices, _apply(box.fn, batch, self.info, step, indices), None)
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

    def peek(self, step):
        """The result of ``step`` (indices, batch, error), left in place;
        None at the end of a finite pass. Drops the results before it."""
        with self.cv:
            done = [s for s in self.results if s < step]
            for s in done:
                del self.results[s]   # a statement: no interrupt between the two
                self.held -= 1
            if done:
                self.cv.notify_all()
            while self.stopping or step not in self.results:
                if self.stopping:
                    raise closed("loader")
                if self.fail_step is not None and self.fail_step < 0:
                    return self.results[self.fail_step]  # an internal failure, see _run
                if self.end_step is not None and step >= self.end_step:
                    return None
                self.cv.wait()
            return self.results[step]

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


def _apply(fn, batch, info, step, indices):
    """The transform fn on one decoded batch (info: None for a one-argument
    transform, else the TransformInfo factory)."""
    out = fn(batch) if info is None else fn(batch, info(step, indices))
    if out is None:
        raise TypeError("the transform returned None; it must return the (transformed) batch")
    return out


class _TransformBox:
    """Holds the user's transform; owned by the DataLoader only, seen weakly
    by the transform threads (see _Transformer)."""

    __slots__ = ("fn", "__weakref__")

    def __init__(self, fn):
        self.fn = fn


# Keyword arguments a torch DataLoader user reaches for, with what to use
# here instead.
_HINTS = {
    "shuffle": "use mode= ('cyclic': shuffled without replacement, 'iid': with "
               "replacement, 'sequential': in index order); for one pass over the data "
               "(evaluation) use PassLoader(streams, shuffle=...)",
    "drop_last": "an endless loader's batches are always full; PassLoader(drop_last=...) "
                 "makes finite passes",
    "sampler": "use mode= (the sampler is built in: a pure function of (seed, step))",
    "batch_sampler": "use batch_size= and mode=",
    "collate_fn": "batches come collated (a dict of arrays); use transform= for the rest",
    "prefetch_factor": "use prefetch= (batches prepared ahead in total, not per worker)",
    "pin_memory": "pin in transform= (e.g. torch.from_numpy(x).pin_memory())",
    "persistent_workers": "the workers always persist (the loader is endless)",
    "worker_init_fn": "workers are native threads; for per-batch randomness give "
                      "transform= two arguments (batch, info) and use info.rng",
    "generator": "use seed= (and info.rng in a two-argument transform)",
    "epoch": "endless loaders have steps, not epochs; PassLoader(epoch=...) or "
             "PassLoader.set_epoch() for finite passes",
    "timeout": "next() never hangs on a closed loader; there is no timeout",
    "multiprocessing_context": "workers are native threads; there are no worker processes",
}

_PARAMS = ("streams", "batch_size", "mode", "seed", "num_workers", "prefetch", "transform",
           "rank", "world_size", "start_step", "readahead", "step", "lengths", "window", "flip",
           "fingerprint") + _PACK_OPTIONS


def _flips(flip, names, stores):
    """``flip={name: p}`` as [(name, stream index, width, itemsize, p)]; the
    streams are found and checked natively (zld_flip_by_name)."""
    if flip is None:
        return []
    if not hasattr(flip, "items"):
        raise TypeError("flip must be a dict {stream name: probability}")
    labels = [str(n) for n in names]
    items = [None if isinstance(s, RaggedStore) or getattr(s, "ragged", False)
             or getattr(s, "item_shape", None) is None
             else (np.dtype(s.dtype).str, tuple(s.item_shape)) for s in stores]
    out = []
    for name, p in flip.items():
        try:
            p = float(p)
        except (TypeError, ValueError):
            _zr.zld_flip_by_name(labels, items, str(name), 0.0)  # an unknown stream first
            raise TypeError(f"flip: the probability of {name!r} must be a number, got {p!r}") from None
        k, width, itemsize = _zr.zld_flip_by_name(labels, items, str(name), p)
        out.append((name, k, width, itemsize, p))
    return out


def _bucket_lengths(lengths, n):
    """``lengths`` for mode='bucket' as little-endian uint32 bytes (one per
    record of the streams' ``n``)."""
    if lengths is None:
        raise ValueError("mode='bucket' needs lengths= (one length per record, e.g. its tokens)")
    a = np.asarray(lengths)
    if a.ndim != 1 or a.dtype.kind not in "iu":
        raise ValueError(f"lengths must be a 1-D integer array, got shape {a.shape} dtype {a.dtype}")
    if len(a) != n:
        raise ValueError(f"lengths holds {len(a)} values for streams of {n} records (one per record)")
    if a.size and (a.min() < 0 or a.max() >= 1 << 32):
        raise ValueError("lengths must be in [0, 2**32)")
    return np.ascontiguousarray(a, dtype="<u4").tobytes()


def _unknown_kwargs(cls, kwargs, params):
    name = next(iter(kwargs))
    hint = _HINTS.get(name)
    if hint is None:
        close = difflib.get_close_matches(name, params, n=1)
        hint = (f"did you mean {close[0]}=?" if close
                else "accepted: " + ", ".join(params))
    return TypeError(f"{cls}() got an unexpected keyword argument {name!r}; {hint}")


class TransformInfo:
    """What a two-argument transform ``transform(batch, info)`` gets besides
    the batch: ``step``, ``indices`` (int64, the records of the batch, in
    batch order), ``seed``, ``rank``, ``epoch`` (None for an endless
    loader) and ``rng``, a ``numpy.random.Generator`` derived from
    (seed, step, rank) (and the epoch for a pass) only. Batch k's
    augmentation is therefore the same whatever ``num_workers``,
    ``prefetch``, thread timing or resume."""

    __slots__ = ("step", "indices", "seed", "rank", "epoch", "_rng")

    def __init__(self, step, indices, seed, rank, epoch):
        self.step = step
        self.indices = indices
        self.seed = seed
        self.rank = rank
        self.epoch = epoch
        self._rng = None

    @property
    def rng(self):
        if self._rng is None:
            key = (self.step, self.rank) if self.epoch is None else (self.step, self.rank,
                                                                     self.epoch, 1)
            self._rng = np.random.Generator(np.random.PCG64(
                np.random.SeedSequence(self.seed, spawn_key=key)))
        return self._rng

    def __repr__(self):
        return (f"TransformInfo(step={self.step}, seed={self.seed}, rank={self.rank}, "
                f"epoch={self.epoch}, indices=<{len(self.indices)} records>)")


def _wants_info(fn):
    """True when ``fn`` takes two positional arguments (batch, info)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return False
    kinds = [p.kind for p in sig.parameters.values()]
    if inspect.Parameter.VAR_POSITIONAL in kinds:
        return False
    positional = [k for k in kinds if k in (inspect.Parameter.POSITIONAL_ONLY,
                                            inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2


# Loaders still open at interpreter exit are closed by an atexit hook,
# while every thread still runs normally: a transform thread left inside
# native code (torch) when the interpreter finalizes would be ended by
# pthread_exit there, which aborts the process in C++ code ("terminate
# called without an active exception").
_OPEN = weakref.WeakSet()
_EXIT_JOIN = 10.0  # seconds a transform may still take at exit


def _close_all_at_exit():
    for loader in list(_OPEN):
        try:
            loader._close(join_timeout=_EXIT_JOIN)
        except BaseException:  # exit goes on whatever happens
            pass


atexit.register(_close_all_at_exit)


class DataLoader(_Closing):
    """Endless loader over a dict of aligned streams; see the module doc.

    Raises ValueError for an empty or mismatched stream dict (lengths
    named) or an invalid sampler configuration (e.g. cyclic with
    batch_size * world_size > length), ClosedError (a ValueError)
    naming the stream for a closed store, and TypeError for an unknown
    keyword, with the loaderx way to say it (``shuffle=`` -> ``mode=``).

    A DataLoader cannot be pickled (TypeError): it owns native threads.
    Pickle its read-only stores and its ``state()``, and rebuild it with
    ``DataLoader.from_state(streams, state)``.

    ``fingerprint``: the entry of a ``state()`` (given by
    ``DataLoader(streams, **state)``): the streams must be the data it
    was saved on (ValueError naming what changed).
    """

    def __init__(self, streams, batch_size=256, mode="cyclic", seed=0, num_workers=None,
                 prefetch=0, transform=None, rank=0, world_size=1, start_step=0,
                 readahead=None, step=None, lengths=None, window=64, flip=None,
                 fingerprint=None, pack_length=None, pack_policy=None, pack_window=None,
                 pack_overlong=None, _pass=None, _resume=None, **kwargs):
        self._native = None
        self._tf = None
        if kwargs:
            raise _unknown_kwargs(type(self).__name__, kwargs, _PARAMS)
        lengths_arg = lengths  # the name is reused below for the streams' lengths
        mixture = streams if getattr(streams, "_zsh_mixture", False) else None  # loaderx.shards
        if mixture is not None:
            streams = mixture._bind(batch_size, mode, seed, world_size)
        if not hasattr(streams, "items"):
            hint = " (name each stream: {'x': store})" if isinstance(streams, (list, tuple)) else ""
            raise TypeError("streams must be a dict {name: DenseStore/RaggedStore}, got "
                            f"{type(streams).__name__}{hint}")
        if len(streams) == 0:
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
        stream_len = lengths[0]
        if transform is not None and not callable(transform):
            raise TypeError("transform must be callable or None")
        if step is not None:
            step = _u64("step", step)
            if start_step not in (0, step):
                raise ValueError(f"step ({step}) and start_step ({start_step}) disagree; "
                                 "give one of them")
            start_step = step
        self._pack = _pack_options(mode, pack_length, pack_policy, pack_window, pack_overlong,
                                   names, mixture)
        if self._pack is not None or _pass is not None:
            # Pack mode's batches are rows, not records, and a finite pass
            # (PassLoader) has no mode: the sampler's shared checks only;
            # endless pack mode runs on the cyclic order natively.
            mode = "sequential"
        self._bucket = None  # mode='bucket': (lengths as bytes, window)
        if isinstance(mode, str) and mode.lower() == "bucket":
            if mixture is not None:
                raise ValueError("mode='bucket' does not apply to a Mixture (each source has its own mode)")
            self._bucket = (_bucket_lengths(lengths_arg, stream_len), _u64("window", window) or 64)
            mode = "cyclic"
        elif lengths_arg is not None:
            raise ValueError("lengths= applies only to mode='bucket'")
        self._mode, cfg = _config(stream_len, batch_size, mode, seed, rank, world_size)
        if self._pack is not None:
            cfg["mode"] = _zr.ZSM_CYCLIC
        # A mixture's loader walks the mixture's index space in order; its
        # state keeps the mode the sources without one of their own draw by.
        self._mix_mode = None
        if mixture is not None:
            cfg = mixture._native_cfg(cfg)
            self._mix_mode = self._mode.name.lower()
        start_step = _u64("start_step", start_step)
        # As torch: 0 gathers on the consumer's thread; None is automatic.
        num_workers = (os.cpu_count() or 1) if num_workers is None else _u64("num_workers",
                                                                            num_workers)
        prefetch = 1 if num_workers == 0 else _u64("prefetch", prefetch) or 2 * num_workers
        if readahead is None:
            readahead = _AUTO
        else:
            readahead = min(_u64("readahead", readahead), _AUTO)
        self._names = names
        self._stores = stores  # keeps the handles alive as long as the loader
        self._decoders = [(isinstance(s, DenseStore) or (not isinstance(s, RaggedStore) and not s.ragged),
                           s.dtype, getattr(s, "item_shape", None)) for s in stores]
        self._cfg = cfg
        self._pass = _pass
        self._step = start_step
        self._num_workers = num_workers
        self._prefetch = prefetch
        self._readahead = readahead
        self._slot = [None]  # the native batch of self._step once taken, until handed out
        self.last_indices = None
        self._flips = _flips(flip, names, stores)
        self._mask_key = None if _pass is None else _pass.pop("mask_key", None)
        if self._mask_key is not None and self._mask_key in names:
            raise ValueError(f"even_batches adds the key {self._mask_key!r} to each batch, and a "
                             "stream has that name; rename the stream")
        self._tbox = _TransformBox(transform) if transform is not None else None
        self._tinfo = transform is not None and _wants_info(transform)
        if _resume is None and fingerprint is not None:
            # DataLoader(streams, **state): the other entries are these
            # arguments; the fingerprint is checked against the streams.
            saved = {"step": start_step, "fingerprint": fingerprint}
            if flip:  # a state lists its flips; none given means none saved
                saved["flip"] = dict(flip)
            _resume = (_state_text(saved), 0)
        self._start(*(_resume or (None, 0)))

    def _start(self, resume=None, resume_flags=0):
        """Create the native loader (and transform threads) at self._step,
        continuing the state text `resume` when given (checked natively
        against the streams and options; ValueError naming what differs)."""
        cfg = self._cfg
        nthreads = min(self._num_workers, self._prefetch) if self._tbox is not None else 0
        # With a transform, the transform threads hold up to nthreads
        # batches; the native ring gets the rest of the prefetch budget.
        native_prefetch = max(1, self._prefetch - nthreads)
        options = {"batch_size": cfg["batch_size"], "mode": cfg["mode"],
                   "seed": cfg["seed"], "rank": cfg["rank"],
                   "world_size": cfg["world_size"], "start_step": self._step,
                   "num_workers": self._num_workers or _zr.ZLD_WORKERS_NONE,
                   "prefetch": native_prefetch,
                   "readahead": self._readahead}
        if self._pass is not None:
            options.update(self._pass, **{"pass": 1})
        if self._bucket is not None:
            options["bucket_lengths"], options["bucket_window"] = self._bucket
        if self._pack is not None:
            options.update(self._pack)
        if self._flips:
            options["flips"] = [f[1:] for f in self._flips]
        options["names"] = [str(n) for n in self._names]
        if resume is not None:
            if self._mix_mode is not None:  # the loader's own walk, as the native state says
                resume = json.dumps(dict(json.loads(resume), mode="sequential"))
            options["resume"], options["resume_flags"] = resume, resume_flags
        handles = [s._handle() for s in self._stores]
        self._slot = [None]
        if all(isinstance(s, (DenseStore, RaggedStore)) for s in self._stores):
            self._native = _Native(_zr.zld_create(handles, options))
        elif any(getattr(s, "_zsh_stream", False) for s in self._stores):  # loaderx.shards
            self._native = _Native(_zr.zsh_py_loader_create(handles, options))
        else:  # generic streams (zld_create_streams), stores mixed in as they are
            self._native = _Native(_zr.zmr_py_loader_create(handles, options))
        h = self._native.hslot[0]
        names, decoders, mask_key = self._names, self._decoders, self._mask_key
        if self._pack is not None:
            dtypes = [d[1] for d in decoders]
            shapes = [_zr.zld_pack_item_shape(h, k) for k in range(len(names))]
            length = json.loads(_zr.zld_state_json(h))["pack_length"]

            def decode(parts, count, valid):  # holds no reference to the DataLoader
                return _decode_pack(parts, dtypes, shapes, names, length)

            self._nparts = len(names) + len(_PACK_KEYS)
        else:
            def decode(parts, count, valid):  # holds no reference to the DataLoader
                return _decode(parts, decoders, names, count, mask_key, valid)

            self._nparts = len(names)
        self._decode_fn = decode
        # The state as the native loader records it; state() sets the step.
        self._state_json = _zr.zld_state_json(h)
        note = _zr.zld_resume_note(h)
        if note:
            warnings.warn(f"DataLoader resume: {note}", ResumeWarning, stacklevel=4)
        _OPEN.add(self)
        self._info = None
        if self._tinfo:
            seed, rank = cfg["seed"], cfg["rank"]
            epoch = None if self._pass is None else self._pass["epoch"]

            def info(step, indices):
                return TransformInfo(step, indices.view(np.int64), seed, rank, epoch)

            self._info = info
        if nthreads:
            self._tf = _Transformer(self._native, self._nparts, decode,
                                    weakref.ref(self._tbox), nthreads, self._info)

    @classmethod
    def from_state(cls, streams, state, allow_grown=False, **options):
        """A loader over ``streams`` that continues from ``state`` (a dict
        from :meth:`state`): its first batch is the one that would have
        come next. ``options`` (num_workers, prefetch, transform,
        readahead) do not change the batches; any option that does
        (seed, batch_size, flip, ...) must agree with the state.

        Raises ValueError, naming every difference, when the streams are
        not the data the state was saved on (another store or shard set,
        records deleted, streams renamed, reordered, added or removed) or an
        option differs. Streams that grew since (the same stores, records
        appended) are a difference too, unless ``allow_grown=True``: the
        cycle in flight finishes on the old length, then the sampler draws
        from the new one (iid: at once; sequential: after the pass in
        flight; a finite pass keeps its length). A state from an older
        version (no fingerprint) loads with a :class:`ResumeWarning`."""
        kw = dict(state)
        kw.pop("fingerprint", None)
        kw.setdefault("start_step", kw.pop("step", 0))
        kw.update(options)
        flags = _zr.ZLD_RESUME_ALLOW_GROWN if allow_grown else 0
        return cls(streams, _resume=(_state_text(state), flags), **kw)

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
        # Rebuilt over the reopened stores at the current step, checked
        # against the loader's own state (a grown resume keeps its schedule).
        self._start(_state_text(self.state()), 0)
        return self._native, self._tf

    def _stream_names(self, message):
        """A native message names streams by position and path; say the
        dict key too."""
        for k, (name, st) in enumerate(zip(self._names, self._stores)):
            path = getattr(st, "path", None)
            old = f"stream {k} ({path})" if isinstance(path, str) else f"stream {k} ("
            new = f"stream {name!r} ({path})" if isinstance(path, str) else f"stream {name!r} ("
            message = message.replace(old, new)
        return message

    def next(self):
        """The next batch (see the module doc); advances the step.

        A KeyboardInterrupt (or any exception) raised while this runs
        takes nothing: the next call returns the same step's batch."""
        native, tf = self._fork_check()
        if native.gone():  # closed by one of its stores: no prefetched batches either
            err = native.closed_error()
            self.close()
            raise err
        step = self._step
        if tf is not None:
            item = tf.peek(step)
            if item is None:
                self.close()
                raise StopIteration
            indices, batch, error = item
            if native.gone():  # a store closed while this step was prepared
                err = native.closed_error()
                self.close()
                raise err
            if error is not None:
                self.close()
                raise LoaderError(step, self._stream_names(
                    f"{type(error).__name__}: {error}")) from error
        else:
            slot = self._slot
            if slot[0] is None:
                try:
                    more = native.call(_zr.zld_next_arrays, self._nparts, slot)
                except Exception as exc:
                    if native.gone():  # a store was closed meanwhile
                        err = native.closed_error()
                        self.close()
                        raise err from exc
                    failed = native.failed_step()
                    if failed is None:
                        raise
                    self.close()
                    raise LoaderError(failed, self._stream_names(str(exc))) from exc
                if more is False:
                    self.close()
                    raise StopIteration
            got, indices, parts, valid = slot[0]
            batch = self._decode_fn(parts, len(indices), valid)
            if self._tbox is not None:  # num_workers=0: the transform runs here
                try:
                    batch = _apply(self._tbox.fn, batch, self._info, step, indices)
                except Exception as exc:
                    self.close()
                    raise LoaderError(step, f"{type(exc).__name__}: {exc}") from exc
        indices = indices.view(np.int64)  # a fresh copy already; indices < 2**63
        # Hand the batch out: plain stores only from here to the return,
        # so an interrupt either keeps the batch for the next call or
        # comes after the step advanced.
        self._slot[0] = None
        self.last_indices = indices
        self._step = step + 1
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

    def flipped(self, name, step):
        """Which records of step ``step``'s batch the ``flip=`` of stream
        ``name`` flipped: a bool ndarray of shape (batch_size,) (a pure
        function of seed, step and rank, so any step may be asked, past or
        future). KeyError for a stream without a flip."""
        for n, _, _, _, p in self._flips:
            if n == name:
                cfg = self._cfg
                mask = _zr.zsm_bernoulli(cfg["seed"], _u64("step", step),
                                         cfg["batch_size"] * cfg["rank"], cfg["batch_size"], p)
                return np.frombuffer(mask, dtype=np.uint8).astype(bool)
        raise KeyError(f"stream {name!r} has no flip (flip= names {[f[0] for f in self._flips]})")

    def state(self):
        """What resumes this run exactly, as the native loader records it
        (a fresh dict of JSON values): ``{'step', 'seed', 'mode',
        'batch_size', 'rank', 'world_size', 'fingerprint'}`` with ``step``
        the next step, plus ``'window'`` in mode 'bucket' (whose ``lengths``
        are not copied into the state, only a digest of them: pass them
        again) and ``'flip'`` (``{name: p}``) with flips. ``'fingerprint'``
        holds each stream's name, length and identity (its store's uuid,
        or its shards), a Mixture's sources, weights and modes, and the
        pass options. :meth:`from_state` continues with that batch, and
        refuses other data, naming what changed."""
        state = json.loads(self._state_json)
        state["step"] = self._step
        if self._mix_mode is not None:
            state["mode"] = self._mix_mode
        return state

    def state_dict(self):
        """:meth:`state`, under the name torchdata's StatefulDataLoader
        and torch modules use (a fresh dict, safe to save with torch.save
        or json)."""
        return self.state()

    def load_state_dict(self, state, allow_grown=False):
        """Continue from ``state`` (from :meth:`state` / :meth:`state_dict`):
        the next batch is the one that followed it. The streams, workers,
        prefetch and transform stay; seed, mode, batch_size, rank,
        world_size and flips are taken from ``state``, and its fingerprint
        is checked against the streams as in :meth:`from_state` (ValueError
        naming what changed; ``allow_grown`` as there). Prefetched batches
        are dropped."""
        text = _state_text(state)
        state = dict(state)
        unknown = set(state) - set(_STATE_KEYS)
        if unknown:
            raise ValueError(f"load_state_dict: unknown keys {sorted(unknown)}; expected the "
                             "dict of state()")
        if "step" not in state:
            raise ValueError("load_state_dict: state has no 'step'")
        cfg = self._cfg
        bucket = self._bucket
        want = state.get("mode", "bucket" if bucket is not None
                         else "pack" if self._pack is not None else self._mode)
        pack = None
        if isinstance(want, str) and want.lower() == "pack":
            old = self._pack or {}
            pack = _pack_options("pack", *(state.get(k, old.get(k)) for k in _PACK_OPTIONS),
                                 self._names, None)
            want = "sequential"  # the shared checks; natively cyclic
        if isinstance(want, str) and want.lower() == "bucket":
            if bucket is None:
                raise ValueError("load_state_dict: the state is of mode 'bucket', but this loader "
                                 "has no lengths; build it with DataLoader(..., mode='bucket', lengths=...)")
            bucket = (bucket[0], _u64("window", state.get("window", bucket[1])) or 64)
            want = "cyclic"
        else:
            bucket = None
        mode, new_cfg = _config(cfg["length"], state.get("batch_size", cfg["batch_size"]),
                                want, state.get("seed", cfg["seed"]),
                                state.get("rank", cfg["rank"]),
                                state.get("world_size", cfg["world_size"]))
        if pack is not None:
            new_cfg["mode"] = _zr.ZSM_CYCLIC
        if self._mix_mode is not None:
            if mode.name.lower() != self._mix_mode:  # bound into the mixture's sources
                raise ValueError(f"load_state_dict: mode: '{mode.name.lower()}' in the state, "
                                 f"'{self._mix_mode}' now (a Mixture's loader keeps its mode)")
            new_cfg["mode"] = _zr.ZSM_SEQUENTIAL
        step = _u64("step", state["step"])
        flips = _flips(state["flip"], self._names, self._stores) if "flip" in state else self._flips
        self.close()
        self._mode, self._cfg, self._step, self._bucket = mode, new_cfg, step, bucket
        self._pack = pack
        self._flips = flips
        self._start(text, _zr.ZLD_RESUME_ALLOW_GROWN if allow_grown else 0)

    # --------------------------------------------------------- lifecycle

    @property
    def closed(self):
        """True once closed, also once a store it reads was closed."""
        return self._native is None or self._native.gone()

    def close(self):
        """Stop the workers and free undelivered batches. Idempotent and
        safe from any thread (a thread blocked in ``next()`` gets a
        ClosedError); batches already handed out stay valid. A
        KeyboardInterrupt during close() does not leave it half done: it
        finishes, then the interrupt is raised."""
        self._close()

    def _close(self, join_timeout=None):
        interrupt = None
        while True:
            try:
                self._close_once(join_timeout)
                break
            except KeyboardInterrupt as exc:
                interrupt = exc
        _OPEN.discard(self)
        if interrupt is not None:
            raise interrupt

    def _close_once(self, join_timeout):
        native, tf = self._native, self._tf
        if native is not None and native.pid != os.getpid():
            # A forked child: the threads (and any lock they held at the
            # fork) belong to the parent; drop the handle untouched.
            native.close()
            self._native = self._tf = None
            return
        if tf is not None:
            tf.stop()
        if native is not None:
            native.close()
        if tf is not None and not sys.is_finalizing():
            if join_timeout is None:
                tf.join()
            else:
                deadline = time.monotonic() + join_timeout
                for t in tf.threads:
                    if t is not threading.current_thread():
                        t.join(max(0.0, deadline - time.monotonic()))
        self._native = None
        self._tf = None
        self._slot = [None]

    def __reduce_ex__(self, protocol):
        # Without this, pickle fails deep inside on the SWIG handle with
        # "cannot pickle 'SwigPyObject' object", which says nothing useful.
        raise TypeError("a DataLoader cannot be pickled; pickle its read-only stores and "
                        "its state() and rebuild it (DataLoader.from_state(streams, state))")

    def __repr__(self):
        state = "closed" if self._native is None else f"step={self._step}"
        mode = "pack" if self._pack is not None else self._mode.name.lower()
        return (f"DataLoader(streams={self._names}, batch_size={self.batch_size}, "
                f"mode={mode!r}, seed={self._cfg['seed']}, {state})")


_PASS_PARAMS = ("streams", "batch_size", "shuffle", "seed", "epoch", "drop_last", "rank",
                "world_size", "num_workers", "prefetch", "transform", "readahead",
                "even_batches") + _PACK_OPTIONS


class PassLoader:
    """Finite passes over a dict of aligned streams, for evaluation (the
    torch ``DataLoader`` + ``DistributedSampler`` of a test set).

    ``PassLoader(streams, batch_size=256, shuffle=False, seed=0, epoch=0,
    drop_last=False, rank=0, world_size=1, num_workers=None, prefetch=0,
    transform=None, readahead=None, even_batches=False)``

    Each ``iter(loader)`` (each ``for batch in loader``) is one pass: every
    record exactly once, in index order, or with ``shuffle`` in an order
    that is a function of (seed, epoch) only (``set_epoch(e)`` changes it,
    as with DistributedSampler). Batches are dicts as from
    :class:`DataLoader`, ``batch_size`` records each except the last,
    which is partial unless ``drop_last``. ``len(loader)`` is this rank's
    number of batches, ``loader.num_records`` its number of records.
    Passes are independent: a second ``iter(loader)`` starts another pass
    beside the first (each with its own threads), and both run to their
    end; ``close()`` ends every pass still open.

    Ranks: step s of the pass is a global batch of batch_size *
    world_size records and rank r takes its r-th slice, as in the endless
    loader; the incomplete last global batch is split as evenly as
    possible between the ranks (sizes differ by at most one; a rank whose
    share is empty has one batch fewer). Nothing is padded or repeated:
    unlike torch's DistributedSampler, which repeats records so that every
    rank has the same count, each record lands on exactly one rank, so
    summed metrics are exact. With ``drop_last`` the incomplete global
    batch is dropped on every rank.

    ``even_batches=True`` (accelerate's option of that name, masked): every
    rank gets the same number of batches, all of ``batch_size`` rows, so a
    collective per batch (an all-reduce of a metric) cannot wait forever on
    a rank that ran out. The rows past a rank's own records repeat a record
    and are masked: each batch then has a ``'mask'`` entry, a bool array of
    shape ``(batch_size,)``, True on the real rows (the leading ones). Sum
    metrics over ``batch[...][mask]`` and each record still counts once.
    ``len(loader)`` is then the same on every rank.

    The pass runs on the same native gather threads, transform threads
    (a two-argument ``transform(batch, info)`` gets :class:`TransformInfo`)
    and buffer recycling as the endless loader.
    """

    def __init__(self, streams, batch_size=256, shuffle=False, seed=0, epoch=0,
                 drop_last=False, rank=0, world_size=1, num_workers=None, prefetch=0,
                 transform=None, readahead=None, even_batches=False, pack_length=None,
                 pack_policy=None, pack_window=None, pack_overlong=None, **kwargs):
        if kwargs:
            name = next(iter(kwargs))
            if name == "mode":
                raise TypeError("PassLoader() got an unexpected keyword argument 'mode'; a "
                                "pass is in index order, or shuffle=True for an order of "
                                "(seed, epoch)")
            raise _unknown_kwargs("PassLoader", kwargs, _PASS_PARAMS)
        self._streams = dict(streams) if hasattr(streams, "items") else streams
        self._epoch = _u64("epoch", epoch)
        self._opts = {"batch_size": batch_size, "seed": seed, "rank": rank,
                      "world_size": world_size, "num_workers": num_workers,
                      "prefetch": prefetch, "transform": transform, "readahead": readahead}
        self._shuffle = bool(shuffle)
        self._drop_last = bool(drop_last)
        self._even = bool(even_batches)
        packing = {"pack_length": pack_length, "pack_policy": pack_policy,
                   "pack_window": pack_window, "pack_overlong": pack_overlong}
        if any(v is not None for v in packing.values()):  # a pass of packed rows
            self._opts.update(packing, mode="pack")
        self._open = weakref.WeakSet()  # passes not yet closed
        # Validate now (and learn the length) with a loader that is closed
        # straight away; it starts no work beyond its threads.
        probe = self._loader(0)
        self._steps = _zr.zld_steps(probe._native.hslot[0])
        self._length = probe._cfg["length"]
        probe.close()

    def _loader(self, start_step):
        opts = {"shuffle": int(self._shuffle), "drop_last": int(self._drop_last),
                "epoch": self._epoch}
        if self._even:
            opts.update(even_batches=1, mask_key="mask")
        return DataLoader(self._streams, start_step=start_step, _pass=opts, **self._opts)

    def set_epoch(self, epoch):
        """Shuffle the next passes for ``epoch`` (as DistributedSampler's)."""
        self._epoch = _u64("epoch", epoch)

    @property
    def epoch(self):
        return self._epoch

    def __len__(self):
        """This rank's number of batches in a pass."""
        return self._steps

    @property
    def num_records(self):
        """Records this rank sees in a pass (its real rows with
        ``even_batches``). TypeError for a pass of packed rows (its batches
        are rows of several documents; ``len()`` counts them)."""
        if self._opts.get("mode") == "pack":
            raise TypeError("a pass of packed rows has no per-rank record count; len() is its "
                            "batches")
        b, w, r = self._opts["batch_size"], self._opts["world_size"], self._opts["rank"]
        g = b * w
        full = self._length // g
        if self._drop_last:
            return full * b
        rem = self._length % g
        return full * b + (rem * (r + 1)) // w - (rem * r) // w

    def __iter__(self):
        """A new pass (a :class:`DataLoader` that stops after the pass's
        last batch; closing it ends the pass early). Other passes still
        open go on, independently."""
        return self.iter_from(0)

    def iter_from(self, step):
        """A pass starting at ``step`` (to resume an interrupted pass:
        ``loader.iter_from(it.step)``)."""
        it = self._loader(_u64("step", step))
        self._open.add(it)
        return it

    def close(self):
        """Close every pass still open (idempotent)."""
        for it in list(self._open):
            it.close()
        self._open = weakref.WeakSet()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return (f"PassLoader(streams={list(self._streams)}, batch_size={self._opts['batch_size']}, "
                f"shuffle={self._shuffle}, epoch={self._epoch}, drop_last={self._drop_last}, "
                f"rank={self._opts['rank']}, world_size={self._opts['world_size']}, "
                f"len={self._steps})")


def pad(records, length=None, pad_value=0, return_mask=False):
    """Stack ragged records (a ragged stream's list from a batch, or any
    sequence of C-contiguous arrays of shape ``(n_i, *inner)`` and one
    dtype) into one array ``(B, L, *inner)`` in native code: each record's
    first ``min(n_i, L)`` rows, then ``pad_value``. ``length`` None pads to
    the longest record, an int pads or cuts to exactly that length.

    Returns ``(array, lengths)`` with ``lengths`` the int64 ``n_i`` (before
    any cut), or ``(array, mask)`` with ``return_mask=True``: a bool
    ``(B, L)`` array, True on real rows. ValueError for a record of another
    dtype or trailing shape (named by position)."""
    records = records if isinstance(records, (list, tuple)) else list(records)
    if length is not None:
        length = _u64("length", length)
    if not records:
        raise ValueError("pad: no records (the batch dimension would be empty)")
    first = np.asarray(records[0])
    if first.ndim < 1:
        raise ValueError("pad: records must have at least one dimension, got a 0-d array")
    proto = np.empty((0,) + first.shape[1:], dtype=first.dtype)
    fill = np.empty(first.shape[1:], dtype=first.dtype)
    fill[...] = pad_value
    out, lengths = _zr.zld_pad(records, proto, -1 if length is None else length,
                               fill.tobytes())
    if return_mask:
        return out, np.arange(out.shape[1]) < lengths[:, None]
    return out, lengths
