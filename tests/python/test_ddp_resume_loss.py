"""examples/ddp_fashion_mnist.py: a run resumed from --state-out continues
the *training* exactly, not only the batches: the optimizer's momentum is
saved and restored along with the model, so the loss after 4 + 6 resumed
steps equals the loss after 10 uninterrupted steps. Also the --help text
carries the docstring's whole first paragraph."""

import re
import subprocess
import sys

import pytest

from conftest import DDP_EXAMPLE as EXAMPLE, ddp_example_marks

pytestmark = ddp_example_marks()


def _run(*args):
    # the timeout only guards against a hang
    proc = subprocess.run([sys.executable, EXAMPLE, *args], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def _losses(out):
    return {int(m.group(1)): float(m.group(2))
            for m in re.finditer(r"^step (\d+): loss ([0-9.]+)$", out, re.M)}


def test_resume_restores_optimizer_state(tmp_path):
    common = ["--stores", str(tmp_path / "stores"), "--limit", "1200", "--batch-size", "100",
              "--world-size", "2", "--seed", "3"]
    straight = _losses(_run(*common, "--steps", "10"))
    _run(*common, "--steps", "4", "--state-out", str(tmp_path / "st"))
    resumed = _losses(_run(*common, "--steps", "6", "--state-in", str(tmp_path / "st")))
    assert 9 in straight and 9 in resumed, (straight, resumed)
    # Same batches, same model, same momentum: the same arithmetic.
    assert resumed[9] == pytest.approx(straight[9], abs=1e-4)


def test_help_has_the_whole_first_paragraph():
    out = _run("--help")
    text = " ".join(out.split())
    assert "one rank-sharded loader per rank." in text
