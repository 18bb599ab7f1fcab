"""Arrow and Parquet in: `zr ingest` of Parquet / Arrow IPC / Feather files
(every value back through `zr export`), loaderx.shards.from_arrow over
pyarrow tables, datasets and Hugging Face datasets built here, the type
rule, the refusals naming column and row, and the crash cases: SIGINT and
SIGKILL during an ingest, a writer killed during from_arrow, and the
Spark writer's job commit over planted attempts."""

import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow", reason="pyarrow is not installed (requirements/test.txt)")
import pyarrow.feather as feather  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from loaderx.shards import ConcatStore, from_arrow  # noqa: E402
from loaderx.zrecord import DenseStore, RaggedStore, open_store  # noqa: E402
from zr_cli_helpers import FAILED, INTERRUPTED, OK, OPEN, needs_zr, zr, zr_json  # noqa: E402

N = 500

NUMERIC = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
           "float16", "float32", "float64"]


def numbers(dtype, n, rng):
    dt = np.dtype(dtype)
    if dt.kind == "f":
        x = rng.standard_normal(n).astype(dt)
        x[:4] = [np.nan, np.inf, -np.inf, -0.0]
        return x
    info = np.iinfo(dt)
    x = rng.integers(info.min, info.max, size=n, dtype=dt, endpoint=True)
    x[:2] = [info.min, info.max]
    return x


def table(n=N, seed=0):
    """Every column kind the type rule knows, with edge values."""
    rng = np.random.default_rng(seed)
    cols = {d: pa.array(numbers(d, n, rng)) for d in NUMERIC}
    cols["flag"] = pa.array(rng.integers(0, 2, n).astype(bool))
    img = rng.integers(0, 256, size=(n, 3, 4), dtype=np.uint8)
    cols["image"] = pa.FixedSizeListArray.from_arrays(
        pa.FixedSizeListArray.from_arrays(pa.array(img.reshape(-1)), 4), 3)
    cols["tensor"] = pa.ExtensionArray.from_storage(
        pa.fixed_shape_tensor(pa.float32(), (2, 3)),
        pa.FixedSizeListArray.from_arrays(pa.array(np.arange(n * 6, dtype=np.float32)), 6))
    cols["tokens"] = pa.array([rng.integers(-99, 99, size=1 + i % 13).astype(np.int32)
                               for i in range(n)], pa.list_(pa.int32()))
    cols["points"] = pa.array([rng.standard_normal((1 + i % 4, 3)).astype(np.float64).tolist()
                               for i in range(n)], pa.large_list(pa.list_(pa.float64(), 3)))
    cols["grid"] = pa.array([np.full((1 + i % 3, 2), i, dtype=np.int16).tolist()
                             for i in range(n)], pa.list_(pa.list_(pa.int16())))
    cols["blob"] = pa.array([bytes(rng.integers(0, 256, 1 + i % 40, dtype=np.uint8))
                             for i in range(n)], pa.binary())
    cols["text"] = pa.array(["héllo" * (1 + i % 3) for i in range(n)], pa.large_string())
    cols["code"] = pa.array([f"c{i % 3}" for i in range(n)]).dictionary_encode()
    cols["fixed"] = pa.array([bytes([i % 256] * 5) for i in range(n)], pa.binary(5))
    return pa.table(cols)


def expected(t, name):
    """The records of column `name`: an ndarray (dense) or a list of
    ndarrays (ragged), as the type rule maps them."""
    col = t.column(name).combine_chunks()
    if name in NUMERIC or name == "flag":
        return col.to_numpy(zero_copy_only=False)
    if name == "image":
        return np.asarray(col.flatten().flatten()).reshape(len(col), 3, 4)
    if name == "tensor":
        return col.to_numpy_ndarray()
    if name == "fixed":
        return np.array([list(b) for b in col.to_pylist()], dtype=np.uint8)
    if name in ("blob", "text", "code"):
        vals = col.dictionary_decode() if name == "code" else col
        return [np.frombuffer(v.encode() if isinstance(v, str) else v, np.uint8)
                for v in vals.to_pylist()]
    dt = {"tokens": np.int32, "points": np.float64, "grid": np.int16}[name]
    return [np.array(v, dtype=dt) for v in col.to_pylist()]


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
    assert a.tobytes() == b.tobytes()


