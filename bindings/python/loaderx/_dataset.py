"""A dataset directory of sharded columns, written whole or not at all.

Layout: ``OUT/<column>/part-NNNNN``, one store per column and shard; shard
k of every column holds the same rows, so ``ConcatStore("OUT/<column>/*")``
opens each column as one stream, aligned with the others. A writer builds
the directory at ``OUT.partial`` and renames it to ``OUT`` once every
shard is durable (an existing ``OUT`` is replaced through ``OUT.old`` only
then, as :func:`loaderx.shards.write_shard` replaces a shard), so a writer
killed at any point leaves ``OUT`` as it was.
"""

import os
import shutil

from . import _arrow
from .shards import _fsync_dir, _prepare_partial, _swap_in

SHARD_NAME = "part-{:05d}"


def shard_name(k):
    return SHARD_NAME.format(k)


def per_column(value, names, what):
    """``value`` for every column: one value for all, or a dict by name
    (every name present)."""
    if isinstance(value, dict):
        missing = [n for n in names if n not in value]
        extra = [n for n in value if n not in names]
        if missing or extra:
            raise ValueError(f"{what} must name every written column exactly: columns {names}, "
                             f"{what} for {list(value)}")
        return dict(value)
    return {n: value for n in names}


def begin(out, overwrite):
    """The staging directory of a new dataset at ``out`` (created, empty)."""
    if os.path.lexists(out) and not overwrite:
        raise FileExistsError(f"{out!r} exists; pass overwrite=True to replace it once the new "
                              "dataset is complete")
    staging = _prepare_partial(out)
    os.makedirs(staging)
    if os.path.lexists(out) and not overwrite:  # restored from out.old just now
        shutil.rmtree(staging)
        raise FileExistsError(f"{out!r} exists; pass overwrite=True to replace it")
    return staging


def commit(staging, out, columns):
    """Make the staged column directories durable and put the staging
    directory at ``out``; returns ``{column: [shard paths in order]}``."""
    for c in columns:
        _fsync_dir(os.path.join(staging, c))
    _fsync_dir(staging)
    _swap_in(staging, out)
    return {c: [os.path.join(out, c, n) for n in sorted(os.listdir(os.path.join(out, c)))]
            for c in columns}


class Shard:
    """The stores of one shard, one per column, created at the first rows
    (a zstd_dict store without a dictionary trains one on its first
    records, then ``dicts`` keeps it for the later shards of the column)."""

    def __init__(self, paths, specs, codecs, dicts, tier="balanced"):
        self.paths, self.specs, self.codecs, self.dicts = paths, specs, codecs, dicts
        self.tier = tier
        self.stores = {}
        self.rows = 0

    def add(self, batch, row0):
        """Append a RecordBatch holding every column; ``row0`` is its first
        row in the whole source (for error messages)."""
        recs = {c: s.convert(batch.column(c), row0) for c, s in self.specs.items()}
        for c, s in self.specs.items():
            st = self.stores.get(c)
            if st is None:
                st = self._create(c, recs[c])
            s.append(st, recs[c])
        self.rows += batch.num_rows

    def _create(self, c, records):
        d = _arrow.dict_for(records, self.codecs[c], self.dicts.get(c), self.tier)
        self.dicts[c] = d
        st = self.stores[c] = self.specs[c].create(self.paths[c], self.codecs[c], d)
        return st

    def close(self):
        """Create what is still missing (a shard of no rows is empty), then
        close (sync) every store."""
        try:
            for c, s in self.specs.items():
                if c not in self.stores:
                    if self.codecs[c] == "zstd_dict" and self.dicts.get(c) is None:
                        raise ValueError(f"column {c!r}: no records to train a zstd_dict "
                                         "dictionary on; pass dict_bytes")
                    self.stores[c] = s.create(self.paths[c], self.codecs[c], self.dicts.get(c))
        finally:
            for st in self.stores.values():
                st.close()


def from_arrow(source, out, columns=None, *, shapes=None, ragged=(), codec="zstd",
               dict_bytes=None, dict_tier="balanced", shard_rows=None, overwrite=False):
    """See :func:`loaderx.shards.from_arrow`."""
    if shard_rows is not None and int(shard_rows) < 1:
        raise ValueError(f"shard_rows must be >= 1 or None, got {shard_rows}")
    src = _arrow.Source(source)
    specs = _arrow.column_specs(src.schema, columns, shapes, ragged)
    names = list(specs)
    codecs = per_column(codec, names, "codec")
    dicts = per_column(dict_bytes, names, "dict_bytes")
    out = os.path.abspath(os.fspath(out))
    staging = begin(out, overwrite)
    shard, k, row0 = None, 0, 0
    try:
        def new_shard(k):
            return Shard({c: os.path.join(staging, c, shard_name(k)) for c in names}, specs,
                         codecs, dicts, dict_tier)

        for batch in src.batches(names):
            lo = 0
            while lo < batch.num_rows:
                if shard is None:
                    shard = new_shard(k)
                left = batch.num_rows - lo
                take = left if shard_rows is None else min(left, int(shard_rows) - shard.rows)
                shard.add(batch.slice(lo, take) if take < batch.num_rows else batch, row0)
                lo += take
                row0 += take
                if shard_rows is not None and shard.rows == int(shard_rows):
                    s, shard = shard, None
                    s.close()
                    k += 1
        if shard is None and k == 0:
            shard = new_shard(0)  # no rows: one empty shard per column
        if shard is not None:
            s, shard = shard, None
            s.close()
        for c in names:
            os.makedirs(os.path.join(staging, c), exist_ok=True)
    except BaseException:
        if shard is not None:
            try:
                shard.close()
            except Exception:  # noqa: BLE001  (the first error is the one to see)
                pass
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return commit(staging, out, names)
