"""zr info (stored size and ratio against du), verify, export, cat, stats,
delete, compact, train-dict and recode on real data, with their exit
statuses, and interrupt / crash tests for the commands that write."""

import os
import signal
import subprocess
import time

import numpy as np
import pytest

from loaderx.zrecord import DenseStore, RaggedStore
from zr_cli_helpers import (FAILED, INTERRUPTED, NOT_FOUND, OK, OPEN, USAGE, FASHION,
                            committed_length, copyright_folder, fashion, needs_zr, start_zr, zr,
                            zr_json)

pytestmark = needs_zr


def _fashion_or_random():
    if os.path.exists(os.path.join(FASHION, "t10k-images-idx3-ubyte.gz")):
        return fashion("t10k-images-idx3-ubyte.gz")
    return np.random.default_rng(5).integers(0, 255, (10000, 28, 28), dtype=np.uint8)


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    """A zstd store of Fashion-MNIST's 10000 test images, and the array."""
    d = tmp_path_factory.mktemp("images")
    arr = _fashion_or_random()
    np.save(d / "x.npy", arr)
    assert zr("ingest", d / "x.npy", d / "st").returncode == OK
    return str(d / "st"), arr


@pytest.fixture(scope="module")
def docs(tmp_path_factory):
    """A ragged store of 200 of the machine's copyright files, and their bytes."""
    d = tmp_path_factory.mktemp("docs")
    files = copyright_folder(d / "files", limit=200, max_size=16384)
    assert zr("ingest", d / "files", d / "st").returncode == OK
    return str(d / "st"), [files[n] for n in sorted(files)]


def _copy(src, dst, codec="zstd"):
    assert zr("recode", src, dst, "--codec", codec).returncode == OK
    return str(dst)


def _du_apparent(path):
    """`du --apparent-size -b` of the store's files (without the directory)."""
    return sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))


# ---------------------------------------------------------------- info

@pytest.mark.parametrize("which", ["images", "docs"])
def test_info_stored_size_and_ratio_match_du(request, which):
    path, _ = request.getfixturevalue(which)
    res, (j,) = zr_json("info", path)
    assert res.returncode == OK
    assert j["stored_bytes"] == _du_apparent(path)
    du = int(subprocess.run(["du", "-sb", "--apparent-size", path], capture_output=True,
                            text=True).stdout.split()[0])
    assert 0 <= du - j["stored_bytes"] <= 4096  # du also counts the directory entry
    assert j["table_bytes"] == 16 * j["records"]
    assert j["stored_bytes"] == (j["chunk_bytes"] + j["table_bytes"] + j["dict_bytes"]
                                 + j["meta_bytes"])
    assert abs(j["ratio"] - j["logical_bytes"] / j["stored_bytes"]) < 1e-9
    assert j["chunk_files"] >= 1 and j["journal_pending"] is False
    text = zr("info", path).stdout.decode()
    assert f"ratio:       {j['ratio']:.2f}x" in text and "record table" in text


def test_info_dictionary_counts_and_reclaimable(tmp_path, docs):
    path, _ = docs
    d = _copy(path, tmp_path / "d", "zstd_dict")
    res, (j,) = zr_json("info", d)
    assert j["dict_bytes"] == os.path.getsize(os.path.join(d, "dict.zr")) > 0
    assert j["stored_bytes"] == _du_apparent(d)
    assert zr("delete", d, "0:10").returncode == OK
    res, (k,) = zr_json("info", d)
    assert k["records"] == j["records"] - 10 and k["reclaimable_bytes"] > 0


def test_info_says_when_the_codec_makes_a_store_larger_than_raw(tmp_path):
    """Small records under zstd: an int64 label takes a whole frame."""
    labels = np.random.default_rng(0).integers(0, 10, 2000).astype("<i8")
    images = np.zeros((200, 1024), np.uint8)
    for name, codec, arr in (("labels-zstd", "zstd", labels), ("labels-raw", "raw", labels),
                             ("images-zstd", "zstd", images)):
        with DenseStore.create(str(tmp_path / name), arr.dtype, arr.shape[1:], codec=codec) as st:
            st.append(arr)
    res, (j,) = zr_json("info", tmp_path / "labels-zstd")
    assert res.returncode == OK and j["larger_than_raw"] is True
    assert j["record_bytes"] + j["dict_bytes"] > j["logical_bytes"] == 2000 * 8
    text = zr("info", tmp_path / "labels-zstd").stdout.decode()
    assert "larger than raw" in text and "--codec raw" in text
    for name in ("labels-raw", "images-zstd"):
        res, (j,) = zr_json("info", tmp_path / name)
        assert res.returncode == OK and j["larger_than_raw"] is False, name
        assert "larger than raw" not in zr("info", tmp_path / name).stdout.decode()


