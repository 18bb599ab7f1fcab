"""``zr ingest`` of Parquet, Arrow IPC and Feather files.

The native ``zr ingest`` recognises these files by their first bytes and
replaces itself with ``$ZR_PYTHON`` (default python3) running :func:`main`
here, with its options already checked: pyarrow is the one Arrow reader of
the project, and the column types map to stores by the rule of
``loaderx._arrow``. The behaviour is zr ingest's own:

* ``--column NAME`` writes that column to STORE; without it every column
  goes to STORE/NAME;
* an existing store is refused (exit 3) unless ``--append``, which checks
  that the store has the column's identity (and the codec, if given);
* ``--codec``, ``--tier``, ``--dict`` as for every input (a zstd_dict
  dictionary is trained on the column's first records unless ``--dict``);
  ``--ragged`` makes a fixed-size column ragged;
* records are appended in slices of about 16 MiB, each one committed, so
  Ctrl-C (or SIGTERM) stops after the slice in flight with everything
  before intact (exit 130);
* one report line per store, or one JSON object with ``--json``.
"""

import argparse
import json
import os
import signal
import sys

EXIT_FAILED, EXIT_USAGE, EXIT_OPEN, EXIT_INTERRUPTED = 1, 2, 3, 130
CMD = "zr ingest"


class _Exit(Exception):
    def __init__(self, status, where, message):
        super().__init__(message)
        self.status, self.where = status, where


def _error(where, message):
    sys.stderr.write(f"{CMD}: {where}: {message}\n" if where else f"{CMD}: {message}\n")


def _parse(argv):
    ap = argparse.ArgumentParser(prog=CMD, add_help=False)
    ap.add_argument("src")
    ap.add_argument("store")
    ap.add_argument("--column")
    ap.add_argument("--codec", choices=["raw", "zstd", "zstd_dict"])
    ap.add_argument("--tier", choices=["fast", "balanced", "max"])
    ap.add_argument("--dict", dest="dict_path")
    for flag in ("--append", "--ragged", "--json", "--quiet"):
        ap.add_argument(flag, action="store_true")
    a = ap.parse_args(argv)
    a.codec_given = a.codec is not None
    if a.codec is None:
        a.codec = "zstd_dict" if (a.tier or a.dict_path) else "zstd"
    a.tier = a.tier or "balanced"
    return a


class _Target:
    """One store being written: created at its first slice (or opened to
    append after its identity is checked)."""

    def __init__(self, spec, path, a):
        self.spec, self.path, self.a = spec, path, a
        self.store, self.created, self.before = None, False, 0
        if os.path.lexists(path):
            if not a.append:
                raise _Exit(EXIT_OPEN, path, "already exists (--append adds records to a store "
                                             "of the same identity)")
            self._open()

    def _open(self):
        from .zrecord import open_store

        try:
            st = open_store(self.path)
        except Exception as exc:  # noqa: BLE001  (the library names the cause)
            raise _Exit(EXIT_OPEN, self.path, f"cannot open to append: {exc}") from exc
        try:
            self._check(st)
        except BaseException:
            st.close()
            raise
        self.store, self.before = st, len(st)

    def _check(self, st):
        spec = self.spec
        kind = "ragged" if not hasattr(st, "item_shape") else "dense"
        if kind != spec.kind or st.dtype != spec.dtype:
            raise _Exit(EXIT_OPEN, self.path, f"cannot append: the store is {kind} "
                                              f"{st.dtype.str}, the input {spec.kind} "
                                              f"{spec.dtype.str}")
        if kind == "dense" and tuple(st.item_shape) != spec.item_shape:
            raise _Exit(EXIT_OPEN, self.path, f"cannot append: the store's records have shape "
                                              f"{tuple(st.item_shape)}, the input's "
                                              f"{spec.item_shape}")
        if self.a.codec_given and st.codec != self.a.codec:
            raise _Exit(EXIT_OPEN, self.path, f"cannot append: the store's codec is {st.codec}, "
                                              f"not {self.a.codec} (leave --codec out, or zr "
                                              "recode)")

    def add(self, records):
        if self.store is None:
            self._create(records)
        self.spec.append(self.store, records)

    def _create(self, records):
        from . import _arrow

        a = self.a
        d = None
        if a.codec == "zstd_dict":
            if a.dict_path:
                try:
                    with open(a.dict_path, "rb") as f:
                        d = f.read()
                except OSError as exc:
                    raise _Exit(EXIT_OPEN, a.dict_path,
                                f"cannot read the dictionary: {exc.strerror}") from exc
            elif records is None:
                raise _Exit(EXIT_FAILED, self.path, "no records to train a dictionary on")
            else:
                d = _arrow.dict_for(records, a.codec, None, a.tier)
        self.store = self.spec.create(self.path, a.codec, d)
        self.created = True

    def added(self):
        return len(self.store) - self.before if self.store is not None else 0

    def report(self, src):
        st, n = self.store, self.added()
        if self.a.json:
            print(json.dumps({"store": self.path, "source": src, "kind": self.spec.kind,
                              "dtype": st.dtype.str, "codec": st.codec, "records_added": n,
                              "records": len(st), "appended": not self.created},
                             separators=(",", ":")))
        else:
            print(f"{self.path}: {'wrote' if self.created else 'appended'} {n} {self.spec.kind} "
                  f"record{'' if n == 1 else 's'} of {st.dtype.str} ({st.codec}) from {src}")
            if not self.created:
                print(f"{self.path}: now {len(st)} records")


