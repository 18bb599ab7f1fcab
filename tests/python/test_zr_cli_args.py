"""zr's one argument parser and one exit map, as a user meets them: unknown
options, missing and repeated values, negative indices, `--`, the help
that wins over every mistake, the statuses of --help, zr(1) and the
commands themselves (4 for a record that is not there, 3 for a store that
cannot be created), a --help complete without the man page, and bash
completion offering exactly what each command's --help lists."""

import json
import os
import re
import subprocess

import numpy as np
import pytest

from loaderx.zrecord import DenseStore
from zr_cli_helpers import (FAILED, NOT_FOUND, OK, OPEN, USAGE, ZR, needs_zr, zr, zr_json)

pytestmark = needs_zr

COMMANDS = ["info", "verify", "ingest", "export", "cat", "dump", "stats", "delete", "compact",
            "push", "recover", "train-dict", "recode", "version"]


def _store(path, n=10):
    with DenseStore.create(str(path), "<i4", (3,), codec="raw") as st:
        st.append(np.arange(n * 3, dtype="<i4").reshape(n, 3))
    return str(path)


def _usage_error(res, cmd, *words):
    err = res.stderr.decode()
    assert res.returncode == USAGE, (res.returncode, err)
    assert err.startswith(f"zr {cmd}: "), err
    assert f"usage: zr {cmd.split()[0]}" in err and f"Try 'zr {cmd} --help'." in err, err
    for w in words:
        assert w in err, (w, err)
    assert res.stdout == b""


# ---------------------------------------------------------------- parser

def test_unknown_option_is_named(tmp_path):
    s = _store(tmp_path / "s")
    _usage_error(zr("cat", s, "0", "--frobnicate"), "cat", "unknown option '--frobnicate'")
    _usage_error(zr("info", "-x", s), "info", "unknown option '-x'")
    # A negative number is an INDEX only where the command takes one.
    _usage_error(zr("info", "-1"), "info", "unknown option '-1'")
    _usage_error(zr("mrec", "info", "--bogus", "f"), "mrec info", "unknown option '--bogus'")


def test_missing_value_and_missing_arguments(tmp_path):
    s = _store(tmp_path / "s")
    _usage_error(zr("export", s, "-o"), "export", "-o needs a value (FILE)")
    _usage_error(zr("ingest", "a.npy", "st", "--codec"), "ingest", "--codec needs a value")
    # "--" is never taken as a value: it ends the options.
    _usage_error(zr("export", s, "--output", "--", "x"), "export", "--output needs a value")
    _usage_error(zr("cat", s), "cat", "missing INDEX")
    _usage_error(zr("cat"), "cat", "missing STORE")
    _usage_error(zr("recode", s), "recode", "missing DST")
    _usage_error(zr("compact", s, s), "compact", "too many arguments: '%s'" % s)
    _usage_error(zr("mrec", "dump", "f"), "mrec dump", "missing RECORD")
    _usage_error(zr("export", s), "export", "missing -o FILE")


def test_values_by_equals_and_flags_refuse_one(tmp_path):
    s = _store(tmp_path / "s")
    res, (j,) = zr_json("export", s, f"--output={tmp_path / 'x.npy'}")
    assert res.returncode == OK and j["records"] == 10
    np.testing.assert_array_equal(np.load(tmp_path / "x.npy")[:, 0], np.arange(0, 30, 3))
    _usage_error(zr("info", "--json=yes", s), "info", "--json takes no value")


def test_repeated_options(tmp_path):
    s = _store(tmp_path / "s")
    # A flag twice is the flag once.
    res = zr("info", "--json", s, "--json")
    assert res.returncode == OK and len(res.stdout.splitlines()) == 1
    assert json.loads(res.stdout)["records"] == 10
    # A value twice is refused, naming both, and nothing is written.
    _usage_error(zr("export", s, "-o", tmp_path / "a.npy", "--output", tmp_path / "b.npy"),
                 "export", "-o/--output given twice", "a.npy", "b.npy")
    _usage_error(zr("recode", s, tmp_path / "r", "--codec", "raw", "--codec", "zstd"),
                 "recode", "--codec given twice")
    assert not any(p.exists() for p in (tmp_path / "a.npy", tmp_path / "b.npy", tmp_path / "r"))


