"""One convention over every zr command: --help exits 0 with usage,
options and an example; the documented exit statuses (0, 1, 2, 3, 130);
errors on stderr naming the file; --json parseable; progress only on a
terminal (checked through a pseudo-terminal) and never with --quiet; the
man page and bash completion installed with zr."""

import fcntl
import json
import os
import subprocess

import numpy as np
import pytest

from loaderx.zrecord import DenseStore
from zr_cli_helpers import (FAILED, OK, OPEN, USAGE, needs_zr, run_in_pty, zr, zr_json, ZR)

COMMANDS = ["info", "verify", "ingest", "export", "cat", "dump", "stats", "delete", "compact",
            "train-dict", "recode", "version"]
EXIT_TABLE = ["0    success", "1    a check failed or the data is damaged",
              "2    usage error", "3    cannot open, busy, or already exists",
              "4    no such record", "130  interrupted"]

pytestmark = needs_zr


def _store(path, n=50, codec="zstd"):
    with DenseStore.create(str(path), "uint8", (16,), codec=codec) as st:
        st.append((np.arange(n * 16) % 251).astype(np.uint8).reshape(n, 16))
    return str(path)


@pytest.mark.parametrize("cmd", COMMANDS)
def test_every_help_exits_0_with_usage_options_example(cmd):
    for args in ([cmd, "--help"], [cmd, "-h"], ["help", cmd]):
        res = zr(*args)
        assert res.returncode == OK, (args, res.stderr)
        out = res.stdout.decode()
        assert out.startswith(f"usage: zr {cmd}") or cmd == "dump" and "zr dump" in out
        assert "Options:" in out and "Example:" in out
        for row in EXIT_TABLE:
            assert row in out, (cmd, row)
        assert res.stderr == b""
    # --help is never taken for a path or an argument, wherever it stands.
    assert zr(cmd, "no-such-store", "--help").returncode == OK


def test_top_level_help_lists_every_command_and_the_exit_table():
    res = zr("--help")
    assert res.returncode == OK
    out = res.stdout.decode()
    for cmd in COMMANDS + ["mrec"]:
        assert f"zr {cmd}" in out
    for row in EXIT_TABLE:
        assert row in out
    assert zr().returncode == USAGE
    assert zr("no-such-command").returncode == USAGE
    assert zr("help", "no-such-command").returncode == USAGE


@pytest.mark.parametrize("cmd", [c for c in COMMANDS if c != "version"])
def test_unknown_option_and_missing_arguments_are_usage_errors(cmd, tmp_path):
    res = zr(cmd, "--no-such-option", str(tmp_path / "x"), "0")
    assert res.returncode == USAGE
    assert b"--no-such-option" in res.stderr and f"zr {cmd} --help".encode() in res.stderr
    assert zr(cmd).returncode == USAGE


@pytest.mark.parametrize("args", [["info"], ["verify"], ["stats"], ["cat", "0"], ["delete", "0"],
                                  ["compact"], ["export", "-o", "out.npy"],
                                  ["train-dict", "-o", "d"], ["recode", "dst", "--codec", "raw"]])
def test_missing_store_exits_3_naming_it(args, tmp_path):
    missing = str(tmp_path / "missing-store")
    argv = [args[0], missing, *args[1:]]
    argv = [str(tmp_path / a) if a in ("out.npy", "d", "dst") else a for a in argv]
    res = zr(*argv)
    assert res.returncode == OPEN, res.stderr
    err = res.stderr.decode()
    assert err.startswith(f"zr {args[0]}: ") and "missing-store" in err


def test_busy_store_exits_3(tmp_path):
    path = _store(tmp_path / "s")
    readers = (["info", path], ["verify", path], ["stats", path], ["cat", path, "0"],
               ["export", path, "-o", str(tmp_path / "o.npy")])
    writers = (["delete", path, "0"], ["compact", path])
    with DenseStore.open(path):  # a writer: readers work beside it, a second writer is busy
        for args in readers:
            res = zr(*args)
            assert res.returncode == OK, (args, res.stderr)
        os.unlink(tmp_path / "o.npy")
        for args in writers:
            res = zr(*args)
            assert res.returncode == OPEN, (args, res.stderr)
            assert b"busy" in res.stderr.lower()
    # A running delete or compact holds meta.zr exclusively: every open is busy.
    with open(os.path.join(path, "meta.zr"), "rb") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        for args in readers + writers:
            res = zr(*args)
            assert res.returncode == OPEN, (args, res.stderr)
            assert b"busy" in res.stderr.lower()
    assert not (tmp_path / "o.npy").exists()
    assert zr("verify", path).returncode == OK


def test_exists_exits_3(tmp_path):
    path = _store(tmp_path / "s")
    np.save(tmp_path / "a.npy", np.zeros((2, 16), np.uint8))
    assert zr("ingest", tmp_path / "a.npy", path).returncode == OPEN
    (tmp_path / "o.npy").write_bytes(b"x")
    res = zr("export", path, "-o", tmp_path / "o.npy")
    assert res.returncode == OPEN and b"o.npy" in res.stderr
    assert (tmp_path / "o.npy").read_bytes() == b"x"
    res = zr("recode", path, path, "--codec", "raw")
    assert res.returncode == OPEN and b"--resume" in res.stderr


def test_damaged_data_exits_1(tmp_path):
    path = _store(tmp_path / "s")
    with open(os.path.join(path, "0.chunk"), "r+b") as f:
        f.seek(20)
        f.write(b"\xff\xff\xff\xff")
    res, lines = zr_json("verify", path)
    assert res.returncode == FAILED
    assert lines[0]["bad"] >= 1 and not lines[0]["ok"]
    assert lines[0]["bad_records"][0]["index"] >= 0