def check_records(got, want):
    if isinstance(want, list):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            same_bits(g, w)
    else:
        same_bits(got, want)


def exported(path, tmp):
    """The store at path back through zr export: an ndarray (dense .npy) or
    a list of ndarrays (ragged .npz: data, offsets, shapes)."""
    with open_store(path, readonly=True) as st:
        ragged = isinstance(st, RaggedStore)
    out = os.path.join(tmp, os.path.basename(path) + (".npz" if ragged else ".npy"))
    res = zr("export", path, "-o", out)
    assert res.returncode == OK, res.stderr
    if not ragged:
        return np.load(out)
    z = np.load(out)
    data, off, shapes = z["data"], z["offsets"], z["shapes"]
    return [data[off[i]:off[i + 1]].reshape([d for d in shapes[i] if d >= 0])
            for i in range(len(off) - 1)]


# ------------------------------------------------------------ zr ingest


@needs_zr
def test_zr_ingest_parquet_round_trips_every_value_through_export(tmp_path):
    t = table()
    src = tmp_path / "data.parquet"
    pq.write_table(t, src, row_group_size=97)  # several row groups
    res, lines = zr_json("ingest", src, tmp_path / "st")
    assert res.returncode == OK, res.stderr.decode()
    assert [j["store"] for j in lines] == [str(tmp_path / "st" / c) for c in t.column_names]
    kinds = {j["store"].rsplit("/", 1)[1]: (j["kind"], j["dtype"]) for j in lines}
    assert kinds["image"] == ("dense", "|u1") and kinds["tokens"] == ("ragged", "<i4")
    assert kinds["flag"] == ("dense", "|b1") and kinds["text"] == ("ragged", "|u1")
    assert all(j["records"] == N and not j["appended"] for j in lines)
    for c in t.column_names:
        check_records(exported(str(tmp_path / "st" / c), str(tmp_path)), expected(t, c))


@needs_zr
@pytest.mark.filterwarnings("ignore:Feather V1 files are deprecated:DeprecationWarning")
@pytest.mark.parametrize("fmt", ["ipc-file", "ipc-stream", "feather-v2-zstd", "feather-v1"])
def test_zr_ingest_arrow_files(tmp_path, fmt):
    t = table(200, seed=1)
    src = str(tmp_path / "data.arrow")
    if fmt == "ipc-file":
        with pa.ipc.new_file(src, t.schema) as w:
            for b in t.to_batches(max_chunksize=64):
                w.write_batch(b)
    elif fmt == "ipc-stream":
        with pa.ipc.new_stream(src, t.schema) as w:
            w.write_table(t, max_chunksize=50)
    elif fmt == "feather-v2-zstd":
        feather.write_feather(t, src, compression="zstd")
    else:
        t = t.select(["int64", "float64", "uint8"])  # v1: flat columns only
        feather.write_feather(t, src, version=1)
    for c in ("int64", "float16", "tokens", "points") if fmt != "feather-v1" else ("int64", "uint8"):
        res = zr("ingest", "--column", c, src, tmp_path / c)
        assert res.returncode == OK, res.stderr
        assert f"from {src}" in res.stdout.decode()
        with open_store(str(tmp_path / c), readonly=True) as st:
            check_records(st[:] if isinstance(st, DenseStore) else list(st[:]), expected(t, c))


