"""loaderx.shards.write_spark on a real Spark: a local cluster of two
executor processes (local-cluster[2,1,1024]: two executor JVMs, each with
its own Python workers) writes one shard per partition; every row lands
exactly once, the columns read back as aligned ConcatStores, and killing an
executor process in the middle of a partition's write, then letting Spark
retry the task, leaves the very same dataset. One Spark session serves the
module (its start-up dominates the time)."""

import os
import shutil
import signal
import sys
import time

import numpy as np
import pytest

pyspark = pytest.importorskip("pyspark", reason="pyspark is not installed (requirements/test.txt)")
pa = pytest.importorskip("pyarrow")
if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("no Java runtime (Debian: openjdk-17-jre-headless)", allow_module_level=True)

from loaderx.dataloader import DataLoader  # noqa: E402
from loaderx.shards import ConcatStore, write_spark  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROWS, PARTS = 3000, 6
SCHEMA = "id long, image binary, label long, tokens array<int>, jvm long"


# Rows of a few KiB: Python workers write their output through a 64 KiB
# buffer, so a batch of 64 such rows reaches the next stage at once.
SIDE = 48


def image(i):
    """Row i's SIDE x SIDE uint8 image."""
    return ((np.arange(SIDE * SIDE, dtype=np.int64) * 7 + i * 13) % 251).astype(np.uint8).reshape(
        SIDE, SIDE)


def tokens(i):
    return (np.arange(i % 9 + 1, dtype=np.int32) + i).astype(np.int32)


def executor_jvm():
    """The pid of the executor JVM this Python worker runs under: the
    nearest ancestor process named java."""
    pid = os.getppid()
    while pid > 1:
        with open(f"/proc/{pid}/comm") as f:
            if f.read().strip() == "java":
                return pid
        with open(f"/proc/{pid}/stat") as f:
            pid = int(f.read().rsplit(")", 1)[1].split()[1])
    raise RuntimeError("no java ancestor")


def rows_of(ids, jvm):
    return pa.RecordBatch.from_pydict(
        {"id": ids, "image": [image(i).tobytes() for i in ids], "label": ids % 10,
         "tokens": [tokens(i) for i in ids], "jvm": np.full(len(ids), jvm, dtype=np.int64)},
        schema=pa.schema([("id", pa.int64()), ("image", pa.binary()), ("label", pa.int64()),
                          ("tokens", pa.list_(pa.int32())), ("jvm", pa.int64())]))


