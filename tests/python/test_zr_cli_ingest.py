"""zr ingest on real data: Fashion-MNIST's own IDX files (gzipped and
not), a folder of the machine's copyright files, .npz archives, ragged
tokens; every codec and dictionary tier; --append; the refusals with their
exit statuses; Ctrl-C / SIGKILL during an ingest leaving the committed
records intact; and a folder's STORE.names written like every other file
(never through a link, never over a file) and kept in step with the
store."""

import gzip
import os
import resource
import signal
import subprocess
import time

import numpy as np
import pytest

from loaderx.zrecord import DenseStore, RaggedStore
from zr_cli_helpers import (FAILED, INTERRUPTED, OK, OPEN, USAGE, FASHION, ZR, committed_length,
                            copyright_folder, fashion, interrupt_after, needs_fashion, needs_zr,
                            start_zr, zr, zr_json)

pytestmark = needs_zr


def dense(path):
    return DenseStore.open(str(path), readonly=True)


def ragged(path):
    return RaggedStore.open(str(path), readonly=True)


@needs_fashion
@pytest.mark.parametrize("name", ["train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                                  "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"])
def test_fashion_mnist_idx_gz(tmp_path, name):
    want = fashion(name)
    res, lines = zr_json("ingest", os.path.join(FASHION, name), tmp_path / "st")
    assert res.returncode == OK, res.stderr
    assert lines[0]["records_added"] == len(want) and lines[0]["kind"] == "dense"
    with dense(tmp_path / "st") as st:
        assert st.dtype == np.uint8 and st.item_shape == want.shape[1:]
        np.testing.assert_array_equal(st[:], want)


@needs_fashion
def test_idx_not_gzipped_and_wider_types(tmp_path):
    raw = gzip.open(os.path.join(FASHION, "t10k-labels-idx1-ubyte.gz")).read()
    (tmp_path / "labels.idx").write_bytes(raw)
    assert zr("ingest", tmp_path / "labels.idx", tmp_path / "a", "--codec", "raw").returncode == OK
    with dense(tmp_path / "a") as st:
        np.testing.assert_array_equal(st[:], fashion("t10k-labels-idx1-ubyte.gz"))
    # IDX is big-endian: an int32 and a float64 file, made by hand.
    for code, dt in ((0x0C, ">i4"), (0x0D, ">f4"), (0x0E, ">f8"), (0x0B, ">i2")):
        arr = (np.arange(24) - 7).astype(dt).reshape(4, 3, 2)
        head = bytes([0, 0, code, 3]) + b"".join(d.to_bytes(4, "big") for d in arr.shape)
        (tmp_path / "x.idx").write_bytes(head + arr.tobytes())
        out = tmp_path / f"s{code}"
        assert zr("ingest", tmp_path / "x.idx", out).returncode == OK
        with dense(out) as st:
            assert st.dtype == arr.dtype.newbyteorder("<")
            np.testing.assert_array_equal(st[:], arr)
    # A truncated IDX file: exit 1, naming the file; nothing half-made stays
    # unnoticed (the message says how many records were committed).
    (tmp_path / "short.idx").write_bytes(raw[:1000])
    res = zr("ingest", tmp_path / "short.idx", tmp_path / "short")
    assert res.returncode == FAILED and b"short.idx" in res.stderr


@needs_fashion
@pytest.mark.parametrize("codec,tier", [("raw", None), ("zstd", None), ("zstd_dict", "fast"),
                                        ("zstd_dict", "balanced"), ("zstd_dict", "max")])
def test_every_codec_and_tier(tmp_path, codec, tier):
    images = fashion("t10k-images-idx3-ubyte.gz")[:2000]
    np.save(tmp_path / "src.npy", images)
    args = ["ingest", tmp_path / "src.npy", tmp_path / "st", "--codec", codec]
    assert zr(*args, *(["--tier", tier] if tier else [])).returncode == OK
    with dense(tmp_path / "st") as st:
        assert st.codec == codec
        np.testing.assert_array_equal(st[:], images)
    res, lines = zr_json("info", tmp_path / "st")
    if codec == "zstd_dict":
        sizes = {"fast": 32768, "balanced": 131072, "max": 1 << 20}
        assert 0 < lines[0]["dict_bytes"] <= sizes[tier]
    assert zr("verify", tmp_path / "st").returncode == OK


def test_folder_of_real_files_with_a_dictionary(tmp_path):
    files = copyright_folder(tmp_path / "docs", limit=150, max_size=32768)
    res, lines = zr_json("ingest", tmp_path / "docs", tmp_path / "st", "--codec", "zstd_dict",
                         "--tier", "fast")
    assert res.returncode == OK, res.stderr
    with ragged(tmp_path / "st") as st:
        names = sorted(files)
        assert [st[i].tobytes() for i in range(len(st))] == [files[n] for n in names]


def test_folder_of_real_files(tmp_path):
    files = copyright_folder(tmp_path / "docs")
    (tmp_path / "docs" / "empty").write_bytes(b"")
    os.mkdir(tmp_path / "docs" / "subdir")
    res, lines = zr_json("ingest", tmp_path / "docs", tmp_path / "st")
    assert res.returncode == OK, res.stderr
    names = sorted(files)
    assert lines[0]["records_added"] == len(names) and lines[0]["kind"] == "ragged"
    assert (tmp_path / "st.names").read_text().splitlines() == names
    with ragged(tmp_path / "st") as st:
        assert st.dtype == np.uint8 and len(st) == len(names)
        for i in (0, len(names) // 2, len(names) - 1):
            assert st[i].tobytes() == files[names[i]]
    assert b"skipped 2" in res.stderr
    # Append a second folder: records and names continue.
    more = copyright_folder(tmp_path / "more", limit=3)
    assert zr("ingest", tmp_path / "more", tmp_path / "st", "--append").returncode == OK
    lines = (tmp_path / "st.names").read_text().splitlines()
    assert lines == names + sorted(more)
    with ragged(tmp_path / "st") as st:
        assert st[-1].tobytes() == more[sorted(more)[-1]]
    # An empty folder is refused.
    os.mkdir(tmp_path / "nothing")
    assert zr("ingest", tmp_path / "nothing", tmp_path / "n").returncode == FAILED


def test_npz_one_store_per_array_or_one_chosen(tmp_path):
    a, b = np.arange(12, dtype=">u2").reshape(6, 2), np.ones((3, 2, 2), "c16")
    np.savez(tmp_path / "x.npz", a=a, b=b)
    np.savez_compressed(tmp_path / "c.npz", a=a, b=b)
    res, lines = zr_json("ingest", tmp_path / "x.npz", tmp_path / "all")
    assert res.returncode == OK and [j["store"].rsplit("/", 1)[1] for j in lines] == ["a", "b"]
    with dense(tmp_path / "all" / "a") as st:
        np.testing.assert_array_equal(st[:], a)
    with dense(tmp_path / "all" / "b") as st:
        np.testing.assert_array_equal(st[:], b)
    assert zr("ingest", tmp_path / "c.npz", tmp_path / "one", "--array", "b").returncode == OK
    with dense(tmp_path / "one") as st:
        np.testing.assert_array_equal(st[:], b)
    res = zr("ingest", tmp_path / "c.npz", tmp_path / "z", "--array", "nope")
    assert res.returncode == FAILED and b"nope" in res.stderr
    # A damaged member (stored or deflated) is refused before anything is
    # written: the CRC-32 is checked first.
    for name in ("x.npz", "c.npz"):
        data = bytearray((tmp_path / name).read_bytes())
        at = data.index(b"b.npy") + 60  # inside the member's (compressed) bytes
        data[at] ^= 0xFF
        (tmp_path / f"bad-{name}").write_bytes(bytes(data))
        res = zr("ingest", tmp_path / f"bad-{name}", tmp_path / f"bad-{name}-st", "--array", "b")
        assert res.returncode == FAILED and b"damaged" in res.stderr, res.stderr
        assert not (tmp_path / f"bad-{name}-st").exists()
    # --ragged: one ragged record per row.
    assert zr("ingest", tmp_path / "x.npz", tmp_path / "r", "--array", "a",
              "--ragged").returncode == OK
    with ragged(tmp_path / "r") as st:
        assert len(st) == 6 and st[5].shape == (2,)
        np.testing.assert_array_equal(st[5], a[5])


def test_ragged_tokens_from_lengths_or_offsets(tmp_path):
    rng = np.random.default_rng(7)
    lengths = rng.integers(1, 50, 300)
    flat = rng.integers(0, 50000, lengths.sum()).astype(">u4")
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    np.save(tmp_path / "flat.npy", flat)
    np.save(tmp_path / "len.npy", lengths.astype(np.int32))
    np.save(tmp_path / "off.npy", offsets.astype(">i8"))
    for opt, f in (("--lengths", "len.npy"), ("--offsets", "off.npy")):
        out = tmp_path / f"st{opt}"
        res, lines = zr_json("ingest", tmp_path / "flat.npy", out, opt, tmp_path / f)
        assert res.returncode == OK, res.stderr
        with ragged(out) as st:
            assert len(st) == 300 and st.dtype == np.dtype("<u4")
            for i in (0, 17, 299):
                np.testing.assert_array_equal(st[i], flat[offsets[i]:offsets[i + 1]])
    # Lengths that do not cover the array, and an empty sequence.
    np.save(tmp_path / "bad.npy", lengths[:-1])
    res = zr("ingest", tmp_path / "flat.npy", tmp_path / "b1", "--lengths", tmp_path / "bad.npy")
    assert res.returncode == FAILED and b"cover" in res.stderr
    zero = lengths.copy()
    zero[3], zero[4] = 0, zero[4] + zero[3]
    np.save(tmp_path / "zero.npy", zero)
    res = zr("ingest", tmp_path / "flat.npy", tmp_path / "b2", "--lengths", tmp_path / "zero.npy")
    assert res.returncode == FAILED and b"record 3" in res.stderr
    assert zr("ingest", tmp_path / "flat.npy", tmp_path / "b3", "--lengths", "l.npy",
              "--offsets", "o.npy").returncode == USAGE


def test_append_needs_the_same_identity(tmp_path):
    x = np.arange(40, dtype="<f4").reshape(10, 4)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", x.astype(">f4"))
    np.save(tmp_path / "wrong.npy", x.reshape(5, 8))
    assert zr("ingest", tmp_path / "x.npy", tmp_path / "st").returncode == OK
    res, lines = zr_json("ingest", tmp_path / "y.npy", tmp_path / "st", "--append")
    assert res.returncode == OK and lines[0]["records"] == 20 and lines[0]["appended"]
    with dense(tmp_path / "st") as st:
        np.testing.assert_array_equal(st[:], np.concatenate([x, x]))
    res = zr("ingest", tmp_path / "wrong.npy", tmp_path / "st", "--append")
    assert res.returncode == OPEN and b"(4,)" in res.stderr and b"(8,)" in res.stderr
    res = zr("ingest", tmp_path / "x.npy", tmp_path / "st", "--append", "--codec", "raw")
    assert res.returncode == OPEN and b"codec" in res.stderr
    with dense(tmp_path / "st") as st:
        assert len(st) == 20


def test_usage_errors(tmp_path):
    np.save(tmp_path / "x.npy", np.ones((2, 2)))
    for args in (["ingest", tmp_path / "x.npy"],
                 ["ingest", tmp_path / "x.npy", tmp_path / "a", tmp_path / "b"],
                 ["ingest", tmp_path / "x.npy", tmp_path / "a", "--codec", "lz4"],
                 ["ingest", tmp_path / "x.npy", tmp_path / "a", "--tier", "huge"],
                 ["ingest", tmp_path / "x.npy", tmp_path / "a", "--codec", "zstd", "--tier", "fast"],
                 ["ingest", tmp_path / "x.npy", tmp_path / "a", "--codec"]):
        res = zr(*args)
        assert res.returncode == USAGE, args
    assert not (tmp_path / "a").exists()


def _images(tmp_path):
    """Fashion-MNIST's 10000 test images (random ones without the package)
    as a .npy: at zstd_dict's level 19 an ingest of them takes several
    committed slices of 2 MiB."""
    path = tmp_path / "images.npy"
    if os.path.exists(os.path.join(FASHION, "t10k-images-idx3-ubyte.gz")):
        arr = fashion("t10k-images-idx3-ubyte.gz")
    else:
        arr = np.random.default_rng(3).integers(0, 255, (10000, 28, 28), dtype=np.uint8)
    np.save(path, arr)
    return path, arr


def _committed(store):
    return committed_length(store)


def _start_and_wait_for_a_commit(args, store):
    p = start_zr(args)
    deadline = time.monotonic() + 120
    while _committed(store) == 0 and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    return p


@pytest.mark.parametrize("data", ["images", "random"])
def test_sigint_during_ingest_keeps_committed_records(tmp_path, data):
    src, arr = _images(tmp_path)
    if data == "random":  # incompressible: zstd_dict's slowest case
        arr = np.random.default_rng(5).integers(0, 256, arr.shape, dtype=np.uint8)
        np.save(src, arr)
    out = tmp_path / "st"
    p = _start_and_wait_for_a_commit(["ingest", src, out, "--codec", "zstd_dict", "--tier",
                                      "fast"], out)
    if p.poll() is not None:
        pytest.skip("the ingest finished before it could be interrupted")
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    took = time.monotonic() - t0
    err = err.decode()
    assert p.returncode == INTERRUPTED, err
    assert "interrupted" in err and "committed" in err
    # Appends go in pieces of about 50 ms: Ctrl-C waits for one piece, not
    # the rest of a slice or of the file (a generous bound for a loaded box).
    assert took < 5, took
    with dense(out) as st:
        n = len(st)
        assert 0 < n < len(arr)
        np.testing.assert_array_equal(st[:], arr[:n])
    assert zr("verify", out).returncode == OK
    # The rest can be appended: the store ends up whole.
    np.save(tmp_path / "rest.npy", arr[n:])
    assert zr("ingest", tmp_path / "rest.npy", out, "--append").returncode == OK
    with dense(out) as st:
        np.testing.assert_array_equal(st[:], arr)


def test_sigkill_during_ingest_leaves_a_readable_prefix(tmp_path):
    src, arr = _images(tmp_path)
    out = tmp_path / "st"
    p = _start_and_wait_for_a_commit(["ingest", src, out, "--codec", "zstd_dict", "--tier",
                                      "fast"], out)
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=30)
    with dense(out) as st:
        n = len(st)
        assert n > 0
        np.testing.assert_array_equal(st[:], arr[:n])
    assert zr("verify", out).returncode == OK



@pytest.mark.parametrize("codec", ["raw", "zstd"])
def test_write_failing_mid_slice_keeps_the_pieces_before(tmp_path, codec):
    """A slice is appended in pieces, each committed: when a write fails
    (here the file-size limit, 3 MiB, inside the first 8 MiB slice), the
    pieces before it stay, whole and readable, and zr exits 1 naming the
    file."""
    arr = np.random.default_rng(6).integers(0, 256, (4000, 2048), dtype=np.uint8)
    np.save(tmp_path / "a.npy", arr)
    out = tmp_path / "st"

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (3 << 20, 3 << 20))

    res = subprocess.run([ZR, "ingest", str(tmp_path / "a.npy"), str(out), "--codec", codec],
                         capture_output=True, timeout=300, preexec_fn=limit)
    err = res.stderr.decode()
    assert res.returncode == FAILED, err
    assert "0.chunk" in err and "failed" in err, err
    with dense(out) as st:
        n = len(st)
        assert 0 < n < len(arr)
        np.testing.assert_array_equal(st[:], arr[:n])
    assert zr("verify", out).returncode == OK

# ------------------------------------------------- the folder's names list

def _folder(path, n, size=64, seed=0):
    """n files of `size` random bytes, named f00000..; returns their bytes."""
    os.makedirs(path, exist_ok=True)
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        data = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
        with open(os.path.join(path, "f%05d" % i), "wb") as f:
            f.write(data)
        out.append(data)
    return out


def test_names_list_never_through_a_link_nor_over_a_file(tmp_path):
    _folder(tmp_path / "docs", 5)
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious\n")
    # A planted symbolic link where the list goes: refused, the target
    # untouched, and no store made.
    os.symlink(victim, tmp_path / "st.names")
    res = zr("ingest", tmp_path / "docs", tmp_path / "st")
    assert res.returncode == OPEN and b"st.names" in res.stderr and b"symbolic link" in res.stderr
    assert victim.read_bytes() == b"precious\n" and not (tmp_path / "st").exists()
    # A dangling link likewise: nothing is created at its target.
    os.unlink(tmp_path / "st.names")
    os.symlink(tmp_path / "elsewhere", tmp_path / "st.names")
    assert zr("ingest", tmp_path / "docs", tmp_path / "st").returncode == OPEN
    assert not (tmp_path / "elsewhere").exists() and not (tmp_path / "st").exists()
    # A file already there: refused, kept as it was.
    os.unlink(tmp_path / "st.names")
    (tmp_path / "st.names").write_bytes(b"someone else's list\n")
    res = zr("ingest", tmp_path / "docs", tmp_path / "st")
    assert res.returncode == OPEN and b"already exists" in res.stderr
    assert (tmp_path / "st.names").read_bytes() == b"someone else's list\n"
    assert not (tmp_path / "st").exists()
    # A store that cannot be made leaves no list behind either.
    os.unlink(tmp_path / "st.names")
    (tmp_path / "file").write_bytes(b"x")
    assert zr("ingest", tmp_path / "docs", tmp_path / "file" / "st").returncode == OPEN
    assert sorted(os.listdir(tmp_path)) == ["docs", "file", "victim"]
    # Otherwise the list is made new, one name a line.
    assert zr("ingest", tmp_path / "docs", tmp_path / "st").returncode == OK
    assert (tmp_path / "st.names").read_text().splitlines() == ["f%05d" % i for i in range(5)]


def test_append_goes_on_only_with_the_stores_own_list(tmp_path):
    first = _folder(tmp_path / "a", 4)
    more = _folder(tmp_path / "b", 3, seed=1)
    st, names = tmp_path / "st", tmp_path / "st.names"
    assert zr("ingest", tmp_path / "a", st).returncode == OK
    good = names.read_bytes()
    # The list replaced by a link: refused, nothing appended, target kept.
    names.rename(tmp_path / "saved")
    os.symlink(tmp_path / "saved", names)
    res = zr("ingest", tmp_path / "b", st, "--append")
    assert res.returncode == OPEN and b"symbolic link" in res.stderr
    # The list missing.
    os.unlink(names)
    res = zr("ingest", tmp_path / "b", st, "--append")
    assert res.returncode == OPEN and b"missing" in res.stderr
    # A list that does not name the store's records (one line short, a cut
    # line): refused rather than shifting every later name.
    for bad in (good.split(b"\n", 1)[1], good[:-1]):
        names.write_bytes(bad)
        res = zr("ingest", tmp_path / "b", st, "--append")
        assert res.returncode == FAILED and b"4 records" in res.stderr, res.stderr
        assert names.read_bytes() == bad
    with ragged(st) as s:
        assert len(s) == 4
    # The store's own list: records and names go on together.
    names.write_bytes(good)
    assert zr("ingest", tmp_path / "b", st, "--append").returncode == OK
    assert names.read_text().splitlines() == ["f%05d" % i for i in range(4)] + \
        ["f%05d" % i for i in range(3)]
    with ragged(st) as s:
        assert [s[i].tobytes() for i in range(len(s))] == first + more


def _names_and_records(st):
    lines = (st.parent / (st.name + ".names")).read_bytes().split(b"\n")
    assert lines[-1] == b""  # whole lines only
    with ragged(st) as s:
        return len(lines) - 1, len(s)


def test_names_list_after_ctrl_c_and_kill(tmp_path):
    """A folder ingest stopped by Ctrl-C leaves exactly one name per
    committed record; one killed leaves the list at most one slice behind
    the store, never ahead, and --append then refuses rather than shifting
    names."""
    files = _folder(tmp_path / "docs", 1000, size=16384)
    st = tmp_path / "st"
    args = ["ingest", tmp_path / "docs", st, "--codec", "zstd_dict", "--tier", "fast"]
    p = _start_and_wait_for_a_commit(args, st)
    if p.poll() is not None:
        pytest.skip("the ingest finished before it could be interrupted")
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    assert p.returncode == INTERRUPTED, err
    names, records = _names_and_records(st)
    assert names == records and 0 < records < 1000
    with ragged(st) as s:
        assert [s[i].tobytes() for i in (0, records - 1)] == [files[0], files[records - 1]]

    st2 = tmp_path / "st2"
    p = _start_and_wait_for_a_commit(["ingest", tmp_path / "docs", st2, "--codec", "zstd_dict",
                                      "--tier", "fast"], st2)
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=30)
    names, records = _names_and_records(st2)
    assert names <= records
    os.mkdir(tmp_path / "more")
    (tmp_path / "more" / "z").write_bytes(b"one more")
    res = zr("ingest", tmp_path / "more", st2, "--append")
    if names == records:
        assert res.returncode == OK
    else:
        assert res.returncode == FAILED and b"not this store's list" in res.stderr
        _, after = _names_and_records(st2)
        assert after == records