@needs_zr
def test_zr_ingest_options_append_codec_and_refusals(tmp_path):
    t = table(300, seed=2)
    src = tmp_path / "d.parquet"
    pq.write_table(t, src)
    st = tmp_path / "img"
    assert zr("ingest", "--column", "image", "--codec", "raw", src, st).returncode == OK
    res = zr("ingest", "--column", "image", src, st)
    assert res.returncode == OPEN and b"already exists" in res.stderr
    res = zr("ingest", "--column", "image", "--append", src, st)
    assert res.returncode == OK, res.stderr
    assert b"now 600 records" in res.stdout
    with DenseStore.open(str(st), readonly=True) as s:
        assert s.codec == "raw"
        want = expected(t, "image")
        same_bits(s[:], np.concatenate([want, want]))
    # the identity is checked: another column, another codec
    res = zr("ingest", "--column", "tensor", "--append", src, st)
    assert res.returncode == OPEN and b"cannot append" in res.stderr
    res = zr("ingest", "--column", "image", "--append", "--codec", "zstd", src, st)
    assert res.returncode == OPEN and b"codec is raw" in res.stderr
    # --ragged turns a fixed-size column into ragged records; --tier trains a dictionary
    res, lines = zr_json("ingest", "--column", "image", "--ragged", "--tier", "fast", src,
                         tmp_path / "r")
    assert res.returncode == OK, res.stderr
    assert lines[0]["kind"] == "ragged" and lines[0]["codec"] == "zstd_dict"
    with RaggedStore.open(str(tmp_path / "r"), readonly=True) as s:
        check_records(list(s[:]), list(expected(t, "image")))
    # refusals, each naming what is wrong
    res = zr("ingest", "--column", "nope", src, tmp_path / "x")
    assert res.returncode == FAILED and b"no column 'nope'" in res.stderr
    res = zr("ingest", "--column", "image", tmp_path / "missing.parquet", tmp_path / "x")
    assert res.returncode == OPEN
    np.save(tmp_path / "a.npy", np.zeros(3))
    res = zr("ingest", "--column", "image", tmp_path / "a.npy", tmp_path / "x")
    assert res.returncode == 2 and b"--column NAME goes with a Parquet or Arrow SRC" in res.stderr
    assert not (tmp_path / "x").exists()


@needs_zr
def test_zr_ingest_refuses_nulls_and_other_types_naming_column_and_row(tmp_path):
    src = tmp_path / "d.parquet"
    pq.write_table(pa.table({"a": pa.array([1, 2, None, 4]),
                             "v": pa.array([[1], [2, None], [3], [4]]),
                             "e": pa.array([[1], [2], [], [4]]),
                             "j": pa.array([[[1, 2]], [[1], [2, 3]], [[1]], [[1]]]),
                             "s": pa.array([{"x": 1}] * 4)}), src)
    for col, msg in [("a", b"column 'a', row 2: a null value"),
                     ("v", b"column 'v', row 1: a null value"),
                     ("e", b"column 'e', row 2: an empty row"),
                     ("j", b"column 'j', row 1: its lists at depth 1 differ in length"),
                     ("s", b"column 's' has type struct<x: int64>")]:
        res = zr("ingest", "--column", col, src, tmp_path / col)
        assert res.returncode == FAILED, (col, res.stderr)
        assert msg in res.stderr, (col, res.stderr)
        assert not (tmp_path / col).exists()  # refused before anything was written
    # without --column the struct column stops everything before any write
    res = zr("ingest", src, tmp_path / "all")
    assert res.returncode == FAILED and b"pick another column with --column" in res.stderr
    assert not (tmp_path / "all").exists()