def make_rows(fault=None):
    """The mapInArrow function that turns ids into rows. With ``fault``
    (out, marker, partition): the first attempt of that partition, after
    handing over half its rows, waits until its write_shard has committed
    records to the attempt's .partial store, then SIGKILLs its executor
    JVM and itself."""

    def gen(batches):
        from pyspark import TaskContext

        tc = TaskContext.get()
        jvm = executor_jvm()
        batches = list(batches)
        kill = False
        if fault is not None and tc.partitionId() == fault[2]:
            try:
                fd = os.open(fault[1], os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                pass
            else:
                os.write(fd, f"{jvm}\n".encode())
                os.close(fd)
                kill = True
        for j, b in enumerate(batches):
            if kill and j == len(batches) // 2:
                _wait_for_partial(fault[0], tc.taskAttemptId())
                os.kill(jvm, signal.SIGKILL)
                os.kill(os.getpid(), signal.SIGKILL)
            yield rows_of(b.column("id").to_numpy(), jvm)

    return gen


def _wait_for_partial(out, attempt):
    # write_spark's task stages its shards at OUT.partial/.attempts/<attempt
    # id>/<column>; write_shard writes each at <shard>.partial first.
    from loaderx.zrecord import DenseStore

    path = os.path.join(out + ".partial", ".attempts", str(attempt), "id.partial")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with DenseStore.open(path, readonly=True) as st:
                if len(st) > 0:
                    return
        except Exception:  # noqa: BLE001  (not created yet)
            pass
        time.sleep(0.05)
    raise RuntimeError(f"the writer never committed records to {path}")


@pytest.fixture(scope="module")
def spark():
    from pyspark.sql import SparkSession
    from pyspark import cloudpickle

    # The functions of this module go to the executors by value.
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    t0 = time.perf_counter()
    s = (SparkSession.builder.master("local-cluster[2,1,1024]").appName("loaderx-tests")
         .config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.driver.host", "127.0.0.1")
         .config("spark.driver.bindAddress", "127.0.0.1")
         .config("spark.executor.memory", "768m")
         .config("spark.task.maxFailures", "3")
         .config("spark.sql.execution.arrow.maxRecordsPerBatch", "64")
         .getOrCreate())
    s.sparkContext.setLogLevel("ERROR")
    print(f"spark session up in {time.perf_counter() - t0:.1f} s")
    yield s
    s.stop()


def ids_df(spark, fault=None):
    return spark.range(0, ROWS, numPartitions=PARTS).mapInArrow(make_rows(fault), SCHEMA)


def read_all(out):
    cols = {c: ConcatStore(os.path.join(out, c, "*")) for c in
            ("id", "image", "label", "tokens", "jvm")}
    return cols


def check_exactly_once(out):
    cols = read_all(out)
    try:
        n = len(cols["id"])
        assert all(len(c) == n for c in cols.values())
        assert all(len(c.shards) == PARTS for c in cols.values())
        ids = cols["id"][np.arange(n)]
        assert n == ROWS and np.array_equal(np.sort(ids), np.arange(ROWS)), "a row is missing or twice"
        # aligned: position j of every column is row ids[j]
        np.testing.assert_array_equal(cols["image"][np.arange(n)],
                                      np.stack([image(i) for i in ids]))
        np.testing.assert_array_equal(cols["label"][np.arange(n)], ids % 10)
        for i, t in zip(ids, cols["tokens"][np.arange(n)]):
            np.testing.assert_array_equal(t, tokens(i))
        return ids, cols["jvm"][np.arange(n)]
    finally:
        for c in cols.values():
            c.close()


@pytest.fixture(scope="module")
def reference(spark, tmp_path_factory):
    """The dataset written without a fault: (out, what write_spark returned)."""
    out = str(tmp_path_factory.mktemp("spark") / "ref")
    return out, write_spark(ids_df(spark), out, shapes={"image": (SIDE, SIDE)})


def alive(pid):
    """pid runs (a killed child its parent has not reaped yet is a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


def test_every_row_lands_once_in_aligned_shards(spark, reference, tmp_path):
    out, got = reference
    assert sorted(got) == ["id", "image", "jvm", "label", "tokens"]
    assert [os.path.basename(p) for p in got["id"]] == [f"part-{k:05d}" for k in range(PARTS)]
    assert sorted(os.listdir(out)) == ["id", "image", "jvm", "label", "tokens"]
    assert not os.path.exists(out + ".partial")
    ids, jvms = check_exactly_once(out)
    # spark.range partitions are contiguous ranges: partition order is row order
    np.testing.assert_array_equal(ids, np.arange(ROWS))
    # written by both executor processes, neither of them this one
    assert len(set(jvms.tolist())) == 2 and os.getpid() not in set(jvms.tolist())
    with ConcatStore(os.path.join(out, "image", "*")) as im, \
            ConcatStore(os.path.join(out, "label", "*")) as lb:
        assert im.item_shape == (SIDE, SIDE) and im.dtype == np.uint8
        with DataLoader({"image": im, "label": lb}, batch_size=50, seed=1) as dl:
            for _ in range(5):
                b = next(dl)
                np.testing.assert_array_equal(b["label"], dl.last_indices % 10)
    # a second write to the same place is refused before any Spark job
    with pytest.raises(FileExistsError):
        write_spark(ids_df(spark), out, shapes={"image": (SIDE, SIDE)})


def test_overwrite_replaces_once_complete(spark, tmp_path):
    out = str(tmp_path / "ds")
    os.makedirs(os.path.join(out, "stale"))
    write_spark(ids_df(spark).where("id < 1000"), out, ["id", "label"], overwrite=True)
    assert sorted(os.listdir(out)) == ["id", "label"]
    with ConcatStore(os.path.join(out, "id", "*")) as c:
        assert sorted(c[:].tolist()) == list(range(1000))


def test_a_failing_job_leaves_the_dataset_as_it_was(spark, reference):
    out = reference[0]
    before = {c: sorted(os.listdir(os.path.join(out, c))) for c in os.listdir(out)}
    # images of SIDE x SIDE bytes, but 5 x 5 asked: every attempt fails
    with pytest.raises(Exception, match=rf"column 'image', row \d+: holds shape \({SIDE * SIDE},\), "
                                        r"expected \(5, 5\) or 25 values"):
        write_spark(ids_df(spark), out, shapes={"image": (5, 5)}, overwrite=True)
    assert {c: sorted(os.listdir(os.path.join(out, c))) for c in os.listdir(out)} == before
    # The driver removes OUT.partial when the job fails, but tasks that Spark
    # is still cancelling may write into it after that: what they leave is
    # removed by the next write (below), and never reaches OUT.
    check_exactly_once(out)
    other = out + "-next"
    os.makedirs(other + ".partial")  # a leftover of an earlier failed write
    write_spark(ids_df(spark).where("id < 100"), other, ["id"])
    assert not os.path.exists(other + ".partial") and sorted(os.listdir(other)) == ["id"]


def test_killed_executor_mid_write_then_retry_gives_the_same_dataset(spark, reference, tmp_path):
    ref = reference[0]
    out, marker = str(tmp_path / "ds"), str(tmp_path / "killed")
    write_spark(ids_df(spark, (out, marker, 2)), out, shapes={"image": (SIDE, SIDE)})
    # the fault happened: partition 2's first attempt killed its executor
    killed = int(open(marker).read())
    assert not alive(killed), "the executor JVM was not killed"
    check_exactly_once(out)
    # partition 2 is the retry's, written by another executor; shards that
    # the killed executor committed before its death stay as they were
    with ConcatStore([os.path.join(out, "jvm", "part-00002")]) as c:
        assert killed not in set(c[:].tolist())
    # the same dataset as without the fault, shard by shard
    for c in ("id", "image", "label", "tokens"):
        for k in range(PARTS):
            a = ConcatStore([os.path.join(ref, c, f"part-{k:05d}")])
            b = ConcatStore([os.path.join(out, c, f"part-{k:05d}")])
            try:
                assert len(a) == len(b)
                xa, xb = a[:], b[:]
                if c == "tokens":
                    assert all(np.array_equal(u, v) for u, v in zip(xa, xb))
                else:
                    np.testing.assert_array_equal(xa, xb)
            finally:
                a.close()
                b.close()
    assert sorted(os.listdir(out)) == ["id", "image", "jvm", "label", "tokens"]
    assert not os.path.exists(out + ".partial")


FASHION = "/usr/share/datasets/fashion-mnist"


@pytest.mark.skipif(not os.path.isdir(FASHION), reason=f"{FASHION} missing (dataset-fashion-mnist)")
def test_example_trains_the_main_jobs_classifier_from_spark_shards(spark, tmp_path):
    """examples/spark_shards.py on this module's session: Fashion-MNIST as
    Parquet -> Spark -> shards, every record checked, then the main job's
    MLP trained from the shards (fewer steps than the example's default)."""
    sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
    try:
        import spark_shards
    finally:
        sys.path.pop(0)
    accuracy = spark_shards.run(spark, str(tmp_path), FASHION, partitions=4, steps=600)
    assert accuracy >= 0.80
    for split, n in (("train", 60000), ("test", 10000)):
        with ConcatStore(str(tmp_path / "shards" / split / "label" / "*")) as c:
            assert len(c) == n and len(c.shards) == 4
