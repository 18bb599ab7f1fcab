"""docs/PYTHON.md, "Torch and GPU hand-off": every code block of that
section runs as written (here on the CPU: pinned memory and non-blocking
copies are exercised only where a GPU is), and a batch handed to
torch.from_numpy shares the batch's memory."""

import os
import re

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is pinned in requirements/test.txt")

from loaderx.dataloader import DataLoader  # noqa: E402
from loaderx.zrecord import DenseStore  # noqa: E402

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "PYTHON.md")


def section_blocks(title):
    text = open(DOC, encoding="utf-8").read()
    start = text.index(f"\n## {title}\n")
    end = text.index("\n## ", start + 1)
    return re.findall(r"```python\n(.*?)```", text[start:end], flags=re.S)


BLOCKS = section_blocks("Torch and GPU hand-off")


def test_the_section_has_examples():
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("k", range(len(BLOCKS)))
def test_example_runs(k):
    exec(compile(BLOCKS[k], f"PYTHON.md torch block {k}", "exec"), {"__name__": "__doc__"})


def test_from_numpy_shares_the_batch(tmp_path):
    st = DenseStore.create(tmp_path / "x", "float32", (4,), codec="raw")
    st.append(np.arange(400, dtype=np.float32).reshape(100, 4))
    with DataLoader({"x": st}, batch_size=8, seed=1, num_workers=1) as dl:
        b = next(dl)["x"]
        t = torch.from_numpy(b)
        assert t.data_ptr() == b.ctypes.data
        t += 1
        assert b[0, 0] == t[0, 0]
        del b
        nxt = next(dl)["x"]
        assert t.data_ptr() != nxt.ctypes.data  # the tensor kept its buffer