def test_negative_indices(tmp_path):
    s = _store(tmp_path / "s")
    res, lines = zr_json("cat", s, "-1", "-3:-1", "0")
    assert res.returncode == OK
    assert [j["index"] for j in lines] == [9, 7, 8, 0]
    assert lines[0]["values"] == [27, 28, 29]
    # Options after a negative index still count.
    res = zr("cat", s, "-2", "--raw")
    assert res.returncode == OK and np.frombuffer(res.stdout, "<i4").tolist() == [24, 25, 26]
    res, (j,) = zr_json("delete", s, "-1", "-2")
    assert res.returncode == OK and j["deleted"] == 2 and j["records"] == 8
    with DenseStore.open(s, readonly=True) as st:
        assert st[-1].tolist() == [21, 22, 23]
    # mrec's RECORD is a number from 0: "-1" is an argument, and refused.
    res = zr("mrec", "dump", tmp_path / "x.mrec.lmdb", "-1")
    assert res.returncode == USAGE and b"RECORD '-1' is not a number" in res.stderr


def test_double_dash(tmp_path):
    odd = tmp_path / "-s"
    _store(odd)
    os.chdir(tmp_path)
    # Without "--" a name starting with "-" is an option; after it, a STORE.
    _usage_error(zr("info", "-s"), "info", "unknown option '-s'")
    res = zr("info", "--json", "--", "-s")
    assert res.returncode == OK and json.loads(res.stdout)["store"] == "-s"
    res = zr("cat", "--json", "--", "-s", "-1")
    assert res.returncode == OK and json.loads(res.stdout)["index"] == 9
    # ... so "--json" after it is a STORE too (and there is none).
    res = zr("info", "--", "-s", "--json")
    assert res.returncode == OPEN and b"--json" in res.stderr
    # After "--", "--json" is an INDEX like any other word (and not one).
    _usage_error(zr("cat", "--", "-s", "--json"), "cat", "INDEX '--json' is not an integer")
    # And "--help" after "--" is an argument, not a request for help.
    res = zr("info", "--", "--help")
    assert res.returncode == OPEN and b"--help" in res.stderr


def test_help_wins_over_mistakes(tmp_path):
    for args in (["export", "--bogus", "--help"], ["cat", "-h", "a", "b", "c", "--raw", "--json"],
                 ["recode", "--codec", "raw", "--codec", "zstd", "-h"], ["export", "-o", "--help"],
                 ["mrec", "dump", "--help", "-1"]):
        res = zr(*args)
        assert res.returncode == OK, (args, res.stderr)
        assert res.stdout.startswith(b"usage: zr ") and res.stderr == b""


# ------------------------------------------------------------ exit map

def _exit_rows(text):
    """The status numbers of an "Exit status:" block."""
    block = text.split("Exit status:\n", 1)[1]
    return [int(m.group(1)) for m in re.finditer(r"^  (\d+) +\S", block, re.M)]


def test_one_exit_table_everywhere():
    top = zr("--help").stdout.decode()
    assert _exit_rows(top) == [0, 1, 2, 3, 4, 130]
    table = top.split("Exit status:\n", 1)[1].split("\nWith several", 1)[0]
    for cmd in COMMANDS + ["mrec"]:
        out = zr(cmd, "--help").stdout.decode()
        assert "Exit status:\n" + table in out, cmd
    man = open(os.path.join(os.path.dirname(__file__), "..", "..", "tools", "zr", "zr.1")).read()
    section = man.split(".SH EXIT STATUS", 1)[1].split(".SH ", 1)[0]
    assert [int(n) for n in re.findall(r"^\.B (\d+)$", section, re.M)] == [0, 1, 2, 3, 4, 130]


def test_no_such_record_exits_4(tmp_path):
    s = _store(tmp_path / "s")
    for args in (["cat", s, "999999"], ["dump", s, "-11"], ["cat", "--raw", s, "10"]):
        res = zr(*args)
        assert res.returncode == NOT_FOUND, (args, res.stderr)
        assert b"out of range for 10 records" in res.stderr and res.stdout == b""
    # Slices clip, as python's do: an empty range is no error.
    assert zr("cat", s, "20:30").returncode == OK
    # A delete naming a record that is not there deletes nothing.
    res = zr("delete", s, "0", "10")
    assert res.returncode == NOT_FOUND
    with DenseStore.open(s, readonly=True) as st:
        assert len(st) == 10 and st[0].tolist() == [0, 1, 2]
    # A record that is not a number stays a usage error.
    assert zr("cat", s, "ten").returncode == USAGE


