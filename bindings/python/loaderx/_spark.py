"""A Spark DataFrame written as a dataset of shards, one per partition.

The protocol is the one Spark's own file writers follow (a task commits
into its attempt's own directory, the driver commits the job), with
:func:`loaderx.shards.write_shard` as the task's commit:

1. The driver maps the DataFrame's Arrow schema to stores (one rule for
   every Arrow source, see ``loaderx._arrow``) and stages the dataset at
   ``OUT.partial``.
2. Each task (``mapInArrow`` on the executors) writes its partition's
   rows, one shard per column, under ``OUT.partial/.attempts/<attempt
   id>/`` through ``write_shard``; the attempt id is unique in the
   application, so a retried or speculative attempt never touches another
   attempt's files. The task returns (partition, attempt, records).
3. Spark hands the driver exactly one successful result per partition
   (``collect``); results of failed, killed or losing speculative attempts
   never arrive. The driver moves those attempts' shards to
   ``OUT.partial/<column>/part-<partition>``, checks each shard's length,
   drops every other attempt's files and renames the staging directory to
   ``OUT`` (replacing an existing ``OUT`` only with ``overwrite=True``, and
   only then).

So each partition lands exactly once whatever Spark retried, and a job that
fails or a driver that dies leaves ``OUT`` as it was (its ``OUT.partial`` is
removed by the next write). ``OUT`` must be a directory that the driver and
every executor see at the same path (a local path in local mode; NFS or a
mounted file system on a cluster).
"""

import functools
import os
import shutil

from . import _arrow, _dataset
from .shards import write_shard

ATTEMPTS = ".attempts"  # a column name never starts with "."
RESULT_SCHEMA = "partition long, attempt long, records long"


def _arrow_schema(df):
    try:
        from pyspark.sql.pandas.types import to_arrow_schema
    except ImportError as exc:
        raise ImportError(f"write_spark needs pyspark with pyarrow: {exc}") from exc
    try:
        return to_arrow_schema(df.schema)
    except Exception as exc:  # noqa: BLE001  (pyspark raises its own classes)
        raise TypeError(f"the DataFrame's schema has no Arrow form ({exc}); select or cast the "
                        "columns to numbers, arrays or binary first") from exc


def write_spark(df, out, columns=None, *, shapes=None, ragged=(), codec="zstd", dict_bytes=None,
                overwrite=False):
    """See :func:`loaderx.shards.write_spark`."""
    specs = _arrow.column_specs(_arrow_schema(df), columns, shapes, ragged)
    names = list(specs)
    codecs = _dataset.per_column(codec, names, "codec")
    dicts = _dataset.per_column(dict_bytes, names, "dict_bytes")
    for c in names:
        if codecs[c] == "zstd_dict" and dicts[c] is None:
            raise ValueError(f"column {c!r}: codec 'zstd_dict' needs dict_bytes here (one "
                             "dictionary for every partition): train it once with "
                             "loaderx.utils.train_dict on a sample of the column")
    out = os.path.abspath(os.fspath(out))
    staging = _dataset.begin(out, overwrite)
    attempts = os.path.join(staging, ATTEMPTS)
    try:
        os.makedirs(attempts)
        task = functools.partial(_write_partition, attempts, specs, codecs, dicts)
        from pyspark.sql.functions import col

        picked = df.select(*[col("`" + n.replace("`", "``") + "`") for n in names])
        results = picked.mapInArrow(task, RESULT_SCHEMA).collect()
        _commit_attempts(staging, attempts, names,
                         [(r["partition"], r["attempt"], r["records"]) for r in results])
        if not results:  # a DataFrame of no partitions: one empty shard per column
            _dataset.Shard({c: os.path.join(staging, c, _dataset.shard_name(0)) for c in names},
                           specs, codecs, dicts).close()
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return _dataset.commit(staging, out, names)


def _commit_attempts(staging, attempts, names, results):
    """Move the shards of the accepted attempts ``results`` (partition,
    attempt, records) into place under ``staging`` and drop the rest."""
    from .zrecord import open_store

    seen = {}
    for k, a, n in results:
        if k in seen:
            raise RuntimeError(f"Spark returned partition {k} twice (attempts {seen[k]} and {a}); "
                               "nothing was committed")
        seen[k] = a
    for c in names:
        os.makedirs(os.path.join(staging, c))
    for k, a, n in sorted(results):
        for c in names:
            src = os.path.join(attempts, str(a), c)
            dst = os.path.join(staging, c, _dataset.shard_name(k))
            os.rename(src, dst)
            with open_store(dst, readonly=True) as st:
                if len(st) != n:
                    raise RuntimeError(f"partition {k}, column {c!r}: attempt {a} reported {n} "
                                       f"records, its shard holds {len(st)}")
    shutil.rmtree(attempts)


def _write_partition(attempts, specs, codecs, dicts, batches):
    """The task: one partition's Arrow batches into one shard per column
    under ``attempts/<attempt id>``; yields its (partition, attempt,
    records) row."""
    import pyarrow as pa
    from pyspark import TaskContext

    tc = TaskContext.get()
    k, a = tc.partitionId(), tc.taskAttemptId()
    base = os.path.join(attempts, str(a))
    items = [(os.path.join(base, c), functools.partial(_create, s, codecs[c], dicts[c]))
             for c, s in specs.items()]
    rows = [0]

    def fill(stores):
        for b in batches:
            if b.num_rows == 0:
                continue
            for (c, spec), st in zip(specs.items(), stores):
                try:
                    spec.append(st, spec.convert(b.column(c), rows[0]))
                except ValueError as exc:
                    raise ValueError(f"partition {k}: {exc}") from exc
            rows[0] += b.num_rows

    _nested(items, [], fill)
    yield pa.RecordBatch.from_pydict({"partition": [k], "attempt": [a], "records": [rows[0]]},
                                     schema=pa.schema([("partition", pa.int64()),
                                                       ("attempt", pa.int64()),
                                                       ("records", pa.int64())]))


def _create(spec, codec, dict_bytes, path):
    return spec.create(path, codec, dict_bytes)


def _nested(items, stores, body):
    """``body(stores)`` inside one write_shard per (path, create) of
    ``items``: every store is open while the partition streams through, and
    each is committed once body has returned."""
    if not items:
        return body(stores)
    (path, create), rest = items[0], items[1:]
    write_shard(path, create, lambda st: _nested(rest, stores + [st], body))