@needs_zr
def test_zr_ingest_says_what_is_missing(tmp_path):
    src = tmp_path / "d.parquet"
    pq.write_table(pa.table({"a": [1, 2]}), src)
    res = subprocess.run([*_zr_native(), "ingest", str(src), str(tmp_path / "s")],
                         env=dict(os.environ, ZR_PYTHON=str(tmp_path / "no-python")),
                         capture_output=True)
    assert res.returncode == OPEN
    assert b"a Parquet file: Parquet and Arrow files are read by the Python package loaderx" \
        in res.stderr and b"no-python" in res.stderr
    # an interpreter whose pyarrow does not import
    fake = tmp_path / "fake"
    (fake / "pyarrow").mkdir(parents=True)
    (fake / "pyarrow" / "__init__.py").write_text("raise ImportError('no pyarrow here')\n")
    res = subprocess.run([*_zr_native(), "ingest", str(src), str(tmp_path / "s")],
                         env=dict(os.environ, ZR_PYTHON=sys.executable, PYTHONPATH=str(fake)),
                         capture_output=True)
    assert res.returncode == OPEN
    assert b"needs pyarrow" in res.stderr and b"no pyarrow here" in res.stderr
    # an interpreter whose loaderx does not import
    (fake / "loaderx").mkdir()
    (fake / "loaderx" / "__init__.py").write_text("raise ImportError('no loaderx here')\n")
    res = subprocess.run([*_zr_native(), "ingest", str(src), str(tmp_path / "s")],
                         env=dict(os.environ, ZR_PYTHON=sys.executable, PYTHONPATH=str(fake)),
                         capture_output=True)
    assert res.returncode == OPEN
    assert b"cannot import it (no loaderx here): install it there (pip install loaderx pyarrow)" \
        in res.stderr
    assert not (tmp_path / "s").exists()


def _zr_native():
    """The native zr (the console script sets ZR_PYTHON itself)."""
    from zr_cli_helpers import ZR
    with open(ZR, "rb") as f:
        if f.read(2) != b"#!":
            return [ZR]
    import importlib.util
    pkg = list(importlib.util.find_spec("loaderx").submodule_search_locations)[0]
    return [os.path.join(pkg, "zr")]


def _big_parquet(tmp_path):
    """~96 MiB of decoded records: six 16 MiB slices."""
    rows = 96 * 1024
    x = (np.arange(rows * 256, dtype=np.int64) * 2654435761 % 100003).astype(np.int32)
    t = pa.table({"x": pa.FixedSizeListArray.from_arrays(pa.array(x), 256)})
    src = tmp_path / "big.parquet"
    pq.write_table(t, src, row_group_size=8192, compression="none")
    return src, x.reshape(rows, 256)


@needs_zr
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_signal_during_parquet_ingest_keeps_committed_records(tmp_path, sig):
    from test_zr_cli_ingest import _start_and_wait_for_a_commit

    src, arr = _big_parquet(tmp_path)
    out = tmp_path / "st"
    p = _start_and_wait_for_a_commit(["ingest", "--column", "x", "--codec", "raw", src, out], out)
    if p.poll() is not None:
        pytest.skip("the ingest finished before it could be interrupted")
    p.send_signal(sig)
    _, err = p.communicate(timeout=120)
    if sig == signal.SIGINT:
        assert p.returncode == INTERRUPTED, err
        assert b"interrupted: " in err and b"records committed to" in err
    with DenseStore.open(str(out), readonly=True) as st:
        n = len(st)
        assert 0 < n <= len(arr)
        np.testing.assert_array_equal(st[:], arr[:n])
    assert zr("verify", out).returncode == OK


# ------------------------------------------------------------ from_arrow


def test_from_arrow_writes_aligned_sharded_columns(tmp_path):
    t = table()
    got = from_arrow(t, tmp_path / "ds", shard_rows=128)
    assert sorted(got) == sorted(t.column_names)
    assert all(len(v) == 4 for v in got.values())  # 128 + 128 + 128 + 116
    assert not os.path.exists(str(tmp_path / "ds") + ".partial")
    for c in t.column_names:
        with ConcatStore(str(tmp_path / "ds" / c / "*")) as cs:
            assert len(cs) == N
            check_records(cs[np.arange(N)], expected(t, c))
    # exists: refused; overwrite replaces
    with pytest.raises(FileExistsError):
        from_arrow(t, tmp_path / "ds")
    from_arrow(t.slice(0, 10), tmp_path / "ds", ["int8", "tokens"], overwrite=True)
    assert sorted(os.listdir(tmp_path / "ds")) == ["int8", "tokens"]


