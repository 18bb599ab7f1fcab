"""Ctrl-C in a training loop: a KeyboardInterrupt anywhere in iteration
never hangs close() or a `with` exit, and a caught interrupt loses no
batch (the next next() yields step loader.step, state() stays exact).

Each case runs in a child interpreter that interrupts itself with real
SIGINTs (from a timer thread, at random points of the loop) and checks the
batches against an uninterrupted reference. Timings are generous guards,
never measurements.
"""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from loaderx.zrecord import DenseStore

HANG_GUARD = 60


def _make(path, n=997):
    with DenseStore.create(str(path), "int64", ()) as st:
        st.append(np.arange(n, dtype=np.int64))


def _run_child(body, timeout=HANG_GUARD):
    """Run PRELUDE + `body` in a fresh interpreter; its stdout."""
    try:
        res = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(body)],
                             capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail("the child hung (did not finish within the hang guard)")
    assert res.returncode == 0, res.stdout + res.stderr
    return res.stdout


PRELUDE = """
import os, signal, sys, threading, time
# A child started from a background job inherits SIGINT ignored, and
# Python then leaves it ignored: take the default KeyboardInterrupt handler.
signal.signal(signal.SIGINT, signal.default_int_handler)
import numpy as np
from loaderx.zrecord import DenseStore
from loaderx.dataloader import DataLoader

def interrupter(period):
    # SIGINTs to this process at jittered times until told to stop.
    stop = threading.Event()
    rng = np.random.default_rng(7)
    def run():
        while not stop.wait(period * (0.2 + rng.random())):
            os.kill(os.getpid(), signal.SIGINT)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return stop
"""


@pytest.mark.parametrize("transform", ["none", "identity", "slow"])
def test_caught_interrupts_lose_no_batch(tmp_path, transform):
    """Many SIGINTs caught around next(): every step comes exactly once,
    in order, equal to the reference, and state() matches."""
    _make(tmp_path / "x")
    out = _run_child(f"""
        kind = {transform!r}
        def slow(b):
            time.sleep(0.0005)
            return b
        tf = {{"none": None, "identity": lambda b: b, "slow": slow}}[kind]
        st = DenseStore.open({str(tmp_path / 'x')!r}, readonly=True)
        ref = DataLoader({{"x": st}}, batch_size=7, seed=3, num_workers=2)
        want = [next(ref)["x"].copy() for _ in range(400)]
        ref.close()
        L = DataLoader({{"x": st}}, batch_size=7, seed=3, num_workers=2, prefetch=3,
                       transform=tf)
        got, missed, interrupts, dropped = [], [], 0, [0]
        # SIGINTs raise KeyboardInterrupt only while armed (around next()),
        # so none lands in the test's own bookkeeping or loop jumps.
        armed = [False]
        def handler(signum, frame):
            if armed[0]:
                armed[0] = False
                raise KeyboardInterrupt
            dropped[0] += 1
        signal.signal(signal.SIGINT, handler)
        stop = interrupter(0.002)
        while L.step < 400:
            try:
                step = L.step
                armed[0] = True
                b = next(L)
                armed[0] = False
                assert L.step == step + 1 and L.state()["step"] == step + 1
                got.append((step, b["x"].copy()))
            except KeyboardInterrupt:
                interrupts += 1
                # an interrupted next() took nothing: still at the same step;
                # or next() had returned and the interrupt hit the line after
                # it (the batch was delivered, only this test missed it)
                assert L.step in (step, step + 1), (L.step, step)
                if L.step == step + 1:
                    missed.append(step)
        stop.set()
        steps = [k for k, _ in got]
        assert sorted(steps + missed) == list(range(400)), steps  # each step once, in order
        assert steps == sorted(steps)
        for step, x in got:
            # before the fix, a caught interrupt dropped a taken batch:
            # next() then returned step k+1's batch while L.step said k
            assert np.array_equal(x, want[step]), step
        # the interrupted loader still resumes exactly
        R = DataLoader.from_state({{"x": st}}, L.state())
        assert np.array_equal(next(R)["x"], next(L)["x"])
        R.close(); L.close()
        print("interrupts", interrupts)
    """, timeout=120)
    assert int(out.split()[-1]) > 0, "no SIGINT landed; the test did not test anything"


@pytest.mark.parametrize("transform", ["none", "identity"])
def test_with_block_exits_promptly_on_ctrl_c(tmp_path, transform):
    """A SIGINT during `for batch in loader` inside `with`: the block is
    left within 2 s, repeatedly, at random points."""
    _make(tmp_path / "x")
    out = _run_child(f"""
        tf = None if {transform!r} == "none" else (lambda b: b)
        st = DenseStore.open({str(tmp_path / 'x')!r}, readonly=True)
        worst = 0.0
        for trial in range(15):
            t0 = None
            try:
                with DataLoader({{"x": st}}, batch_size=7, num_workers=2, transform=tf) as L:
                    threading.Timer(0.01 + 0.003 * trial,
                                    lambda: os.kill(os.getpid(), signal.SIGINT)).start()
                    for b in L:
                        t0 = time.monotonic()
            except KeyboardInterrupt:
                pass
            if t0 is not None:
                worst = max(worst, time.monotonic() - t0)
            assert L.closed
        print("worst", worst)
    """)
    assert float(out.split()[-1]) < 2.0


def test_interrupt_while_waiting_for_a_slow_batch(tmp_path):
    """The consumer blocked on a batch that takes long to build (a slow
    stream) still gets the KeyboardInterrupt within 2 s, and the batch it
    was waiting for is not lost."""
    _make(tmp_path / "x")
    out = _run_child(f"""
        st = DenseStore.open({str(tmp_path / 'x')!r}, readonly=True)
        # A transform that blocks on an Event makes the wait arbitrarily long.
        gate = threading.Event()
        def tf(b):
            gate.wait()
            return b
        L = DataLoader({{"x": st}}, batch_size=7, num_workers=1, prefetch=1, transform=tf)
        threading.Timer(0.2, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        t0 = time.monotonic()
        try:
            next(L)
        except KeyboardInterrupt:
            pass
        waited = time.monotonic() - t0
        gate.set()
        assert L.step == 0
        b = next(L)
        assert L.step == 1
        L.close()
        print("waited", waited)
    """)
    assert float(out.split()[-1]) < 2.0