def test_json_on_every_reporting_command(tmp_path):
    path = _store(tmp_path / "s")
    np.save(tmp_path / "a.npy", np.ones((3, 16), np.uint8))
    big = tmp_path / "big"
    with DenseStore.create(str(big), "uint8", (64,)) as st:
        st.append(np.random.default_rng(1).integers(0, 8, (4000, 64), dtype=np.uint8))
    checks = [
        (["version"], lambda j: set(j) == {"zrengine", "zrstore", "zsampler", "zloader", "zmrec",
                                           "zrerror"}),
        (["info", path], lambda j: j["records"] == 50 and j["codec"] == "zstd"),
        (["verify", path], lambda j: j["ok"] and j["records"] == 50),
        (["stats", path], lambda j: j["values"]["count"] == 800),
        (["cat", path, "1"], lambda j: j["index"] == 1 and len(j["values"]) == 16),
        (["ingest", tmp_path / "a.npy", tmp_path / "t"], lambda j: j["records_added"] == 3),
        (["export", path, "-o", tmp_path / "e.npy"], lambda j: j["records"] == 50),
        (["train-dict", big, "--tier", "fast", "-o", tmp_path / "d"],
         lambda j: j["dict_bytes"] > 0),
        (["recode", path, tmp_path / "r", "--codec", "raw"], lambda j: j["records"] == 50),
        (["delete", tmp_path / "r", "0"], lambda j: j["deleted"] == 1 and j["records"] == 49),
        (["compact", tmp_path / "r"], lambda j: j["records"] == 49),
    ]
    for args, ok in checks:
        res, lines = zr_json(*args)
        assert res.returncode == OK, (args, res.stderr)
        assert len(lines) == 1 and ok(lines[0]), (args, lines)


def test_json_one_object_per_store_per_line(tmp_path):
    a, b = _store(tmp_path / "a"), _store(tmp_path / "b", n=7)
    res, lines = zr_json("info", a, b)
    assert res.returncode == OK
    assert [j["records"] for j in lines] == [50, 7]


def test_progress_only_on_a_terminal(tmp_path):
    path = _store(tmp_path / "s", n=20000)
    # Not a terminal: no progress line, no carriage return.
    res = zr("verify", path)
    assert res.returncode == OK and b"\r" not in res.stderr and res.stderr == b""
    # On a pseudo-terminal: a progress line with a rate and an ETA.
    status, out = run_in_pty(["verify", path])
    assert status == OK
    assert b"\r" in out and b"records" in out and b"/s" in out and b"ETA" in out, out
    # --quiet silences it on a terminal too.
    status, out = run_in_pty(["verify", "--quiet", path])
    assert status == OK and b"ETA" not in out and b"\r\x1b[K" not in out


def test_man_page_and_bash_completion_are_installed():
    # Installed with zr under a prefix (scripts/test.sh: $PREFIX); the pip
    # install's zr is a console script, so its own location says nothing.
    prefixes = [os.environ.get("PREFIX", ""), os.path.dirname(os.path.dirname(os.path.realpath(ZR)))]
    prefix = next((q for q in prefixes if q and os.path.isfile(os.path.join(q, "share", "man", "man1", "zr.1"))),
                  prefixes[-1])
    man = os.path.join(prefix, "share", "man", "man1", "zr.1")
    assert os.path.isfile(man)
    text = open(man).read()
    assert ".SH EXIT STATUS" in text
    for cmd in COMMANDS:
        assert cmd.replace("-", "\\-") in text, cmd
    comp = os.path.join(prefix, "share", "bash-completion", "completions", "zr")
    assert os.path.isfile(comp)
    script = (f". {comp}; COMP_WORDS=(zr ingest --codec zs); COMP_CWORD=3; _zr; "
              "echo ${COMPREPLY[@]}; COMP_WORDS=(zr tr); COMP_CWORD=1; _zr; echo ${COMPREPLY[@]}")
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30)
    assert out.stdout.split("\n")[:2] == ["zstd zstd_dict", "train-dict"], out


def test_version_lists_native_libraries():
    res = zr("version")
    assert res.returncode == OK
    names = [line.split()[0] for line in res.stdout.decode().splitlines()]
    assert names == ["libzrengine", "libzrstore", "libzsampler", "libzloader", "libzmrec",
                     "libzrerror"]
    assert json.loads(zr("version", "--json").stdout)["zrstore"].count(".") == 2


@pytest.mark.parametrize("cmd", ["ingest", "export", "recode", "stats"])
def test_progress_of_long_commands_on_a_terminal(tmp_path, cmd):
    # About 40 MiB: several slices, so the line is drawn before the end.
    arr = np.random.default_rng(2).integers(0, 4, (10000, 4096), dtype=np.uint8)
    np.save(tmp_path / "a.npy", arr)
    src = tmp_path / "src"
    assert zr("ingest", tmp_path / "a.npy", src, "--codec", "raw").returncode == OK
    args = {"ingest": ["ingest", tmp_path / "a.npy", tmp_path / "o", "--codec", "raw"],
            "export": ["export", src, "-o", tmp_path / "o.npy"],
            "recode": ["recode", src, tmp_path / "o", "--codec", "raw"],
            "stats": ["stats", src]}[cmd]
    status, out = run_in_pty(args)
    assert status == OK, out
    assert b"records (" in out and b"/s" in out and b"ETA" in out, out
    # Not a terminal: the same command prints no progress.
    for p in (tmp_path / "o", tmp_path / "o.npy"):
        subprocess.run(["rm", "-rf", str(p)], check=True)
    res = zr(*args)
    assert res.returncode == OK and b"ETA" not in res.stderr and b"\r" not in res.stderr
