"""Utilities around Zrecord stores.

:func:`train_dict` is the standalone, manual dictionary-training step of the
``zstd_dict`` codec: train once on the settled data, then hand the bytes to
``DenseStore.create(..., codec='zstd_dict', dict_bytes=d)`` (or
``RaggedStore.create``). A store never trains by itself.
"""

import numpy as np

from . import _zr
from ._interrupt import interruptible as _interruptible
from .zrecord import DICT_TIERS, DenseStore, _Store

__all__ = ["train_dict", "DICT_TIERS"]


def _record_bytes(rec):
    """One record as a flat uint8 view (a copy only when not contiguous)."""
    a = rec if isinstance(rec, np.ndarray) else np.asarray(rec)
    if a.dtype.hasobject:
        raise TypeError(f"train_dict: records must be numeric arrays, got dtype {a.dtype}")
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8)


_TIER_IDS = {"fast": _zr.ZRS_DICT_FAST, "balanced": _zr.ZRS_DICT_BALANCED,
             "max": _zr.ZRS_DICT_MAX}


class _Sample:
    """The C training sample (zrs_dict_sample: the rule every binding and
    ``zr`` share), freed with this object. A call still running after
    Ctrl-C keeps it alive through its reference."""

    def __init__(self, tier):
        self.handle = _zr.zrs_dict_sample_create(_TIER_IDS[tier])

    def __del__(self):
        h, self.handle = getattr(self, "handle", None), None
        if h is not None:
            _zr.zrs_dict_sample_free(h)

    def offer(self, index, rec):
        _zr.zrs_dict_sample_offer(self.handle, index, _record_bytes(rec))

    def next(self):
        return _zr.zrs_dict_sample_next(self.handle)

    def store(self, store):
        _zr.zrs_dict_sample_store(self.handle, store._handle())

    def train(self):
        return _zr.zrs_dict_sample_train(self.handle)


def train_dict(source, tier="balanced"):
    """Train a zstd dictionary for the ``zstd_dict`` codec; returns bytes.

    source: an ndarray (records along axis 0), any iterable of records
        (arrays; a list, a generator, ...), or an open DenseStore /
        RaggedStore. The sample is the library's one rule (the same in
        Lua, Go and ``zr``): records whose index is a multiple of a
        stride, the stride doubling from 1 until the kept bytes fit the
        tier's sample bytes. It spans the whole source, holds at most the
        sample bytes plus one record (an iterable is read once, in that
        memory), and only the kept records of an array, sequence or store
        are read.
    tier: a key of ``DICT_TIERS``: 'fast' (32 KiB dictionary, 4 MiB
        sample), 'balanced' (128 KiB, 16 MiB; the default) or 'max'
        (1 MiB, 64 MiB).

    Trains with zstd's dictionary builder (ZDICT_trainFromBuffer), without
    the GIL. Raises ValueError for an unknown tier or when zstd cannot
    train (too little or too uniform data: at least 8 records and 8 KiB
    are needed). Train on the settled, final data: the dictionary is a
    snapshot of it.
    """
    if tier not in DICT_TIERS:
        raise ValueError(f"unknown dictionary tier {tier!r}; expected one of "
                         f"{', '.join(DICT_TIERS)}")
    sample = _Sample(tier)
    if isinstance(source, _Store):
        # Read in C: the engine's records, the bytes the codec compresses
        # (a ragged record with its [ndim][dims] prefix).
        _interruptible(sample.store, source)
    elif isinstance(source, np.ndarray) or (hasattr(source, "__len__")
                                            and hasattr(source, "__getitem__")):
        if isinstance(source, np.ndarray) and source.ndim == 0:
            raise ValueError("train_dict: a 0-d array holds no records")
        # Random access: read only the records the sample keeps.
        n, i = len(source), sample.next()
        while i < n:
            sample.offer(i, source[i])
            i = sample.next()
    else:
        try:
            it = iter(source)
        except TypeError:
            raise TypeError("train_dict: source must be an ndarray, an iterable of records "
                            f"or an open store, got {type(source).__name__}") from None
        for i, r in enumerate(it):
            sample.offer(i, r)
    return _interruptible(sample.train)