def test_from_arrow_sources(tmp_path):
    import pyarrow.dataset as pads

    t = table(300, seed=3)
    cols = ["int32", "image", "tokens"]
    # a directory of Parquet files (as Spark and others write them)
    os.makedirs(tmp_path / "pq")
    for k in range(3):
        pq.write_table(t.slice(100 * k, 100), tmp_path / "pq" / f"part-{k}.parquet")
    sources = {
        "table": t,
        "batch": t.combine_chunks().to_batches()[0],
        "reader": pa.RecordBatchReader.from_batches(t.schema, t.to_batches(max_chunksize=7)),
        "dataset": pads.dataset(str(tmp_path / "pq"), format="parquet"),
        "dir": str(tmp_path / "pq"),
        "stream": _CStream(t),
    }
    for name, src in sources.items():
        got = from_arrow(src, tmp_path / name, cols, shard_rows=1000)
        for c in cols:
            with ConcatStore(got[c]) as cs:
                check_records(cs[np.arange(len(cs))], expected(t, c))


class _CStream:
    """Any producer of the Arrow C stream interface (polars, DuckDB, ...)."""

    def __init__(self, t):
        self.t = t

    def __arrow_c_stream__(self, requested_schema=None):
        return self.t.__arrow_c_stream__(requested_schema)


def test_from_arrow_shapes_ragged_and_errors(tmp_path):
    t = pa.table({"flat": pa.array([list(range(6 * i, 6 * i + 6)) for i in range(20)],
                                   pa.list_(pa.uint16())),
                  "nested": pa.array([[[i, i], [i, i], [i, i]] for i in range(20)]),
                  "n": pa.array(np.arange(20))})
    got = from_arrow(t, tmp_path / "a", shapes={"flat": (2, 3), "nested": (3, 2)},
                     ragged=["n"])
    with ConcatStore(got["flat"]) as c:
        assert c.item_shape == (2, 3) and c.dtype == np.uint16
        same_bits(c[:], np.arange(120, dtype=np.uint16).reshape(20, 2, 3))
    with ConcatStore(got["nested"]) as c:
        assert c.item_shape == (3, 2)
    with ConcatStore(got["n"]) as c:
        assert c.ragged and [int(r) for r in c[:]] == list(range(20))
        assert c[3].shape == ()
    with pytest.raises(ValueError, match=r"column 'flat', row 0: holds shape \(6,\), expected "
                                         r"\(4, 2\) or 8 values"):
        from_arrow(t, tmp_path / "b", ["flat"], shapes={"flat": (4, 2)})
    assert not os.path.exists(tmp_path / "b") and not os.path.exists(str(tmp_path / "b") + ".partial")
    with pytest.raises(KeyError, match="no column 'zz'"):
        from_arrow(t, tmp_path / "b", ["zz"])
    with pytest.raises(ValueError, match="cannot name a directory"):
        from_arrow(pa.table({"a/b": [1]}), tmp_path / "b")
    with pytest.raises(TypeError, match="column 'ts' has type timestamp"):
        from_arrow(pa.table({"ts": pa.array([1], pa.timestamp("s"))}), tmp_path / "b")


def test_from_arrow_zstd_dict_trains_once_per_column(tmp_path):
    t = pa.table({"x": pa.array([np.full(64, i % 7, dtype=np.uint8).tobytes()
                                 for i in range(2000)], pa.binary())})
    got = from_arrow(t, tmp_path / "d", codec="zstd_dict", dict_tier="fast", shard_rows=500)
    with ConcatStore(got["x"]) as c:
        assert len(c) == 2000 and {s.codec for s in c.shards} == {"zstd_dict"}
        assert bytes(c[8]) == bytes([1] * 64)


