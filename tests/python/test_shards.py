"""Many stores as one dataset: loaderx.shards (ConcatStore, Mixture,
write_shard) and the DataLoader over them."""

import errno
import os
import pickle

import numpy as np
import pytest

from loaderx.dataloader import DataLoader
from loaderx.shards import ConcatStore, Mixture, shard_paths, write_shard
from loaderx.zrecord import DenseStore, RaggedStore

LENS = [30, 1, 0, 57, 12]  # one empty shard on purpose


def image(i):
    """Record i of the whole dataset: a (3, 4) float32 array that encodes i."""
    return (np.arange(12, dtype="<f4").reshape(3, 4) + 100.0 * i).astype("<f4")


def tokens(i):
    return np.arange(i % 5 + 1, dtype="<i4") + 10 * i


def write_dataset(root, lens, codec="zstd", ragged=True):
    """The same dataset as len(lens) shards (x-NN, y-NN) and as one store
    (all-x, all-y)."""
    start = 0
    for k, n in enumerate(lens):
        idx = range(start, start + n)
        x = DenseStore.create(root / f"x-{k:02d}", "<f4", (3, 4),
                              codec="raw" if k % 2 else codec)
        if n:
            x.append(np.stack([image(i) for i in idx]))
        x.close()
        if ragged:
            y = RaggedStore.create(root / f"y-{k:02d}", "<i4", codec=codec)
            y.append([tokens(i) for i in idx])
            y.close()
        start += n
    x = DenseStore.create(root / "all-x", "<f4", (3, 4), codec=codec)
    x.append(np.stack([image(i) for i in range(start)]))
    x.close()
    if ragged:
        y = RaggedStore.create(root / "all-y", "<i4", codec=codec)
        y.append([tokens(i) for i in range(start)])
        y.close()
    return start


def test_concat_reads_like_one_store(store_dir):
    n = write_dataset(store_dir, LENS)
    with ConcatStore(str(store_dir / "x-*")) as x, ConcatStore(str(store_dir / "y-*")) as y:
        assert len(x) == len(y) == n == sum(LENS)
        assert x.dtype == np.dtype("<f4") and x.item_shape == (3, 4) and not x.ragged
        assert y.ragged and not hasattr(y, "item_shape")
        assert list(x.offsets) == [0, 30, 31, 31, 88, 100]
        for i in range(n):
            np.testing.assert_array_equal(x[i], image(i))
            np.testing.assert_array_equal(y[i], tokens(i))
        np.testing.assert_array_equal(x[-1], image(n - 1))
        idx = np.array([[5, 99], [30, 31]])
        got = x[idx]
        assert got.shape == (2, 2, 3, 4)
        np.testing.assert_array_equal(got[1, 1], image(31))
        np.testing.assert_array_equal(x[10:40:3], np.stack([image(i) for i in range(10, 40, 3)]))
        mask = np.zeros(n, dtype=bool)
        mask[[0, 31, 99]] = True
        assert [int(r[0]) for r in y[mask]] == [0, 310, 990]
        with pytest.raises(IndexError):
            x[n]
        with pytest.raises(IndexError):
            x[-n - 1]
        sh, lo = x.locate([0, 30, 31, 99])
        assert list(sh) == [0, 1, 3, 4] and list(lo) == [0, 0, 0, 11]
        assert x.info()["shards"] == 5 and x.info()["records"] == n


def test_concat_of_open_stores_is_borrowed(store_dir):
    write_dataset(store_dir, [4, 5], ragged=False)
    a = DenseStore.open(store_dir / "x-00", readonly=True)
    b = DenseStore.open(store_dir / "x-01", readonly=True)
    c = ConcatStore([a, b])
    dl = DataLoader({"x": c}, batch_size=3)
    next(dl)
    c.close()
    assert dl.closed and not a.closed and not b.closed
    c = ConcatStore([a, b])
    dl = DataLoader({"x": c}, batch_size=3)
    b.close()  # a borrowed shard going away closes the concatenation and its loader
    assert c.closed and dl.closed and not a.closed
    a.close()


