"""Type information ships (PEP 561: py.typed and stubs) and a type checker
uses it: a correct training-script snippet checks clean under mypy
--strict, and mistakes a user makes are caught. mypy is pinned in
requirements.txt."""

import os
import subprocess
import sys
import textwrap

import pytest

import loaderx

mypy_api = pytest.importorskip("mypy.api", reason="mypy is not installed (requirements.txt pins it)")

# What stubtest may not match: the private native module (typed Any on
# purpose) and the private helpers a stub need not describe.
ALLOWLIST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "stubtest_allowlist.txt")
MYPY_INI = os.path.join(os.path.dirname(ALLOWLIST), "stubtest_mypy.ini")

GOOD = """
import numpy as np
from loaderx.dataloader import DataLoader, PassLoader, TransformInfo
from loaderx.zrecord import DenseStore
from loaderx.zsampler import Sampler
import loaderx

def augment(batch: dict[str, np.ndarray], info: TransformInfo) -> dict[str, np.ndarray]:
    return {"x": batch["x"] + info.rng.normal(size=batch["x"].shape), "i": info.indices}

st = DenseStore.open("/nonexistent", readonly=True)
loader = DataLoader({"x": st}, batch_size=8, mode="cyclic", transform=augment)
state: dict[str, object] = loader.state_dict()
loader.load_state_dict(state)
step: int = loader.step
evaluation = PassLoader({"x": st}, batch_size=100, shuffle=True, seed=1)
evaluation.set_epoch(2)
n: int = len(evaluation) + evaluation.num_records
for batch in evaluation:
    pass
idx = Sampler(100, 10).indices(3)
version: str = loaderx.__version__
"""

# A user script that calls every documented function of every public
# module (type-checked only, never run): each call must check clean.
EVERYTHING = """
import warnings
from typing import Any, Optional
import numpy as np
import numpy.typing as npt
import loaderx
from loaderx import errors, mrec, shards, utils
from loaderx.dataloader import (DataLoader, LoaderError, PassLoader, ResumeWarning,
                                TransformInfo, pad)
from loaderx.errors import (ClosedError, CorruptStoreError, NotAStoreError, StoreBusy,
                            StoreNotFoundError, ZrError)
from loaderx.zrecord import (CODECS, DICT_TIERS, DTYPES, DenseStore, RaggedBatch, RaggedStore,
                             open_store, release_buffers)
from loaderx.zsampler import BucketSampler, Sampler

def run() -> None:
    versions: dict[str, str] = loaderx.native_versions()
    v: str = loaderx.__version__
    d = DenseStore.create("/tmp/x", np.float32, (28, 28), codec="auto")
    r = RaggedStore.create("/tmp/r", "int32", codec="raw", dict_bytes=None)
    first: int = d.append(np.zeros((4, 28, 28), np.float32))
    r.append([np.arange(3, dtype=np.int32), np.empty((0,), np.int32)])
    a: npt.NDArray[Any] = d[0]
    g = d.gather([0, 1], out=np.empty((2, 28, 28), np.float32))
    pb: RaggedBatch = r.gather_packed(slice(0, 2))
    sizes = pb.sizes
    arrays = pb.arrays()
    d.delete([0])
    d.compact()
    stats: dict[str, int] = d.stats()
    d.sync()
    n: int = d.refresh()
    u: Optional[str] = d.uuid
    info: dict[str, Any] = d.info()
    ro: bool = d.readonly
    codec: str = d.codec
    shape: tuple[int, ...] = d.item_shape
    nb: int = d.nbytes
    d.close()
    e = DenseStore.open("/tmp/x", readonly=True)
    w = DenseStore.open("/tmp/x", recover=True)
    any_store = open_store("/tmp/r", readonly=True)
    freed: int = release_buffers()
    tiers = (DTYPES, CODECS, DICT_TIERS, utils.DICT_TIERS)
    dct: bytes = utils.train_dict(np.zeros((100, 64), np.uint8), tier="fast")
    s = Sampler(100, 10, mode="iid", seed=1)
    s.seek(3)
    idx: npt.NDArray[np.int64] = s.indices(2)
    b = BucketSampler(np.arange(100), 10, window=4)

    def tf(batch: dict[str, Any], info: TransformInfo) -> dict[str, Any]:
        return batch

    loader = DataLoader({"x": e}, batch_size=8, mode="bucket", lengths=np.arange(len(e)),
                        window=4, seed=0, num_workers=0, prefetch=2, transform=tf, rank=0,
                        world_size=1, start_step=0, readahead=None, flip={"x": 0.5})
    batch = next(loader)
    mask = loader.flipped("x", 0)
    state: dict[str, Any] = loader.state()
    loader.load_state_dict(state, allow_grown=True)
    again = DataLoader.from_state({"x": e}, state, allow_grown=False, num_workers=2)
    resumed = DataLoader({"x": e}, **state)
    step: int = loader.step
    names: list[str] = loader.names
    closed: bool = loader.closed
    loader.close()
    p = PassLoader({"x": e}, batch_size=16, shuffle=True, seed=1, epoch=0, drop_last=False,
                   rank=0, world_size=1, num_workers=None, even_batches=True)
    p.set_epoch(1)
    k: int = len(p) + p.num_records + p.epoch
    it = p.iter_from(0)
    p.close()
    padded, lengths = pad([np.arange(3), np.arange(5)], length=4, pad_value=0, return_mask=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResumeWarning)
    try:
        pass
    except (LoaderError, ClosedError, CorruptStoreError, NotAStoreError, StoreBusy,
            StoreNotFoundError, ZrError) as exc:
        status: Optional[int] = getattr(exc, "status", None)
    exc2 = errors.from_status(errors.ZR_EINVAL, "bad")
    concat = shards.ConcatStore("/tmp/shards/*", readonly=True)
    where = concat.locate([0, 1])
    paths: list[str] = concat.paths
    offs = concat.offsets
    m = shards.Mixture({"a": {"x": concat}, "b": {"x": "/tmp/other"}}, weights=[1, 2],
                       modes=["cyclic", "iid"])
    lens = m.lengths()
    mloader = DataLoader(m, batch_size=8)  # type: ignore[arg-type]
    src, local = m.locate(mloader)
    out: str = shards.write_shard("/tmp/s0", lambda q: DenseStore.create(q, "<f4", (2,)),
                                  lambda st: st.append(np.zeros((1, 2), np.float32)))
    found = shards.shard_paths("/tmp/shards/*")
    with mrec.Writer("/tmp/m.lmdb", units=mrec.units_for("metal")) as wr:
        wr.add_record(meta={"name": "a"}, system={"atoms": mrec.Block({"x": [0.0]})})
    mrec.validate("/tmp/m.lmdb")
    with mrec.Reader("/tmp/m.lmdb") as rd:
        nr: int = rd.n_records + rd.n_frames
        frame = rd.system(0)
        streams = mrec.lmdb_streams(rd)
        made = mrec.to_zrecord(rd, "/tmp/mz")
    rounded: float = mrec.round_precision(1.23456, 0.01)
"""