def _run(a):
    from . import _arrow

    try:
        src = _arrow.Source(a.src)
    except (ValueError, OSError) as exc:
        raise _Exit(EXIT_FAILED, a.src, f"cannot read: {exc}") from exc
    columns = [a.column] if a.column else list(src.schema.names)
    try:
        specs = _arrow.column_specs(src.schema, columns, ragged=columns if a.ragged else ())
    except KeyError as exc:
        raise _Exit(EXIT_FAILED, a.src, exc.args[0]) from exc
    except (TypeError, ValueError) as exc:
        raise _Exit(EXIT_FAILED, a.src, f"{exc}; pick another column with --column") from exc
    targets = []
    try:
        for c, spec in specs.items():
            targets.append(_Target(spec, a.store if a.column else os.path.join(a.store, c), a))
        row0 = 0
        try:
            for batch in src.batches(columns):
                for t in targets:
                    t.add(t.spec.convert(batch.column(t.spec.name), row0))
                row0 += batch.num_rows
            for t in targets:
                if t.store is None:
                    t._create(None)  # an empty source: an empty store
        except ValueError as exc:
            raise _Exit(EXIT_FAILED, a.src, str(exc)) from exc
        except KeyboardInterrupt:
            done = ", ".join(f"{t.added()} records committed to {t.path}" for t in targets)
            raise _Exit(EXIT_INTERRUPTED, a.src, f"interrupted: {done} before the stop") from None
        for t in targets:
            t.report(a.src)
    finally:
        for t in targets:
            if t.store is not None:
                t.store.close()


def main(argv=None):
    """Run ``zr ingest`` of an Arrow/Parquet file; returns the exit status."""
    # SIGTERM stops after the slice in flight, as Ctrl-C does.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        a = _parse(sys.argv[1:] if argv is None else argv)
    except SystemExit as exc:
        return EXIT_USAGE if exc.code else 0
    try:
        _run(a)
    except _Exit as exc:
        _error(exc.where, str(exc))
        return exc.status
    except KeyboardInterrupt:
        _error(a.src, "interrupted before any record was committed")
        return EXIT_INTERRUPTED
    except ImportError as exc:  # pyarrow: exit 3, as for a missing loaderx
        _error(a.src, f"{exc}: install it there (pip install pyarrow), or set ZR_PYTHON to a "
                      "python3 that has it")
        return EXIT_OPEN
    return 0