def test_create_where_a_directory_cannot_be_exits_3(tmp_path):
    s = _store(tmp_path / "s")
    (tmp_path / "file").write_bytes(b"not a directory")
    np.save(tmp_path / "a.npy", np.ones((2, 3), "<i4"))
    for args in (["ingest", tmp_path / "a.npy", tmp_path / "file" / "st"],
                 ["recode", s, tmp_path / "file" / "st", "--codec", "zstd"],
                 ["export", s, "-o", tmp_path / "file" / "x.npy"]):
        res = zr(*args)
        assert res.returncode == OPEN, (args, res.stderr)
        assert b"file/" in res.stderr
    assert (tmp_path / "file").read_bytes() == b"not a directory"


def test_mrec_shares_the_map(tmp_path):
    missing = tmp_path / "missing.mrec.lmdb"
    for sub in (["info"], ["validate"], ["dump"]):
        args = ["mrec", *sub, missing] + (["0"] if sub == ["dump"] else [])
        assert zr(*args).returncode == OPEN, sub
    res = zr("mrec", "frobnicate")
    assert res.returncode == USAGE and b"unknown subcommand 'frobnicate'" in res.stderr


# ---------------------------------------------------------------- help

def test_help_help_does_not_loop():
    for args in (["help", "--help"], ["help", "-h"], ["help"], ["--help"], ["-h"]):
        res = zr(*args)
        assert res.returncode == OK and res.stdout.startswith(b"usage: zr COMMAND"), args
    res = zr("help", "no-such-command")
    assert res.returncode == USAGE
    assert b"Try 'zr --help'." in res.stderr and b"zr help --help" not in res.stderr
    assert zr("help", "cat", "dump").returncode == USAGE


def test_top_level_help_is_complete_without_the_man_page():
    out = zr("--help").stdout.decode()
    assert "zr(1)" not in out and "man " not in out
    for word in ("--json", "-q/--quiet", "-h/--help", "Ctrl-C", "130", '"--"', "ZR_PYTHON",
                 "ZR_MREC_VALIDATE_TIMEOUT", "store.zr", "journal.zr"):
        assert word in out, word
    # Every option the man page names is in some command's --help.
    man = open(os.path.join(os.path.dirname(__file__), "..", "..", "tools", "zr", "zr.1")).read()
    named = set(re.findall(r"\\-\\-([a-z][a-z\\-]*[a-z])", man))
    named = {n.replace("\\-", "-") for n in named} - {"apparent-size"}  # du's, in zr info
    helps = out + "".join(zr(c, "--help").stdout.decode() for c in COMMANDS + ["mrec"])
    for opt in sorted(named):
        assert "--" + opt in helps, opt
    # ... and every option of every --help is in the man page.
    for cmd in COMMANDS:
        for opt in _help_options(cmd):
            if opt.startswith("--") and opt != "--help":
                assert opt.replace("-", "\\-") in man, (cmd, opt)


def _help_options(cmd):
    text = zr(cmd, "--help").stdout.decode()
    block = text.split("\nOptions:\n", 1)[1].split("\n\n", 1)[0]
    opts = []
    for line in block.splitlines():
        m = re.match(r"^  (-\w)?(?:, )?(--[\w-]+)?", line)
        if m:
            opts += [o for o in m.groups() if o]
    return opts


@pytest.mark.parametrize("cmd", COMMANDS)
def test_bash_completion_offers_what_help_lists(cmd):
    here = os.path.dirname(__file__)
    comp = os.path.join(here, "..", "..", "tools", "zr", "zr.bash-completion")
    script = f". {comp}; COMP_WORDS=(zr {cmd} -); COMP_CWORD=2; _zr; echo ${{COMPREPLY[@]}}"
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30)
    offered = set(out.stdout.split())
    assert offered == set(_help_options(cmd)), (offered, _help_options(cmd))


# ------------------------------------------- every command's bad input