def test_identity_mismatch_names_both_shards(store_dir):
    DenseStore.create(store_dir / "s-0", "<f4", (3, 4)).close()
    DenseStore.create(store_dir / "s-1", "<f4", (3, 5)).close()
    DenseStore.create(store_dir / "t-1", "<i4", (3, 4)).close()
    RaggedStore.create(store_dir / "u-1", "<f4").close()
    with pytest.raises(ValueError, match="item_shape") as e:
        ConcatStore([store_dir / "s-0", store_dir / "s-1"])
    assert "s-0" in str(e.value) and "s-1" in str(e.value) and "(3, 5)" in str(e.value)
    with pytest.raises(ValueError, match="dtype.*<i4"):
        ConcatStore([store_dir / "s-0", store_dir / "t-1"])
    with pytest.raises(ValueError, match="kind"):
        ConcatStore([store_dir / "s-0", store_dir / "u-1"])
    with pytest.raises(ValueError, match="no shards match"):
        ConcatStore(str(store_dir / "nothing-*"))
    # nothing was left open: a writer can take every shard
    DenseStore.open(store_dir / "s-0").close()
    DenseStore.open(store_dir / "s-1").close()


def test_loader_over_shards_equals_loader_over_one_store(store_dir):
    write_dataset(store_dir, LENS)
    x, y = ConcatStore(str(store_dir / "x-*")), ConcatStore(str(store_dir / "y-*"))
    ax = DenseStore.open(store_dir / "all-x", readonly=True)
    ay = RaggedStore.open(store_dir / "all-y", readonly=True)
    for mode in ("cyclic", "iid", "sequential"):
        one = DataLoader({"x": ax, "y": ay}, batch_size=16, mode=mode, seed=4, num_workers=1)
        many = DataLoader({"x": x, "y": y}, batch_size=16, mode=mode, seed=4, num_workers=3)
        for _ in range(20):
            a, b = next(one), next(many)
            np.testing.assert_array_equal(a["x"], b["x"])
            assert all(np.array_equal(p, q) for p, q in zip(a["y"], b["y"]))
            np.testing.assert_array_equal(one.last_indices, many.last_indices)
        state = many.state()
        many.close()
        resumed = DataLoader.from_state({"x": x, "y": y}, state)
        np.testing.assert_array_equal(next(resumed)["x"], next(one)["x"])
        resumed.close()
        one.close()
    # a concatenation and a plain store side by side (same total length)
    dl = DataLoader({"x": x, "y": ay}, batch_size=8, seed=1)
    b = next(dl)
    for i, j in enumerate(dl.last_indices):
        np.testing.assert_array_equal(b["x"][i], image(int(j)))
        np.testing.assert_array_equal(b["y"][i], tokens(int(j)))
    dl.close()
    for s in (x, y, ax, ay):
        s.close()


def test_concatenated_streams_must_be_sharded_alike(store_dir):
    write_dataset(store_dir, [10, 20], ragged=False)
    other = store_dir / "other"
    other.mkdir()
    # the same 30 records, split 20 + 10: equal totals, shards paired wrongly
    for k, n in enumerate([20, 10]):
        s = DenseStore.create(other / f"z-{k}", "<f4", (3, 4))
        s.append(np.zeros((n, 3, 4), dtype="<f4"))
        s.close()
    x = ConcatStore(str(store_dir / "x-*"))
    z = ConcatStore(str(other / "z-*"))
    assert len(x) == len(z) == 30
    with pytest.raises(ValueError, match="shard 0"):
        DataLoader({"x": x, "z": z}, batch_size=4)
    x.close()
    z.close()


def test_concat_pickles_by_path(store_dir):
    write_dataset(store_dir, [3, 4], ragged=False)
    with ConcatStore(str(store_dir / "x-*")) as c:
        d = pickle.loads(pickle.dumps(c))
        np.testing.assert_array_equal(d[5], image(5))
        d.close()
    w = ConcatStore([store_dir / "x-00"], readonly=False)
    with pytest.raises(TypeError, match="read-only"):
        pickle.dumps(w)
    w.close()


def test_shard_paths_skips_partial(store_dir):
    write_dataset(store_dir, [2, 2], ragged=False)
    DenseStore.create(store_dir / "x-02.partial", "<f4", (3, 4)).close()
    assert [os.path.basename(p) for p in shard_paths(str(store_dir / "x-*"))] == ["x-00", "x-01"]