def test_from_arrow_hugging_face_dataset(tmp_path):
    datasets = pytest.importorskip("datasets")
    rng = np.random.default_rng(5)
    n = 240
    feats = datasets.Features({"image": datasets.Array2D(shape=(8, 8), dtype="uint8"),
                               "label": datasets.ClassLabel(names=[f"c{k}" for k in range(10)]),
                               "tokens": datasets.Sequence(datasets.Value("int32")),
                               "vec": datasets.Sequence(datasets.Value("float32"), length=5)})
    images = rng.integers(0, 256, size=(n, 8, 8), dtype=np.uint8)
    tokens = [rng.integers(0, 1000, size=1 + i % 11).astype(np.int32) for i in range(n)]
    vecs = rng.standard_normal((n, 5)).astype(np.float32)
    ds = datasets.Dataset.from_dict({"image": list(images), "label": list(np.arange(n) % 10),
                                     "tokens": tokens, "vec": list(vecs)}, features=feats)
    got = from_arrow(ds, tmp_path / "hf", shard_rows=100)
    with ConcatStore(got["image"]) as im, ConcatStore(got["label"]) as lb, \
            ConcatStore(got["tokens"]) as tk, ConcatStore(got["vec"]) as vc:
        assert im.item_shape == (8, 8) and vc.item_shape == (5,) and tk.ragged
        same_bits(im[:], images)
        same_bits(lb[:], np.arange(n, dtype=np.int64) % 10)
        same_bits(vc[:], vecs)
        check_records(list(tk[:]), tokens)
    # the dataset's own order after a shuffle and a select (its indices mapping)
    sub = ds.shuffle(seed=3).select(range(50))
    order = np.array(sub["label"]), sub["image"]
    got = from_arrow(sub, tmp_path / "sub", ["image", "label"])
    with ConcatStore(got["image"]) as im, ConcatStore(got["label"]) as lb:
        same_bits(lb[:], order[0].astype(np.int64))
        same_bits(im[:], np.array(order[1], dtype=np.uint8))
    # saved with save_to_disk: Arrow stream files, read back by zr ingest too
    ds.save_to_disk(str(tmp_path / "saved"))
    arrow_files = sorted(f for f in os.listdir(tmp_path / "saved") if f.endswith(".arrow"))
    assert arrow_files
    got = from_arrow(datasets.load_from_disk(str(tmp_path / "saved")), tmp_path / "loaded")
    with ConcatStore(got["image"]) as im:
        same_bits(im[:], images)
    from zr_cli_helpers import ZR
    if ZR:
        res = zr("ingest", "--column", "image", tmp_path / "saved" / arrow_files[0],
                 tmp_path / "zi")
        assert res.returncode == OK, res.stderr
        with DenseStore.open(str(tmp_path / "zi"), readonly=True) as st:
            same_bits(st[:], images[:len(st)])


KILLER = textwrap.dedent("""
    import os, signal, sys
    import numpy as np, pyarrow as pa
    from loaderx import _arrow
    from loaderx.shards import from_arrow
    out, kill_at = sys.argv[1], int(sys.argv[2])
    convert = _arrow.ColumnSpec.convert
    seen = [0]
    def dying(self, array, row0=0):
        seen[0] += 1
        if seen[0] == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        return convert(self, array, row0)
    _arrow.ColumnSpec.convert = dying
    x = np.arange(20000 * 16, dtype=np.int64).reshape(20000, 16)
    t = pa.table({"x": pa.FixedSizeListArray.from_arrays(pa.array(x.reshape(-1)), 16)})
    reader = pa.RecordBatchReader.from_batches(t.schema, t.to_batches(max_chunksize=1000))
    from_arrow(reader, out, shard_rows=3000, overwrite=True)
""")


def test_from_arrow_killed_midway_leaves_the_dataset_as_it_was(tmp_path):
    out = str(tmp_path / "ds")
    from_arrow(pa.table({"x": pa.array([[1] * 16], pa.list_(pa.int64(), 16))}), out)
    for kill_at in (1, 7, 19):
        p = subprocess.run([sys.executable, "-c", KILLER, out, str(kill_at)], capture_output=True)
        assert p.returncode == -signal.SIGKILL, p.stderr.decode()
        assert sorted(os.listdir(out)) == ["x"]
        with ConcatStore(os.path.join(out, "x", "*")) as c:
            assert len(c) == 1  # the earlier dataset, whole
    # the next write removes the leftover and replaces the dataset
    p = subprocess.run([sys.executable, "-c", KILLER, out, "0"], capture_output=True)
    assert p.returncode == 0, p.stderr.decode()
    assert not os.path.exists(out + ".partial") and not os.path.exists(out + ".old")
    with ConcatStore(os.path.join(out, "x", "*")) as c:
        assert len(c) == 20000 and len(c.shards) == 7
        same_bits(c[:], np.arange(20000 * 16, dtype=np.int64).reshape(20000, 16))