BAD = """
from loaderx.dataloader import DataLoader, PassLoader
from loaderx.zrecord import DenseStore
st = DenseStore.open("/nonexistent")
DataLoader({"x": st}, batch_size="8")
p = PassLoader({"x": st})
p.set_epoch("one")
s: str = DenseStore.open("/x").item_shape
"""


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    # One cache for both runs: numpy's stubs are analysed once.
    return str(tmp_path_factory.mktemp("mypy_cache"))


def check(tmp_path, cache, code):
    src = tmp_path / "snippet.py"
    src.write_text(textwrap.dedent(code))
    out, err, status = mypy_api.run(["--strict", "--cache-dir", cache, str(src)])
    return status, out + err


def test_package_ships_type_information():
    pkg = os.path.dirname(loaderx.__file__)
    for f in ("py.typed", "__init__.pyi", "dataloader.pyi", "zrecord.pyi", "zsampler.pyi"):
        assert os.path.exists(os.path.join(pkg, f)), f


def test_correct_use_checks_clean(tmp_path, cache):
    status, out = check(tmp_path, cache, GOOD)
    assert status == 0, out


def test_every_documented_call_checks_clean(tmp_path, cache):
    status, out = check(tmp_path, cache, EVERYTHING)
    assert status == 0, out


def test_stubs_match_the_runtime():
    """mypy.stubtest: every stub against the installed package (a stub that
    does not parse, or names a function the module lacks or misses one it
    has, fails here)."""
    res = subprocess.run([sys.executable, "-m", "mypy.stubtest", "loaderx",
                          "--allowlist", ALLOWLIST, "--mypy-config-file", MYPY_INI],
                         capture_output=True, text=True, timeout=900,
                         cwd=os.path.dirname(ALLOWLIST))
    assert res.returncode == 0, res.stdout + res.stderr


def test_mistakes_are_caught(tmp_path, cache):
    status, out = check(tmp_path, cache, BAD)
    assert status == 1, out
    assert out.count("error:") >= 3, out
    assert '"batch_size"' in out and '"set_epoch"' in out and "tuple[int, ...]" in out, out