def test_write_shard_commits_or_leaves_nothing(store_dir):
    path = store_dir / "shard-0"

    def create(p):
        return DenseStore.create(p, "<f4", (3, 4))

    def failing(store):
        store.append(np.stack([image(i) for i in range(5)]))
        raise RuntimeError("writer died")

    with pytest.raises(RuntimeError):
        write_shard(path, create, failing)
    assert not path.exists() and (store_dir / "shard-0.partial").exists()
    write_shard(path, create, lambda s: s.append(np.stack([image(i) for i in range(7)])))
    assert not (store_dir / "shard-0.partial").exists()
    with DenseStore.open(path, readonly=True) as s:
        assert len(s) == 7
    # a rerun replaces a committed shard only once the new one is complete
    write_shard(path, create, lambda s: s.append(np.stack([image(i) for i in range(3)])))
    with DenseStore.open(path, readonly=True) as s:
        assert len(s) == 3
    # a swap killed between its two renames: the committed shard sits at
    # .old, which globs skip; the next call puts it back before writing
    os.rename(path, str(path) + ".old")
    with pytest.raises(ValueError, match="no shards match"):
        ConcatStore(str(store_dir / "shard-*"))
    with pytest.raises(RuntimeError):
        write_shard(path, create, failing)
    with DenseStore.open(path, readonly=True) as s:
        assert len(s) == 3  # restored, untouched by the failed attempt
    assert not (store_dir / "shard-0.old").exists()


def test_write_shard_failed_replace_keeps_the_earlier_shard(store_dir, monkeypatch):
    """The swap's second rename (.partial -> path) fails: the first rename
    (path -> .old) is undone before the error, so a glob still sees every
    shard; with the undo failing too, the error names .old and the next
    call restores it."""
    path = store_dir / "shard-0"

    def create(p):
        return DenseStore.create(p, "<f4", (3, 4))

    def write(n):
        return lambda s: s.append(np.stack([image(i) for i in range(n)]))

    write_shard(path, create, write(3))
    real_rename = os.rename
    fail = {"partial": True, "undo": False}

    def rename(src, dst):
        src = os.fspath(src)
        if fail["partial"] and src.endswith(".partial"):
            raise OSError(errno.EIO, "injected: rename of the new shard failed")
        if fail["undo"] and src.endswith(".old"):
            raise OSError(errno.EIO, "injected: the undo failed too")
        return real_rename(src, dst)

    monkeypatch.setattr(os, "rename", rename)
    with pytest.raises(OSError, match="rename of the new shard failed"):
        write_shard(path, create, write(5))
    assert not (store_dir / "shard-0.old").exists()
    with ConcatStore(str(store_dir / "shard-*")) as c:
        assert len(c) == 3  # the earlier shard, in place
    # both renames fail: the error says where the earlier shard waits
    fail["undo"] = True
    with pytest.raises(OSError, match=r"waits at .*shard-0\.old") as info:
        write_shard(path, create, write(5))
    assert isinstance(info.value.__cause__, OSError)
    assert not path.exists() and (store_dir / "shard-0.old").exists()
    # the next call (renames working again) restores it before its own write
    fail.update(partial=False, undo=False)

    def failing(store):
        store.append(np.stack([image(i) for i in range(2)]))
        raise RuntimeError("writer died")

    with pytest.raises(RuntimeError):
        write_shard(path, create, failing)
    with DenseStore.open(path, readonly=True) as s:
        assert len(s) == 3
    write_shard(path, create, write(5))
    with DenseStore.open(path, readonly=True) as s:
        assert len(s) == 5
    assert sorted(os.listdir(store_dir)) == ["shard-0"]


# ------------------------------------------------------------------ mixture


def mixture_sources(root):
    """Source 'big' (two shards, 300 records) and 'small' (one store, 40)."""
    big = root / "big"
    big.mkdir()
    start = 0
    for k, n in enumerate([180, 120]):
        x = DenseStore.create(big / f"x-{k}", "<f4", (3, 4))
        x.append(np.stack([image(i) for i in range(start, start + n)]))
        x.close()
        y = RaggedStore.create(big / f"y-{k}", "<i4")
        y.append([tokens(i) for i in range(start, start + n)])
        y.close()
        start += n
    x = DenseStore.create(root / "small-x", "<f4", (3, 4), codec="raw")
    x.append(np.stack([image(10000 + i) for i in range(40)]))
    x.close()
    y = RaggedStore.create(root / "small-y", "<i4", codec="raw")
    y.append([tokens(10000 + i) for i in range(40)])
    y.close()
    return ({"x": str(big / "x-*"), "y": str(big / "y-*")},
            {"x": root / "small-x", "y": root / "small-y"})


