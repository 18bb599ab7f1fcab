"""Multi-process training: examples/ddp_fashion_mnist.py with two ranks
(torch.distributed, gloo, DistributedDataParallel) over the same stores
opened read-only. Checks that the ranks' indices are disjoint and together
cover each cycle, and that resuming both ranks from saved state continues
exactly."""

import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import DDP_EXAMPLE as EXAMPLE, ddp_example_marks

pytestmark = ddp_example_marks()

LIMIT, BATCH, WORLD = 1200, 100, 2   # a cycle is 1200 // 200 = 6 steps


def _example(tmp, *extra):
    cmd = [sys.executable, EXAMPLE, "--stores", str(tmp / "stores"), "--limit", str(LIMIT),
           "--batch-size", str(BATCH), "--world-size", str(WORLD), "--seed", "7", *extra]
    # the timeout only guards against a hang
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _logs(d):
    return [np.load(os.path.join(d, f"rank{r}.npy")) for r in range(WORLD)]


def test_ddp_ranks_shard_the_cycle_and_resume_exactly(tmp_path):
    _example(tmp_path, "--steps", "10", "--log", str(tmp_path / "full"))
    full = _logs(tmp_path / "full")
    assert all(x.shape == (10, BATCH) for x in full)
    # each step: disjoint slices; each cycle of 6 steps: every record once
    for step in range(10):
        assert not set(full[0][step]) & set(full[1][step])
    cycle = np.concatenate([full[r][:6].ravel() for r in range(WORLD)])
    assert np.array_equal(np.sort(cycle), np.arange(LIMIT))

    _example(tmp_path, "--steps", "4", "--state-out", str(tmp_path / "st"),
             "--log", str(tmp_path / "a"))
    _example(tmp_path, "--steps", "6", "--state-in", str(tmp_path / "st"),
             "--log", str(tmp_path / "b"))
    a, b = _logs(tmp_path / "a"), _logs(tmp_path / "b")
    for r in range(WORLD):
        assert np.array_equal(np.concatenate([a[r], b[r]]), full[r])
