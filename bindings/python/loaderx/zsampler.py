"""Zsampler: batch index generation for an endless, step-based loop.

Every mode is a pure function of ``(seed, step)``: ``indices(step)`` needs
none of the steps before it, so resuming a run is ``seek(step)``.

* ``SEQUENTIAL`` - the window ``[step*G, step*G + G)`` modulo ``length``
  (G = batch_size * world_size): the index space as a circular queue.
* ``IID`` - uniform with replacement (unbiased).
* ``CYCLIC`` - without replacement: each cycle is a fresh permutation of
  ``0..length``; within a cycle every index appears at most once, every
  batch has exactly ``batch_size`` indices, and the cycle's remainder
  ``length mod G`` is dropped (a different one each cycle). Needs
  ``length >= G``.

With ``world_size`` ranks, rank ``r`` gets slice ``[r*B, (r+1)*B)`` of the
global batch of G indices, so the ranks together act as one sampler.
"""

import enum
import operator

import numpy as np

from . import _zr

__all__ = ["Sampler", "BucketSampler"]


class Mode(enum.Enum):
    """Sampler modes (values are the native zsm_mode codes)."""
    SEQUENTIAL = _zr.ZSM_SEQUENTIAL
    IID = _zr.ZSM_IID
    CYCLIC = _zr.ZSM_CYCLIC


def _parse_mode(mode):
    """A Mode from a Mode, its name (case-insensitive) or its value."""
    if isinstance(mode, Mode):
        return mode
    if isinstance(mode, str):
        try:
            return Mode[mode.strip().upper()]
        except KeyError:
            raise ValueError(f"unknown sampler mode {mode!r}; expected one of "
                             "'sequential', 'iid', 'cyclic'") from None
    if isinstance(mode, (int, np.integer)) and not isinstance(mode, bool):
        try:
            return Mode(int(mode))
        except ValueError:
            pass
    raise ValueError(f"unknown sampler mode {mode!r}; expected a Sampler.Mode or one of "
                     "'sequential', 'iid', 'cyclic'")


def _u64(name, v, lo=0):
    try:
        v = operator.index(v)
    except TypeError:
        raise TypeError(f"{name} must be an int, got {type(v).__name__}") from None
    if v < lo or v >= 1 << 64:
        raise ValueError(f"{name} must be in [{lo}, 2**64), got {v}")
    return v


def _config(length, batch_size, mode, seed, rank, world_size):
    """Validate and build the native sampler configuration mapping; the
    error messages name the offending value."""
    mode = _parse_mode(mode)
    length = _u64("length", length, 1)
    batch_size = _u64("batch_size", batch_size, 1)
    seed = _u64("seed", seed)
    world_size = _u64("world_size", world_size, 1)
    rank = _u64("rank", rank)
    if world_size >= 1 << 32:
        raise ValueError(f"world_size must fit in 32 bits, got {world_size}")
    if rank >= world_size:
        raise ValueError(f"rank must be < world_size ({world_size}), got {rank}")
    if mode is Mode.CYCLIC and batch_size * world_size > length:
        raise ValueError(f"cyclic sampling needs batch_size * world_size <= length, got "
                         f"{batch_size} * {world_size} > {length}")
    cfg = {"length": length, "batch_size": batch_size, "seed": seed,
           "mode": mode.value, "rank": rank, "world_size": world_size}
    _zr.zsm_validate(cfg)
    return mode, cfg


class Sampler:
    """Batch index generator.

    ``Sampler(length, batch_size, mode=Sampler.Mode.CYCLIC, seed=0, rank=0,
    world_size=1, step=0)``; ``mode`` may also be a string ('sequential',
    'iid', 'cyclic', any case). Raises ValueError for an invalid
    configuration (length or batch_size 0, rank >= world_size, cyclic with
    batch_size * world_size > length).

    ``next()`` returns the batch for the current step as a fresh int64
    ndarray of shape ``(batch_size,)`` (values in ``[0, length)``) and
    advances the step; the sampler is also an endless iterator.
    """

    Mode = Mode

    def __init__(self, length, batch_size, mode=Mode.CYCLIC, seed=0, rank=0,
                 world_size=1, step=0):
        self._mode, self._cfg = _config(length, batch_size, mode, seed, rank, world_size)
        self._step = _u64("step", step)

    @property
    def length(self):
        return self._cfg["length"]

    @property
    def batch_size(self):
        return self._cfg["batch_size"]

    @property
    def mode(self):
        return self._mode

    @property
    def seed(self):
        return self._cfg["seed"]

    @property
    def rank(self):
        return self._cfg["rank"]

    @property
    def world_size(self):
        return self._cfg["world_size"]

    @property
    def step(self):
        """The step the next ``next()`` call returns."""
        return self._step

    def seek(self, step):
        """Make ``step`` the next step returned (any step, O(1))."""
        self._step = _u64("step", step)

    def indices(self, step):
        """The batch for ``step`` (int64 ndarray, shape (batch_size,)),
        without changing the sampler's position."""
        out = np.empty(self._cfg["batch_size"], dtype=np.int64)
        _zr.zsm_indices(self._cfg, _u64("step", step), out)
        return out

    def next(self):
        """The batch for the current step; advances the step by one."""
        out = self.indices(self._step)
        self._step += 1
        return out

    __next__ = next

    def __iter__(self):
        return self

    def __repr__(self):
        return (f"Sampler(length={self.length}, batch_size={self.batch_size}, "
                f"mode=Sampler.Mode.{self._mode.name}, seed={self.seed}, rank={self.rank}, "
                f"world_size={self.world_size}, step={self._step})")


class BucketSampler(Sampler):
    """Length-bucketed batches, a pure function of (seed, step) like the
    other modes: ``BucketSampler(lengths, batch_size, window=64, seed=0,
    rank=0, world_size=1, step=0)``.

    The cyclic order of each cycle is cut into windows of ``window`` global
    batches; a window's records are sorted by length and cut into batches,
    taken in a keyed order. Batches then hold records of similar length
    (little padding), each cycle still draws every record at most once
    (the cyclic remainder rule applies), and ``indices(step)`` needs no
    other step. ``lengths`` holds one length per record (e.g. tokens).
    Larger windows bucket tighter and mix less."""

    def __init__(self, lengths, batch_size, window=64, seed=0, rank=0, world_size=1, step=0):
        lengths = np.asarray(lengths)
        if lengths.ndim != 1 or lengths.size == 0:
            raise ValueError("lengths must be a non-empty 1-D array (one length per record)")
        if lengths.min() < 0 or lengths.max() >= 1 << 32:
            raise ValueError("lengths must be in [0, 2**32)")
        self._lengths = np.ascontiguousarray(lengths, dtype=np.uint32)
        self._window = _u64("window", window, 1)
        super().__init__(len(lengths), batch_size, Mode.CYCLIC, seed, rank, world_size, step)

    @property
    def window(self):
        return self._window

    def indices(self, step):
        out = np.empty(self._cfg["batch_size"], dtype=np.int64)
        _zr.zsm_bucket_indices(self._cfg, self._lengths, self._window, _u64("step", step), out)
        return out

    def __repr__(self):
        return (f"BucketSampler(length={self.length}, batch_size={self.batch_size}, "
                f"window={self._window}, seed={self.seed}, rank={self.rank}, "
                f"world_size={self.world_size}, step={self._step})")