def test_mixture_records_and_shares(store_dir):
    big, small = mixture_sources(store_dir)
    w = {"big": 0.7, "small": 0.3}
    with Mixture({"big": big, "small": small}, weights=w, modes={"small": "iid"}) as m:
        assert m.lengths() == {"big": 300, "small": 40}
        dl = DataLoader(m, batch_size=32, seed=11, num_workers=2)
        counts = {"big": 0, "small": 0}
        nbatches = 300
        for _ in range(nbatches):
            b = next(dl)
            src, idx = m.locate(dl)
            for k in range(32):
                g = int(idx[k]) + (10000 if src[k] == "small" else 0)
                np.testing.assert_array_equal(b["x"][k], image(g))
                np.testing.assert_array_equal(b["y"][k], tokens(g))
                counts[src[k]] += 1
            # the cyclic source never repeats a record within a batch
            big_idx = idx[src == "big"]
            assert len(set(big_idx.tolist())) == len(big_idx)
        dl.close()
    # Pearson chi-square, 1 degree of freedom, 9600 draws: P(X > 15.1) = 1e-4
    # for a correct sampler. The seed is fixed, so the outcome is too.
    n = nbatches * 32
    chi = sum((counts[s] - n * w[s]) ** 2 / (n * w[s]) for s in w)
    assert chi < 15.1, (counts, chi)
    # the test can tell a wrong weight: 0.6 / 0.4 is rejected by the same data
    chi_wrong = sum((counts[s] - n * p) ** 2 / (n * p) for s, p in (("big", 0.6), ("small", 0.4)))
    assert chi_wrong > 15.1


def test_mixture_is_pure_in_seed_step_rank(store_dir):
    big, small = mixture_sources(store_dir)
    m = Mixture([big, small], weights=[1, 1], modes=["cyclic", "iid"])
    ref = DataLoader(m, batch_size=8, seed=5, num_workers=1)
    batches = [next(ref)["x"].copy() for _ in range(12)]
    state = ref.state()
    following = next(ref)["x"]
    ref.close()
    # The state's mode is the one sources without their own draw by (the
    # loader's, cyclic by default); the sources' own modes, weights and
    # records are in the fingerprint.
    assert state["step"] == 12 and state["seed"] == 5 and state["mode"] == "cyclic"
    for entry in state["fingerprint"]["streams"]:  # one per stream name, each the mixture's
        assert [s["weight"] for s in entry["mixture"]["sources"]] == [1, 1]
        assert [s["mode"] for s in entry["mixture"]["sources"]] == ["cyclic", "iid"]
    # resume from state: exactly the batch that came next
    res = DataLoader.from_state(m, state, num_workers=3)
    np.testing.assert_array_equal(next(res)["x"], following)
    res.close()
    # any thread count, any start step
    many = DataLoader(m, batch_size=8, seed=5, num_workers=4, prefetch=7, start_step=3)
    for k in range(3, 12):
        np.testing.assert_array_equal(next(many)["x"], batches[k])
    many.close()
    # ranks: world_size 2 of batch 4 together are the batch of 8
    r0 = DataLoader(m, batch_size=4, seed=5, rank=0, world_size=2)
    r1 = DataLoader(m, batch_size=4, seed=5, rank=1, world_size=2)
    for k in range(12):
        np.testing.assert_array_equal(np.concatenate([next(r0)["x"], next(r1)["x"]]), batches[k])
    r0.close()
    r1.close()
    # another seed is another run
    other = DataLoader(m, batch_size=8, seed=6)
    assert not np.array_equal(next(other)["x"], batches[0])
    other.close()
    m.close()


def test_mixture_errors(store_dir):
    big, small = mixture_sources(store_dir)
    with pytest.raises(ValueError, match="same stream names"):
        Mixture({"a": big, "b": {"x": small["x"]}}, weights=[1, 1])
    with pytest.raises(ValueError, match="finite number > 0"):
        Mixture({"a": big, "b": small}, weights=[1, 0])
    with pytest.raises(ValueError, match="name every source"):
        Mixture({"a": big, "b": small}, weights={"a": 1})
    m = Mixture({"a": big, "b": small}, weights=[1, 1])  # small is cyclic by default
    with pytest.raises(ValueError, match="iid"):
        DataLoader(m, batch_size=64)
    m.close()
    wrong = {"x": small["y"], "y": small["x"]}  # kinds swapped against the first source
    m = Mixture({"a": big, "b": wrong}, weights=[1, 1], modes="iid")
    with pytest.raises(ValueError, match="identity in every source"):
        DataLoader(m, batch_size=4)
    m.close()