# (argv, exit status, words stderr must hold). In argv, {s} is a store of
# 10 records, {d} a plain folder (not a store), {f} a regular file, {x} a
# path where nothing is; the other names are files in the same folder.
BAD_INPUT = [
    # info / verify / stats / compact / recover: the store itself
    (["info", "{x}"], OPEN, ["{x}", "cannot open", "does not exist"]),
    (["info", "{d}"], OPEN, ["{d}", "cannot open"]),
    (["info", "{f}"], OPEN, ["{f}", "cannot open"]),
    (["info", "{s}", "--concat", "--concat=1"], USAGE, ["--concat takes no value"]),
    (["verify", "{x}"], OPEN, ["{x}", "cannot open"]),
    (["verify", "{s}", "{x}"], OPEN, ["{x}", "cannot open"]),  # the highest status of all
    (["stats", "{f}"], OPEN, ["{f}", "cannot open"]),
    (["stats", "{s}", "--sizes=yes"], USAGE, ["--sizes takes no value"]),
    (["compact", "{x}"], OPEN, ["{x}", "cannot open"]),
    (["compact"], USAGE, ["missing STORE"]),
    (["recover", "{d}"], OPEN, ["{d}", "cannot open"]),
    (["recover", "{s}", "{s}"], USAGE, ["too many arguments"]),
    # ingest
    (["ingest", "a.npy", "o", "--codec", "lz4"], USAGE, ["unknown codec 'lz4'"]),
    (["ingest", "a.npy", "o", "--tier", "huge"], USAGE, ["unknown tier 'huge'"]),
    (["ingest", "a.npy", "o", "--codec", "raw", "--tier", "fast"], USAGE,
     ["--tier and --dict go with --codec zstd_dict"]),
    (["ingest", "tok.npy", "o", "--lengths", "len.npy", "--offsets", "len.npy"], USAGE,
     ["--lengths or --offsets, not both"]),
    (["ingest", "a.npy", "o", "--array", "a"], USAGE, ["--array NAME goes with a .npz SRC"]),
    (["ingest", "{d}", "o", "--array", "a"], USAGE, ["--array", "a folder"]),
    (["ingest", "{x}", "o"], OPEN, ["{x}", "cannot open"]),
    (["ingest", "junk.npy", "o"], FAILED, ["junk.npy", "not an input zr ingest reads"]),
    (["ingest", "z.npz", "o", "--array", "c"], FAILED, ["no array named 'c'"]),
    (["ingest", "tok.npy", "o", "--lengths", "{x}"], OPEN, ["{x}", "cannot open"]),
    (["ingest", "tok.npy", "o", "--lengths", "float.npy"], FAILED, ["float.npy", "dtype <f8"]),
    (["ingest", "tok.npy", "o", "--lengths", "len.npy"], FAILED, ["lengths cover 9 elements"]),
    (["ingest", "a.npy", "o", "--dict", "{x}"], OPEN, ["{x}", "cannot read the dictionary"]),
    (["ingest", "a.npy", "{s}"], OPEN, ["{s}"]),
    (["ingest", "a.npy", "{f}/o"], OPEN, ["{f}/o"]),
    # export
    (["export", "{s}"], USAGE, ["missing -o FILE"]),
    (["export", "{x}", "-o", "e.npy"], OPEN, ["{x}", "cannot open"]),
    (["export", "{s}", "-o", "{f}"], OPEN, ["{f}"]),
    (["export", "{s}", "-o", "{d}"], OPEN, ["{d}", "is a directory"]),
    # cat / dump
    (["cat", "{s}", "1.5"], USAGE, ["INDEX '1.5' is not an integer or START:STOP"]),
    (["cat", "{s}", "3:x"], USAGE, ["INDEX '3:x' is not START:STOP"]),
    (["cat", "{s}", "0", "--raw", "--json"], USAGE, ["give --raw or --json, not both"]),
    (["cat", "{s}", "10"], NOT_FOUND, ["out of range for 10 records"]),
    (["dump", "{s}", "-11"], NOT_FOUND, ["out of range for 10 records"]),
    (["cat", "{x}", "0"], OPEN, ["{x}", "cannot open"]),
    # delete
    (["delete", "{s}"], USAGE, ["give INDEX... or --mask FILE"]),
    (["delete", "{s}", "0", "--mask", "mask.npy"], USAGE, ["give INDEX... or --mask FILE"]),
    (["delete", "{s}", "zero"], USAGE, ["INDEX 'zero' is not an integer"]),
    (["delete", "{s}", "3", "10"], NOT_FOUND, ["out of range for 10 records"]),
    (["delete", "{s}", "--mask", "{x}"], OPEN, ["{x}", "cannot open"]),
    (["delete", "{s}", "--mask", "short.npy"], USAGE, ["the mask has 3 values, the store 10"]),
    (["delete", "{s}", "--mask", "float.npy"], USAGE, ["dtype <f8"]),
    (["delete", "{s}", "--mask", "junk.npy"], USAGE, ["not a .npy file"]),
    (["delete", "{s}", "--mask", "indices.npy"], USAGE, ["value 7 at 1", "only 0/1"]),
    (["delete", "{x}", "0"], OPEN, ["{x}", "cannot open"]),
    # train-dict
    (["train-dict", "{s}"], USAGE, ["missing -o DICT"]),
    (["train-dict", "{s}", "-o", "dict", "--tier", "huge"], USAGE, ["unknown tier 'huge'"]),
    (["train-dict", "{x}", "-o", "dict"], OPEN, ["{x}", "cannot open"]),
    (["train-dict", "{s}", "-o", "{f}"], OPEN, ["{f}"]),
    (["train-dict", "{s}", "-o", "dict"], FAILED, ["not enough data to train a dictionary"]),
    # recode
    (["recode", "{s}", "r"], USAGE, ["missing --codec"]),
    (["recode", "{s}", "r", "--codec", "lz4"], USAGE, ["unknown codec 'lz4'"]),
    (["recode", "{s}", "r", "--codec", "raw", "--dict", "{f}"], USAGE,
     ["--tier and --dict go with --codec zstd_dict"]),
    (["recode", "{x}", "r", "--codec", "raw"], OPEN, ["{x}", "cannot open"]),
    (["recode", "{s}", "{s}", "--codec", "raw"], OPEN, ["{s}", "--resume"]),
    (["recode", "{s}", "{s}", "--codec", "zstd", "--resume"], OPEN, ["codec is raw, not zstd"]),
    # version, help, mrec
    (["version", "extra"], USAGE, ["too many arguments: 'extra' (expected none)"]),
    (["help", "cat", "dump"], USAGE, ["one COMMAND only"]),
    (["mrec"], USAGE, ["missing SUBCOMMAND"]),
    (["mrec", "dump", "{x}", "x"], USAGE, ["RECORD 'x' is not a number"]),
    (["mrec", "info", "{x}"], OPEN, ["{x}"]),
    (["mrec", "validate", "{f}"], OPEN, ["{f}"]),
]


