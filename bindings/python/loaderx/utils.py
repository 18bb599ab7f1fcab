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


def _strided(n, k):
    """k indices spread evenly over range(n) (k <= n)."""
    return (np.arange(k, dtype=np.int64) * n) // k


def _count_for(n, avg, budget):
    return int(max(1, min(n, budget // max(1, int(avg)))))


def _sample_store(store, budget):
    n = len(store)
    if n == 0:
        return []
    st = _zr.zre_get_stats(_zr.zrs_engine(store._handle()))
    k = _count_for(n, st["logical_bytes"] / n, budget)
    idx = _strided(n, k)
    if isinstance(store, DenseStore):
        arr = store[idx]
        return [arr[j] for j in range(arr.shape[0])]
    # Ragged: train on the physical records ([ndim][dims][payload]), the
    # bytes the codec will compress.
    recs = [np.require(r, requirements="C") for r in store[idx]]
    packed, bounds = _zr.zrs_ragged_encode(recs, store._dtype.str)
    return [packed[int(bounds[j]):int(bounds[j + 1])] for j in range(len(recs))]


def _sample_sequence(seq, budget):
    n = len(seq)
    if n == 0:
        return []
    probe = [seq[i] for i in range(min(n, 64))]
    avg = sum(_record_bytes(r).size for r in probe) / len(probe)
    return [seq[int(i)] for i in _strided(n, _count_for(n, avg, budget))]


def _sample_iterable(it, budget):
    # One pass over an iterable of unknown length: keep every `stride`-th
    # record; whenever the kept bytes exceed the budget, drop every other
    # kept record and double the stride. The result is strided like the
    # other sources, in bounded memory.
    kept, size, stride = [], 0, 1
    for i, r in enumerate(it):
        if i % stride:
            continue
        b = _record_bytes(r)
        kept.append((i, b))
        size += b.size
        while size > budget and len(kept) > 1:
            stride *= 2
            kept = [(j, x) for j, x in kept if j % stride == 0]
            size = sum(x.size for _, x in kept)
    return [x for _, x in kept]


def train_dict(source, tier="balanced"):
    """Train a zstd dictionary for the ``zstd_dict`` codec; returns bytes.

    source: an ndarray (records along axis 0), any iterable of records
        (arrays; a list, a generator, ...), or an open DenseStore /
        RaggedStore. A strided sample of about the tier's sample budget is
        taken, so each tier costs about the same whatever the record size.
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
    budget = DICT_TIERS[tier]["sample_bytes"]
    if isinstance(source, _Store):
        records = _sample_store(source, budget)
    elif isinstance(source, np.ndarray):
        if source.ndim == 0:
            raise ValueError("train_dict: a 0-d array holds no records")
        records = _sample_sequence(source, budget)
    elif hasattr(source, "__len__") and hasattr(source, "__getitem__"):
        records = _sample_sequence(source, budget)
    else:
        try:
            it = iter(source)
        except TypeError:
            raise TypeError("train_dict: source must be an ndarray, an iterable of records "
                            f"or an open store, got {type(source).__name__}") from None
        records = _sample_iterable(it, budget)
    parts = [_record_bytes(r) for r in records]
    parts = [p for p in parts if p.size]
    # The sample budget bounds the bytes handed to the builder.
    total, keep = 0, []
    for p in parts:
        if total + p.size > budget:
            p = p[:budget - total]
        if p.size:
            keep.append(p)
            total += p.size
        if total >= budget:
            break
    data = np.concatenate(keep) if keep else np.empty(0, dtype=np.uint8)
    sizes = np.array([p.size for p in keep], dtype=np.uint64)
    return _interruptible(_zr.zrs_train_dict, data, sizes, DICT_TIERS[tier]["dict_bytes"])