def test_closing_a_source_closes_the_mixture_loader(store_dir):
    big, small = mixture_sources(store_dir)
    cb = ConcatStore(big["x"]), ConcatStore(big["y"])
    m = Mixture({"a": {"x": cb[0], "y": cb[1]}, "b": small}, weights=[2, 1], modes="iid")
    dl = DataLoader(m, batch_size=4)
    next(dl)
    cb[0].close()
    assert dl.closed
    m.close()
    cb[1].close()


def test_zr_info_and_verify_over_shards(store_dir):
    import glob
    import shutil
    import subprocess

    zr = shutil.which("zr")
    if zr is None:
        pytest.skip("the zr tool is not on PATH")
    n = write_dataset(store_dir, LENS)
    shards = sorted(glob.glob(str(store_dir / "x-*")))
    p = subprocess.run([zr, "info", "--concat", *shards], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    assert f"{len(LENS)} shards as one (dense <f4, shape (3, 4)), {n} records" in p.stdout
    p = subprocess.run([zr, "verify", "--concat", *shards], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("0 bad (ok)") == len(LENS)
    # a ragged shard among dense ones: named, exit 1
    p = subprocess.run([zr, "verify", "--concat", *shards, str(store_dir / "y-00")],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 1
    assert "not one dataset" in p.stderr and "y-00" in p.stderr and "kind" in p.stderr


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_loader_over_shards_survives_fork(store_dir):
    """A forked child rebuilds the loader over shards (and a mixture) that
    reopen themselves, and gets the batch the parent would get next."""
    write_dataset(store_dir, LENS)
    x = ConcatStore(str(store_dir / "x-*"))
    big, small = mixture_sources(store_dir)
    m = Mixture({"big": big, "small": small}, weights=[1, 1], modes="iid")
    for streams in ({"x": x}, m):
        dl = DataLoader(streams, batch_size=8, seed=2)
        next(dl)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: no pytest machinery, just bytes on the pipe
            code = 1
            try:
                os.close(r)
                os.write(w, next(dl)["x"].tobytes())
                code = 0
            finally:
                os._exit(code)
        os.close(w)
        got = b""
        while True:
            chunk = os.read(r, 1 << 16)
            if not chunk:
                break
            got += chunk
        os.close(r)
        _, status = os.waitpid(pid, 0)
        assert os.WEXITSTATUS(status) == 0
        expect = next(dl)["x"]
        assert got == expect.tobytes()
        dl.close()
    m.close()
    x.close()


def test_bench_script_runs(tmp_path):
    """bench/bench_shards.py at smoke size: it runs and prints its ratios
    (speed is never asserted in a test)."""
    import subprocess
    import sys

    bench = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench",
                         "bench_shards.py")
    p = subprocess.run([sys.executable, bench, "--dir", str(tmp_path), "--mib", "1",
                        "--rounds", "1", "--steps", "3", "--shards", "4"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "worst median ratio" in p.stdout and "loader 2KiB mixture" in p.stdout


def test_write_shard_reports_a_failed_directory_fsync(store_dir, monkeypatch):
    """The swap's rename is made durable by an fsync of the parent
    directory; when that fsync fails (EIO), write_shard raises naming the
    directory instead of returning as if the shard were durable. The shard
    is in place (the rename happened), so a reader sees it whole; a file
    system that cannot fsync a directory at all (EINVAL) is not an error."""
    path = store_dir / "shard-0"

    def create(p):
        return DenseStore.create(p, "<f4", (3, 4))

    real_fsync = os.fsync
    answer = {"errno": errno.EIO}

    def fsync(fd):
        if os.path.isdir(f"/proc/self/fd/{fd}") and os.path.samefile(f"/proc/self/fd/{fd}", store_dir):
            raise OSError(answer["errno"], os.strerror(answer["errno"]))
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(OSError, match="cannot make the entries of .* durable") as info:
        write_shard(path, create, lambda s: s.append(np.stack([image(i) for i in range(4)])))
    assert info.value.errno == errno.EIO
    with DenseStore.open(path, readonly=True) as s:
        assert len(s) == 4
    answer["errno"] = errno.EINVAL
    write_shard(path, create, lambda s: s.append(np.stack([image(i) for i in range(2)])))
    with DenseStore.open(path, readonly=True) as s:
        assert len(s) == 2
