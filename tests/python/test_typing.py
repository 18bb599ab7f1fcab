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


def test_mistakes_are_caught(tmp_path, cache):
    status, out = check(tmp_path, cache, BAD)
    assert status == 1, out
    assert out.count("error:") >= 3, out
    assert '"batch_size"' in out and '"set_epoch"' in out and "tuple[int, ...]" in out, out