# -------------------------------------------------------------- verify

def test_verify_real_stores(images, docs):
    for path, n in ((images[0], len(images[1])), (docs[0], len(docs[1]))):
        res, (j,) = zr_json("verify", path)
        assert res.returncode == OK and j["records"] == n and j["bad"] == 0 and j["checksummed"]


# -------------------------------------------------------------- export

def test_export_dense_npy(tmp_path, images):
    path, arr = images
    res, (j,) = zr_json("export", path, "-o", tmp_path / "x.npy")
    assert res.returncode == OK and j["format"] == "npy"
    np.testing.assert_array_equal(np.load(tmp_path / "x.npy"), arr)
    assert zr("export", path, "-o", tmp_path / "x.npy").returncode == OPEN
    assert zr("export", path, "-o", tmp_path / "x.npy", "--force").returncode == OK
    res = zr("export", path, "-o", tmp_path / "no-such-dir" / "x.npy")
    assert res.returncode == OPEN and b"no-such-dir" in res.stderr


def test_export_ragged_npz_and_back(tmp_path, docs):
    path, files = docs
    assert zr("export", path, "-o", tmp_path / "d.npz").returncode == OK
    z = np.load(tmp_path / "d.npz")
    data, offsets, shapes = z["data"], z["offsets"], z["shapes"]
    assert len(offsets) == len(files) + 1 and shapes.shape == (len(files), 1)
    for i in (0, 5, len(files) - 1):
        assert data[offsets[i]:offsets[i + 1]].tobytes() == files[i]
        assert shapes[i, 0] == len(files[i])
    # Ragged records of several ndims (and scalars) keep their shapes.
    rec = [np.arange(6, dtype="<i2").reshape(2, 3), np.int16(7), np.arange(4, dtype="<i2")]
    with RaggedStore.create(str(tmp_path / "r"), "int16") as st:
        st.append(rec)
    assert zr("export", tmp_path / "r", "-o", tmp_path / "r.npz").returncode == OK
    z = np.load(tmp_path / "r.npz")
    assert z["shapes"].tolist() == [[2, 3], [-1, -1], [4, -1]]
    assert z["offsets"].tolist() == [0, 6, 7, 11]
    np.testing.assert_array_equal(z["data"], np.concatenate([r.reshape(-1) for r in rec]))
    # zr ingest takes the .npz back: the same records with the same shapes.
    for npz, want in ((tmp_path / "r.npz", rec), (tmp_path / "d.npz", None)):
        back = tmp_path / f"back-{npz.stem}"
        res, (j,) = zr_json("ingest", npz, back)
        assert res.returncode == OK and j["kind"] == "ragged", res.stderr
        with RaggedStore.open(str(back), readonly=True) as st:
            if want is None:
                assert [st[i].tobytes() for i in (0, len(files) - 1)] == [files[0], files[-1]]
            else:
                got = [st[i] for i in range(len(st))]
                assert [g.shape for g in got] == [w.shape for w in want]
                for g, w in zip(got, want):
                    np.testing.assert_array_equal(g, w)
    # A damaged shapes table is refused, naming the record.
    bad = dict(np.load(tmp_path / "r.npz"))
    bad["shapes"] = bad["shapes"].copy()
    bad["shapes"][2, 0] = 5
    np.savez(tmp_path / "bad.npz", **bad)
    res = zr("ingest", tmp_path / "bad.npz", tmp_path / "bad")
    assert res.returncode == FAILED and b"record 2" in res.stderr