# ------------------------------------------------- the Spark job commit


def test_spark_job_commit_takes_only_the_accepted_attempts(tmp_path):
    """The driver side of write_spark over planted attempts: partition 1 ran
    twice to completion (a retry after a lost result, or a speculative
    copy), partition 0's first attempt died mid-write. Only the attempts
    Spark returned are committed, each exactly once."""
    from loaderx import _arrow, _dataset
    from loaderx._spark import ATTEMPTS, _commit_attempts

    specs = _arrow.column_specs(pa.schema([("x", pa.int64())]))
    staging = _dataset.begin(str(tmp_path / "ds"), False)
    attempts = os.path.join(staging, ATTEMPTS)

    def attempt(a, values, finish=True):
        path = os.path.join(attempts, str(a), "x")
        st = specs["x"].create(path + (".partial" if not finish else ""))
        st.append(np.asarray(values, dtype=np.int64))
        st.close()

    attempt(10, [0, 1, 2], finish=False)   # partition 0, killed
    attempt(11, [0, 1, 2])                 # partition 0, retry: accepted
    attempt(12, [3, 4])                    # partition 1, finished, result lost
    attempt(13, [3, 4])                    # partition 1, again: accepted
    _commit_attempts(staging, attempts, ["x"], [(1, 13, 2), (0, 11, 3)])
    got = _dataset.commit(staging, str(tmp_path / "ds"), ["x"])
    assert [os.path.basename(p) for p in got["x"]] == ["part-00000", "part-00001"]
    assert sorted(os.listdir(tmp_path / "ds")) == ["x"]
    with ConcatStore(got["x"]) as c:
        assert c[:].tolist() == [0, 1, 2, 3, 4]
    # a partition reported twice, or a shard shorter than reported: nothing is committed
    staging = _dataset.begin(str(tmp_path / "ds2"), False)
    attempts = os.path.join(staging, ATTEMPTS)
    attempt(20, [0])
    with pytest.raises(RuntimeError, match="partition 0 twice"):
        _commit_attempts(staging, attempts, ["x"], [(0, 20, 1), (0, 20, 1)])
    with pytest.raises(RuntimeError, match="reported 5 records, its shard holds 1"):
        _commit_attempts(staging, attempts, ["x"], [(0, 20, 5)])
    assert not os.path.exists(tmp_path / "ds2")


DRIVER = textwrap.dedent("""
    import os, signal, sys
    import numpy as np, pyarrow as pa
    from loaderx import _arrow, _dataset
    from loaderx._spark import ATTEMPTS, _commit_attempts
    out, kill_at, after = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "after"
    specs = _arrow.column_specs(pa.schema([("x", pa.int64()), ("y", pa.list_(pa.int32()))]))
    staging = _dataset.begin(out, True)
    attempts = os.path.join(staging, ATTEMPTS)
    results = []
    for k in range(3):                     # three partitions, attempts 40, 41, 42
        a = 40 + k
        for c in ("x", "y"):
            st = specs[c].create(os.path.join(attempts, str(a), c))
            if c == "x":
                st.append(np.arange(10 * k, 10 * k + 10, dtype=np.int64))
            else:
                st.append([np.arange(i % 3 + 1, dtype=np.int32) for i in range(10)])
            st.close()
        results.append((k, a, 10))
    rename, calls = os.rename, [0]
    def dying(src, dst):
        calls[0] += 1
        if calls[0] == kill_at and not after:
            os.kill(os.getpid(), signal.SIGKILL)
        rename(src, dst)
        if calls[0] == kill_at and after:
            os.kill(os.getpid(), signal.SIGKILL)
    os.rename = dying
    _commit_attempts(staging, attempts, ["x", "y"], results)
    _dataset.commit(staging, out, ["x", "y"])
    print(calls[0])
""")


