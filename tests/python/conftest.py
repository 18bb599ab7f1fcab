"""Shared fixtures for the loaderx Python suite.

Run against the package in a build tree:
    PYTHONPATH=<build>/bindings/python python3 -m pytest tests/python -q
(`meson test -C <build> --suite python` does exactly that.)
"""

import inspect
import os

import numpy as np
import pytest


@pytest.fixture
def store_dir(tmp_path):
    """A fresh directory under which tests create stores (by name)."""
    d = tmp_path / "stores"
    d.mkdir()
    return d


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


ALL_DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
              "uint64", "float16", "float32", "float64", "complex64", "complex128"]


def random_array(rng, dtype, shape):
    """Deterministic random values of any dtype in the closed set."""
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.integers(0, 2, size=shape).astype(bool)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, size=shape, dtype=dt, endpoint=True)
    if dt.kind == "f":
        return rng.standard_normal(size=shape).astype(dt)
    re = rng.standard_normal(size=shape)
    im = rng.standard_normal(size=shape)
    return (re + 1j * im).astype(dt)


# examples/ddp_fashion_mnist.py and its data, for the suites that run it
# (test_ddp_resume_loss.py, test_loader_ddp.py).
DDP_EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples",
                           "ddp_fashion_mnist.py")
FASHION_MNIST = "/usr/share/datasets/fashion-mnist"


def ddp_example_marks():
    """For a module that runs DDP_EXAMPLE, at import: skips the whole module
    without torch, and returns its ``pytestmark`` (skip without the dataset
    or without read-only shared opens)."""
    pytest.importorskip("torch", reason="torch is not installed (requirements/test.txt pins it)")
    from loaderx.zrecord import DenseStore
    return [
        pytest.mark.skipif(not os.path.isdir(FASHION_MNIST),
                           reason=f"{FASHION_MNIST} missing (dataset-fashion-mnist)"),
        pytest.mark.skipif("readonly" not in inspect.signature(DenseStore.open).parameters,
                           reason="read-only shared opens are not available in loaderx.zrecord"),
    ]