def test_export_interrupted_removes_the_partial_file(tmp_path, images):
    path, arr = images
    big = _copy(path, tmp_path / "big", "zstd")
    for _ in range(3):  # 40000 records
        np.save(tmp_path / "x.npy", arr)
        assert zr("ingest", tmp_path / "x.npy", big, "--append").returncode == OK
    out = tmp_path / "out.npy"
    p = start_zr(["export", big, "-o", str(out)])
    while not out.exists() and p.poll() is None:
        time.sleep(0.005)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    if p.returncode == OK:
        pytest.skip("the export finished before the signal")
    assert p.returncode == INTERRUPTED, err
    assert not out.exists()


# ----------------------------------------------------------------- cat

def test_cat_prints_like_numpy(tmp_path):
    a = np.arange(2000, dtype=np.int64)
    b = (np.arange(12, dtype=np.uint8) * 7).reshape(3, 4)
    with RaggedStore.create(str(tmp_path / "r"), "int64") as st:
        st.append([a, np.arange(12, dtype=np.int64).reshape(3, 4)])
    out = zr("cat", tmp_path / "r", "0").stdout.decode().split("\n", 1)
    assert out[0] == "record 0: shape (2000,), dtype int64"
    assert out[1].rstrip("\n") == str(a)
    out = zr("cat", tmp_path / "r", "-1").stdout.decode().split("\n", 1)
    assert out[1].rstrip("\n") == str(np.arange(12).reshape(3, 4))
    with DenseStore.create(str(tmp_path / "d"), "uint8", (3, 4)) as st:
        st.append(b[None])
    assert zr("cat", tmp_path / "d", "0").stdout.decode().split("\n", 1)[1].rstrip() == str(b)
    big = np.arange(40 * 40, dtype=np.uint8).reshape(40, 40)
    with DenseStore.create(str(tmp_path / "big"), "uint8", (40, 40)) as st:
        st.append(big[None])
    assert zr("cat", tmp_path / "big", "0").stdout.decode().split("\n", 1)[1].rstrip() == str(big)


def test_cat_real_records_raw_json_and_ranges(docs, images):
    path, files = docs
    res = zr("cat", "--raw", path, "3")
    assert res.returncode == OK and res.stdout == files[3]
    assert zr("cat", "--raw", path, "0:3").stdout == b"".join(files[:3])
    ipath, arr = images
    res, lines = zr_json("cat", ipath, "-2", "5")
    assert [j["index"] for j in lines] == [len(arr) - 2, 5]
    np.testing.assert_array_equal(np.array(lines[1]["values"], np.uint8), arr[5])
    res = zr("cat", ipath, str(len(arr)))
    assert res.returncode == NOT_FOUND and b"out of range" in res.stderr and res.stdout == b""
    assert zr("cat", ipath, "x").returncode == USAGE
    text = zr("cat", ipath, "0").stdout.decode()
    assert text.startswith("record 0: shape (28, 28), dtype uint8\n[[")
    assert zr("dump", ipath, "0").stdout.decode() == text


# --------------------------------------------------------------- stats

def test_stats_values_match_numpy(images, docs):
    path, arr = images
    res, (j,) = zr_json("stats", path)
    v = j["values"]
    assert v["count"] == arr.size and v["min"] == arr.min() and v["max"] == arr.max()
    assert abs(v["mean"] - arr.mean()) < 1e-6 and abs(v["std"] - arr.std()) < 1e-6
    assert v["zeros"] == int((arr == 0).sum())
    dpath, files = docs
    res, (j,) = zr_json("stats", dpath)
    assert j["shapes"]["elements_max"] == max(map(len, files))
    assert j["shapes"]["elements_min"] == min(map(len, files))
    res, (j,) = zr_json("stats", "--sizes", dpath)
    assert "values" not in j and j["record_bytes"]["total"] == sum(len(f) + 16 for f in files)


# ------------------------------------------------------ delete, compact

def test_delete_indices_and_mask_swap_last(tmp_path, images):
    path, arr = images
    s = _copy(path, tmp_path / "s", "raw")
    res, (j,) = zr_json("delete", s, "0", "-1", "100:103")
    assert res.returncode == OK and j["deleted"] == 5
    expect = list(range(len(arr)))
    for i in sorted({0, len(arr) - 1, 100, 101, 102}, reverse=True):
        expect[i] = expect[-1]
        expect.pop()
    with DenseStore.open(s, readonly=True) as st:
        np.testing.assert_array_equal(st[:], arr[expect])
    mask = np.zeros(len(expect), bool)
    mask[::2] = True
    np.save(tmp_path / "m.npy", mask)
    res, (j,) = zr_json("delete", s, "--mask", tmp_path / "m.npy")
    assert res.returncode == OK and j["records"] == len(expect) - mask.sum()
    assert zr("delete", s, "--mask", tmp_path / "m.npy").returncode == USAGE  # wrong length
    assert zr("delete", s, "99999999").returncode == NOT_FOUND
    with DenseStore.open(s, readonly=True) as st:
        assert len(st) == j["records"]


