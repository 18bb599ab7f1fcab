"""The interpreter never aborts or hangs at exit, whatever is left open:
loaders with and without transforms, torch transforms at 1, 2 and default
threads, stores (read-only and writable, with unsynced appends).

Each case is RUNS fresh interpreters (a few at a time) that build their
loaders, take a batch or a few, leave everything open and exit through the
ordinary shutdown. A run killed by a signal (the abort was SIGABRT,
"terminate called without an active exception") or stuck past the hang
guard fails the case. LOADERX_TEST_NO_EXIT_HOOK=1 takes the loader's exit
hook out, to see the test catch the abort it prevents.
"""

import os
import subprocess
import sys
import time

import numpy as np
import pytest

from loaderx.zrecord import DenseStore

RUNS = 20
HANG_GUARD = 60.0  # seconds from "exiting" to the end; an exit takes well under one
PROCESS_GUARD = 900.0  # a whole run, however slow the machine

CHILD = r"""
import os, sys
import numpy as np
case, path, wpath, run = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
if case.startswith("torch"):
    import torch
import loaderx.dataloader
from loaderx.zrecord import DenseStore
from loaderx.dataloader import DataLoader
if os.environ.get("LOADERX_TEST_NO_EXIT_HOOK"):
    import atexit
    atexit.unregister(loaderx.dataloader._close_all_at_exit)
if case.startswith("torch"):
    nt = {"torch1": 1, "torch2": 2, "torch": 0}[case]
    if nt:
        torch.set_num_threads(nt)
    w = torch.ones(64, 512)
    def tf(b):
        # Long enough inside torch (which releases the GIL) that the exit
        # often finds a transform thread there: a thread that comes back
        # for the GIL after finalization began is ended inside C++ code,
        # which aborts, unless the loader was closed before.
        x = torch.from_numpy(b["x"]).float() @ w
        return {"y": (x.T @ x).relu().sum(1)}
elif case == "numpy":
    def tf(b):
        return {"y": b["x"] @ b["x"].T}
else:
    tf = None
st = DenseStore.open(path, readonly=True)
L = DataLoader({"x": st}, batch_size=512, num_workers=2, seed=run, transform=tf)
for _ in range(1 + run % 3):
    next(L)
if case == "stores":
    # A second loader and a writable store with appends never synced.
    L2 = DataLoader({"x": st}, batch_size=32, num_workers=1, transform=lambda b: b)
    next(L2)
    wst = DenseStore.create(os.path.join(wpath, str(run)), "float32", (64,))
    wst.append(np.ones((10, 64), dtype=np.float32))
# everything is left open: exit through the normal shutdown
print("exiting", flush=True)
"""


def run_many(case, stores, runs=RUNS, env=None):
    """Run the child `runs` times, a few at a time; the failures. The exit
    is timed from the child's "exiting" line (imports can be slow on a
    busy machine; only the exit must never hang)."""
    path, wpath = stores
    parallel = max(2, min(4, (os.cpu_count() or 1) + 1))
    pending, active, bad = list(range(runs)), {}, []
    while pending or active:
        while pending and len(active) < parallel:
            run = pending.pop(0)
            p = subprocess.Popen([sys.executable, "-c", CHILD, case, path, wpath, str(run)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
            os.set_blocking(p.stdout.fileno(), False)
            active[run] = [p, time.monotonic(), None, b""]
        for run, entry in list(active.items()):
            p, started, exiting, out = entry
            chunk = p.stdout.read()
            if chunk:
                entry[3] = out = out + chunk
                if exiting is None and b"exiting" in out:
                    entry[2] = exiting = time.monotonic()
            rc = p.poll()
            now = time.monotonic()
            if rc is None and (now - started > PROCESS_GUARD or
                               (exiting is not None and now - exiting > HANG_GUARD)):
                p.kill()
                p.wait()
                bad.append(f"run {run}: hung " + ("at exit" if exiting else "before exit"))
            elif rc is not None:
                err = p.stderr.read().decode(errors="replace").strip().splitlines()
                if rc != 0:
                    bad.append(f"run {run}: status {rc} ({err[-1] if err else ''})")
            else:
                continue
            p.stdout.close()
            p.stderr.close()
            del active[run]
        time.sleep(0.02)
    return bad


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    d = tmp_path_factory.mktemp("exit")
    rng = np.random.default_rng(1)
    with DenseStore.create(str(d / "x"), "float32", (64,)) as st:
        st.append(rng.random((4000, 64), dtype=np.float32))
    return str(d / "x"), str(d)


CASES = ["none", "numpy", "stores"]
try:
    import torch  # noqa: F401
    CASES += ["torch1", "torch2", "torch"]
except ImportError:  # torch is pinned in requirements.txt; skip its cases without it
    pass


@pytest.mark.parametrize("case", CASES)
def test_exit_never_aborts_or_hangs(case, stores, tmp_path):
    bad = run_many(case, (stores[0], str(tmp_path)))
    assert not bad, f"{len(bad)} of {RUNS} exits failed: " + "; ".join(bad)