@pytest.fixture
def bad_input_dir(tmp_path):
    s = _store(tmp_path / "s")
    (tmp_path / "d").mkdir()
    (tmp_path / "f").write_bytes(b"a regular file")
    np.save(tmp_path / "a.npy", np.ones((4, 3), "<i4"))
    np.savez(tmp_path / "z.npz", a=np.ones((4, 3), "<i4"), b=np.zeros(2, "u1"))
    np.save(tmp_path / "tok.npy", np.arange(10, dtype="<i4"))
    np.save(tmp_path / "len.npy", np.array([3, 3, 3], "<i8"))
    np.save(tmp_path / "float.npy", np.ones(10))
    np.save(tmp_path / "short.npy", np.ones(3, bool))
    np.save(tmp_path / "mask.npy", np.zeros(10, bool))
    np.save(tmp_path / "indices.npy", np.array([0, 7] + [0] * 8, "<i8"))
    (tmp_path / "junk.npy").write_bytes(b"not an array at all")
    return tmp_path, s


@pytest.mark.parametrize("argv,status,words", BAD_INPUT,
                         ids=[" ".join(a) for a, _, _ in BAD_INPUT])
def test_every_command_names_bad_input_with_its_status(bad_input_dir, argv, status, words):
    tmp_path, s = bad_input_dir
    names = {"s": s, "d": str(tmp_path / "d"), "f": str(tmp_path / "f"),
             "x": str(tmp_path / "nothing-here")}
    argv = [a.format(**names) for a in argv]
    before = sorted(p.name for p in tmp_path.iterdir())
    os.chdir(tmp_path)
    res = zr(*argv)
    err = res.stderr.decode()
    assert res.returncode == status, (argv, res.returncode, err)
    cmd = argv[0] if argv[0] != "mrec" or len(argv) < 2 else "mrec " + argv[1]
    assert err.startswith(f"zr {cmd}"), err
    for w in words:
        assert w.format(**names) in err, (w, err)
    if status == USAGE:
        assert res.stdout == b""
    # Nothing was made, and the store is as it was.
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    with DenseStore.open(s, readonly=True) as st:
        assert len(st) == 10 and st[:][:, 0].tolist() == list(range(0, 30, 3))
    assert (tmp_path / "f").read_bytes() == b"a regular file"