def test_compact_reclaims_and_keeps_contents(tmp_path, images):
    path, arr = images
    s = _copy(path, tmp_path / "s")
    assert zr("delete", s, "0:5000").returncode == OK
    with DenseStore.open(s, readonly=True) as st:
        before = st[:]
    _, (i0,) = zr_json("info", s)
    res, (j,) = zr_json("compact", s)
    assert res.returncode == OK and j["reclaimed_bytes"] == i0["reclaimable_bytes"] > 0
    _, (i1,) = zr_json("info", s)
    assert i1["reclaimable_bytes"] == 0 and i1["stored_bytes"] == _du_apparent(s)
    with DenseStore.open(s, readonly=True) as st:
        np.testing.assert_array_equal(st[:], before)
    assert zr("verify", s).returncode == OK


@pytest.mark.parametrize("delay", [0.02, 0.08, 0.2])
def test_compact_killed_midway_keeps_contents(tmp_path, images, delay):
    path, arr = images
    s = _copy(path, tmp_path / "s", "raw")
    for _ in range(3):
        np.save(tmp_path / "x.npy", arr)
        assert zr("ingest", tmp_path / "x.npy", s, "--append").returncode == OK
    mask = np.zeros(4 * len(arr), bool)
    mask[::3] = True
    np.save(tmp_path / "m.npy", mask)
    assert zr("delete", s, "--mask", tmp_path / "m.npy").returncode == OK
    with DenseStore.open(s, readonly=True) as st:
        before = st[:]
    for sig in (signal.SIGINT, signal.SIGKILL):
        p = start_zr(["compact", s])
        time.sleep(delay)
        p.send_signal(sig)
        _, err = p.communicate(timeout=60)
        if sig == signal.SIGINT:
            # Ctrl-C: the engine stops after the batch in flight (or the
            # compact had already finished).
            assert p.returncode in (OK, INTERRUPTED), err
            assert p.returncode == OK or b"every record is intact" in err, err
        res = zr("verify", s)
        if res.returncode == OPEN:
            # Killed with its journal pending: readers refuse until a
            # writable open (here the store API's) replays it.
            assert b"recover" in res.stderr, res.stderr
            DenseStore.open(s).close()
            res = zr("verify", s)
        assert res.returncode == OK, res.stderr
        with DenseStore.open(s, readonly=True) as st:
            np.testing.assert_array_equal(st[:], before)
    assert zr("compact", s).returncode == OK
    _, (j,) = zr_json("info", s)
    assert j["reclaimable_bytes"] == 0
    with DenseStore.open(s, readonly=True) as st:
        np.testing.assert_array_equal(st[:], before)


# ---------------------------------------------------------- train-dict

def test_train_dict_tiers_and_use(tmp_path, docs):
    path, files = docs
    for tier, cap in (("fast", 32768), ("balanced", 131072)):
        res, (j,) = zr_json("train-dict", path, "--tier", tier, "-o", tmp_path / f"{tier}.dict")
        assert res.returncode == OK and 0 < j["dict_bytes"] <= cap
        data = (tmp_path / f"{tier}.dict").read_bytes()
        assert len(data) == j["dict_bytes"] and data[:4] == bytes.fromhex("37a430ec")
    assert zr("train-dict", path, "-o", tmp_path / "fast.dict").returncode == OPEN
    assert zr("train-dict", path, "--tier", "huge", "-o", tmp_path / "x").returncode == USAGE
    assert zr("recode", path, tmp_path / "r", "--codec", "zstd_dict", "--dict",
              tmp_path / "fast.dict").returncode == OK
    assert (tmp_path / "r" / "dict.zr").read_bytes() == (tmp_path / "fast.dict").read_bytes()
    with RaggedStore.open(str(tmp_path / "r"), readonly=True) as st:
        assert st[7].tobytes() == files[7]