def test_spark_driver_killed_during_its_commit_leaves_one_whole_dataset(tmp_path):
    """The driver side of write_spark SIGKILLed before and after each of its
    renames (the accepted attempts' shards into place, then the dataset
    over the earlier one): the path holds the earlier dataset or the new
    one, whole, never a mix or a half shard; where the kill fell between
    the two renames of the swap, the earlier dataset waits at OUT.old and
    the next write puts it back before anything else."""
    from loaderx import _dataset

    out = str(tmp_path / "ds")

    def earlier():
        from_arrow(pa.table({"x": pa.array([7, 8], pa.int64()),
                             "y": pa.array([[1], [2, 3]], pa.list_(pa.int32()))}),
                   out, overwrite=True)

    def read(path):
        with ConcatStore(os.path.join(path, "x", "*")) as x, \
                ConcatStore(os.path.join(path, "y", "*")) as y:
            assert len(x) == len(y)
            return x[:].tolist(), [r.tolist() for r in y[:]]

    new = (list(range(30)), [list(range(i % 3 + 1)) for i in range(10)] * 3)
    old = ([7, 8], [[1], [2, 3]])
    earlier()
    p = subprocess.run([sys.executable, "-c", DRIVER, out, "0", "before"], capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stderr
    renames = int(p.stdout)
    assert renames == 3 * 2 + 2  # 3 partitions x 2 columns, then the swap's two
    assert read(out) == new and not os.path.exists(out + ".partial")
    seen = set()
    for kill_at in range(1, renames + 1):
        for when in ("before", "after"):
            earlier()
            p = subprocess.run([sys.executable, "-c", DRIVER, out, str(kill_at), when],
                               capture_output=True, text=True)
            assert p.returncode == -signal.SIGKILL, p.stderr
            if os.path.exists(out):
                got = read(out)
                assert got in (old, new), (kill_at, when)
                seen.add("new" if got == new else "old")
            else:  # between the swap's renames
                assert (kill_at, when) in ((renames, "before"), (renames - 1, "after"))
                assert read(out + ".old") == old
                seen.add("between")
            # the next write starts by putting the earlier dataset back
            staging = _dataset.begin(out, True)
            assert not os.listdir(staging) and not os.path.exists(out + ".old")
            assert read(out) in (old, new)
            os.rmdir(staging)
    assert seen == {"old", "new", "between"}


@pytest.mark.parametrize("typ", [pa.int64(), pa.list_(pa.uint8(), 4), pa.list_(pa.int32()),
                                 pa.binary(), pa.string(), pa.list_(pa.list_(pa.int16(), 2))],
                         ids=str)
def test_a_slice_of_no_rows_appends_nothing(tmp_path, typ):
    """A batch of no rows (Spark hands a task one for a partition a filter
    emptied) appends no record to a dense or a ragged store, and the store
    takes rows after it."""
    from loaderx import _arrow

    spec = _arrow.column_specs(pa.schema([("c", typ)]))["c"]
    one = {"int64": [5], "fixed_size_list<item: uint8>[4]": [[1, 2, 3, 4]], "binary": [b"ab"],
           "string": ["ab"], "list<item: int32>": [[1, 2]],
           "list<item: fixed_size_list<item: int16>[2]>": [[[1, 2]]]}[str(typ)]
    with spec.create(str(tmp_path / "s")) as st:
        for empty in (pa.array([], typ), pa.array(one, typ).slice(1)):
            assert spec.append(st, spec.convert(empty)) == 0
            assert len(st) == 0
        spec.append(st, spec.convert(pa.array(one * 3, typ)))
        assert len(st) == 3
