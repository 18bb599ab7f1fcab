"""DataLoader: the endless, step-based prefetching loader.

``DataLoader(streams, batch_size=256, mode='cyclic', seed=0,
num_workers=0, prefetch=0, transform=None, rank=0, world_size=1,
start_step=0)`` reads a dict of index-aligned streams (open DenseStore /
RaggedStore objects of equal length). Step ``k`` draws the sampler's
indices for ``k`` (see :mod:`loaderx.zsampler`), gathers every stream at
those same indices on native worker threads (``num_workers``, 0 = CPU
count; up to ``prefetch`` batches ahead, 0 = 2 * num_workers) and yields
``{name: value}`` in the dict's order:

* dense stream: an ndarray of shape ``(batch_size, *item_shape)`` and the
  store's dtype (``(batch_size,)`` for scalar records such as labels);
* ragged stream: a list of ``batch_size`` ndarrays with each record's own
  shape.

Batch ``k`` is the same whatever ``num_workers``/``prefetch``. The arrays
own the native batch buffers directly (no copy); ragged records are views
into their stream's one buffer. They are the caller's to keep or modify.

``transform(batch) -> batch`` (the collate step) runs in the consuming
thread, on each batch as it is handed out; running it on the worker
threads is planned for a later release.

The loader never ends: iterate with ``next(loader)`` or a ``for`` loop that
breaks. Worker errors surface on the next ``next()`` as RuntimeError
naming the step; the loader is then stopped. The stores must stay open:
the loader keeps references to them, and closing a store closes the
loaders reading it first.
"""

import numpy as np

from . import _zr
from .errors import closed
from .zrecord import DenseStore, RaggedStore, _unpack_ragged
from .zsampler import _config, _u64

__all__ = ["DataLoader"]


class DataLoader:
    """Endless loader over a dict of aligned streams; see the module doc.

    Raises ValueError for an empty or mismatched stream dict (lengths
    named), a closed store, or an invalid sampler configuration (e.g. cyclic
    with batch_size * world_size > length).
    """

    def __init__(self, streams, batch_size=256, mode="cyclic", seed=0, num_workers=0,
                 prefetch=0, transform=None, rank=0, world_size=1, start_step=0):
        self._h = None
        if not hasattr(streams, "items") or len(streams) == 0:
            raise ValueError("streams must be a non-empty dict {name: DenseStore/RaggedStore}")
        names, stores = [], []
        for name, s in streams.items():
            if not isinstance(s, (DenseStore, RaggedStore)):
                raise TypeError(f"stream {name!r} must be a DenseStore or RaggedStore, "
                                f"got {type(s).__name__}")
            if s.closed:
                raise ValueError(f"stream {name!r}: store is closed")
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
        self._mode, cfg = _config(lengths[0], batch_size, mode, seed, rank, world_size)
        start_step = _u64("start_step", start_step)
        options = dict(cfg, start_step=start_step,
                       num_workers=_u64("num_workers", num_workers),
                       prefetch=_u64("prefetch", prefetch))
        del options["length"]
        self._names = names
        self._stores = stores  # keeps the handles alive as long as the loader
        self._decode = [(isinstance(s, DenseStore), s.dtype,
                         getattr(s, "item_shape", None)) for s in stores]
        self._batch_size = cfg["batch_size"]
        self._seed = cfg["seed"]
        self._transform = transform
        self._step = start_step
        self.last_indices = None
        self._h = _zr.zld_create([s._handle() for s in stores], options)
        for s in stores:
            s._loaders.add(self)

    # ----------------------------------------------------------- batches

    def next(self):
        """The next batch (see the module doc); advances the step."""
        h = self._h
        if h is None:
            raise closed("loader")
        step, indices, parts = _zr.zld_next_arrays(h, len(self._names))
        batch = {}
        for name, (dense, dtype, item_shape), (data, bounds) in zip(
                self._names, self._decode, parts):
            if dense:
                batch[name] = data.view(dtype).reshape((len(indices),) + item_shape)
            else:
                batch[name] = _unpack_ragged(data, bounds, dtype)
        self._step = step + 1
        self.last_indices = indices.astype(np.int64)
        if self._transform is not None:
            batch = self._transform(batch)
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
        return self._batch_size

    @property
    def names(self):
        """Stream names, in batch order."""
        return list(self._names)

    def state(self):
        """What resumes this run: ``{'seed', 'step', 'mode', 'batch_size'}``
        with ``step`` the next step; pass them back as ``seed=``,
        ``start_step=``, ``mode=`` and ``batch_size=`` (same streams)."""
        return {"seed": self._seed, "step": self._step, "mode": self._mode.name.lower(),
                "batch_size": self._batch_size}

    # --------------------------------------------------------- lifecycle

    @property
    def closed(self):
        return self._h is None

    def close(self):
        """Stop the workers and free undelivered batches. Idempotent;
        batches already handed out stay valid."""
        h, self._h = self._h, None
        if h is not None:
            _zr.zld_close(h)
            for s in self._stores:
                s._loaders.discard(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self):
        state = "closed" if self._h is None else f"step={self._step}"
        return (f"DataLoader(streams={self._names}, batch_size={self._batch_size}, "
                f"mode={self._mode.name.lower()!r}, seed={self._seed}, {state})")