# -------------------------------------------------------------- recode

@pytest.mark.parametrize("chain", [["raw", "zstd_dict", "zstd"], ["zstd_dict", "raw"]])
def test_recode_round_trips(tmp_path, images, docs, chain):
    few = images[1][:2000]
    np.save(tmp_path / "few.npy", few)
    assert zr("ingest", tmp_path / "few.npy", tmp_path / "images").returncode == OK
    for path, check in ((str(tmp_path / "images"),
                         lambda st: np.testing.assert_array_equal(st[:], few)),
                        (docs[0], lambda st: [st[i].tobytes() for i in (0, 9)] ==
                         [docs[1][0], docs[1][9]] or pytest.fail("ragged contents"))):
        src = path
        for k, codec in enumerate(chain):
            dst = tmp_path / f"{k}-{codec}-{'images' if 'images' in path else 'docs'}"
            res, (j,) = zr_json("recode", src, dst, "--codec", codec)
            assert res.returncode == OK and j["codec"] == codec, res.stderr
            src = str(dst)
            with (DenseStore if "images" in path else RaggedStore).open(src, readonly=True) as st:
                assert st.codec == codec
                check(st)


def test_recode_usage_errors(tmp_path, images):
    path, _ = images
    assert zr("recode", path, tmp_path / "x").returncode == USAGE  # no --codec
    assert zr("recode", path, tmp_path / "x", "--codec", "zstd", "--tier", "fast").returncode == USAGE
    assert zr("recode", path, tmp_path / "x", "--codec", "nope").returncode == USAGE
    assert not (tmp_path / "x").exists()


def test_recode_interrupted_then_resumed(tmp_path, images):
    path, arr = images
    dst = tmp_path / "d"
    p = start_zr(["recode", path, str(dst), "--codec", "zstd_dict", "--tier", "fast"])
    meta = dst / "meta.zr"
    deadline = time.monotonic() + 120
    while p.poll() is None and time.monotonic() < deadline:
        if meta.exists() and committed_length(str(dst)) > 0:
            break
        time.sleep(0.02)
    if p.poll() is not None:
        pytest.skip("the recode finished before it could be interrupted")
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    assert p.returncode == INTERRUPTED, err
    assert b"--resume" in err
    with DenseStore.open(str(dst), readonly=True) as st:
        n = len(st)
        assert 0 < n < len(arr)
        np.testing.assert_array_equal(st[:], arr[:n])
    res, (j,) = zr_json("recode", path, dst, "--codec", "zstd_dict", "--resume")
    assert res.returncode == OK and j["records"] == len(arr) and j["records_copied"] == len(arr) - n
    with DenseStore.open(str(dst), readonly=True) as st:
        np.testing.assert_array_equal(st[:], arr)


def test_recover_keeps_what_reached_the_disk(tmp_path):
    """A power loss kept the header (15 records) but only 12 table entries:
    every command refuses the store and names `zr recover`, which keeps the
    12 records that reached the disk; the store then opens and appends."""
    p = str(tmp_path / "s")
    data = np.arange(30, dtype="<f4").reshape(15, 2)
    with DenseStore.create(p, "<f4", (2,)) as s:
        s.append(data[:10])
        s.sync()
        s.append(data[10:])
    with open(os.path.join(p, "0.loc"), "r+b") as f:
        f.truncate(12 * 16)
    res = zr("info", p)
    assert res.returncode == OPEN and f"zr recover {p}".encode() in res.stderr, res.stderr
    res, (j,) = zr_json("recover", p)
    assert res.returncode == OK and j == {"store": p, "records": 12}
    assert zr("verify", p).returncode == OK
    with DenseStore.open(p) as s:
        np.testing.assert_array_equal(s[np.arange(12)], data[:12])
        s.append(data[12:])
    res = zr("recover", p)  # nothing to recover: unchanged
    assert res.returncode == OK and b"15 records" in res.stdout
    with DenseStore.open(p, readonly=True) as s:
        np.testing.assert_array_equal(s[np.arange(15)], data)
    assert zr("recover").returncode == USAGE
    assert zr("recover", tmp_path / "missing").returncode == OPEN
