"""The benchmark harness (bench/run.py) in --quick mode: it must complete
and validate every planned result of every installed backend (a wrong
dtype, shape, order or value fails the run). Never asserts on speed."""
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"


def _missing():
    """--exclude arguments for the peers whose packages are not installed."""
    sys.path.insert(0, str(BENCH))
    try:
        import backends
        from common import MissingBackend
    finally:
        sys.path.remove(str(BENCH))
    args = []
    for make in backends.ALL:
        b = make()
        try:
            b.check()
        except MissingBackend:
            args += ["--exclude", b.name]
    for mod, name in (("torch", "torch"), ("grain.python", "grain")):
        try:
            importlib.import_module(mod)
        except Exception:
            args += ["--exclude", name]
    return args


def test_quick_run_completes_and_validates(tmp_path):
    if not Path("/usr/share/doc/linux-doc-6.1/Documentation").is_dir():
        pytest.skip("the token corpus needs the Debian package linux-doc-6.1 (scripts/setup.sh)")
    out, js = tmp_path / "out", tmp_path / "results.json"
    cmd = [sys.executable, str(BENCH / "run.py"), "--quick", "--out", str(out),
           "--workdir", str(tmp_path / "work"), "--json", str(js)] + _missing()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900,
                       env=dict(os.environ, MPLBACKEND="Agg"))
    assert r.returncode == 0, r.stderr[-4000:]
    res = json.loads(js.read_text())
    names = [t["name"] for t in res["tables"]]
    assert names == ["vision_dense", "vision_ragged", "token_blocks", "token_ragged",
                     "small_rows"]
    for t in res["tables"]:
        assert any(row["backend"] == "zrecord-raw" for row in t["rows"])
        for row in t["rows"]:
            assert row["gather_mibs"] > 0 and row["disk"] > 0
    small = {row["backend"] for row in res["tables"][-1]["rows"]}
    assert {"zrecord-raw", "zrecord-raw-out", "npy-mmap-raw"} <= small
    cells = res["scale"]["cells"]
    assert {c["backend"] for c in cells} == {"zrecord-raw", "zrecord-raw-out", "zrecord-zstd",
                                             "npy-mmap-raw"}
    assert {c["record_bytes"] for c in cells} == set(res["scale"]["record_bytes"])
    assert all(c["ns_per_record"] > 0 for c in cells)
    assert len(res["sampler"]) == 3
    lim = res["tables"][0]["limits"]
    assert lim["zstd_share"]["backend"] == "zrecord-zstd" and lim["zstd_share"]["share"] > 0
    assert lim["memcpy_share"]["backend"] == "zrecord-raw" and lim["memcpy_share"]["share"] > 0
    assert any(row["loader"] == "loaderx-zstd" for row in res["loader"])
    for tf in ("identity", "flip-worker"):
        assert any(row["loader"] == "loaderx-raw" and row["transform"] == tf
                   for row in res["loader"])
    assert any(row["loader"] == "held" for row in res["loader"])
    bind = res["bindings"]
    if "skipped" not in bind:  # a C install, lua5.4 and go (scripts/test.sh has them)
        assert {"c", "lua", "go"} <= {x["binding"] for x in bind["gather"]}
        assert all(x["ms"] > 0 and x["vs_c"] > 0 for x in bind["gather"])
    assert res["hyperfine"]["results"]
    text = (out / "BENCHMARKS.md").read_text()
    if "skipped" not in bind:
        assert "| Lua and Go gather vs C, the smaller (kept) | >= 0.90x |" in text
        assert "## Bindings: Lua and Go vs C" in text
    assert "## Goals" in text and "## Physical limits" in text
    assert "| 20,000 random 32-byte rows (int32[8]), zrecord-raw vs numpy memmap | >= 1.00x |" \
        in text
    assert "identity transform | >= 3.00x |" in text and "## Scale" in text
    assert "decompression, side by side (kept) | >= 90% |" in text
    assert "share of all-thread memcpy, side by side | >= 70% |" in text
    for png in ("bench_vision_dense.png", "bench_small_rows.png", "bench_scale.png"):
        assert (out / "img" / png).stat().st_size > 0


def test_missing_backend_is_an_error(tmp_path, monkeypatch):
    """A backend whose package does not import is refused by name, with the
    --exclude hint, rather than skipped."""
    sys.path.insert(0, str(BENCH))
    try:
        from common import Backend, MissingBackend
    finally:
        sys.path.remove(str(BENCH))

    class Ghost(Backend):
        name = "ghost-raw"
        requires = ("no_such_module_for_bench",)

    with pytest.raises(MissingBackend, match="--exclude ghost-raw"):
        Ghost().check()
