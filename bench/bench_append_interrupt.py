"""Ctrl-C latency of long appends, per codec: time from SIGINT to the end of
an interrupted `append` (Python: KeyboardInterrupt caught; `zr ingest` and
`zr recode`: the process exit), on incompressible and compressible records.
Each case runs in its own process, interrupted once its appends are under
way. --fixed-slices reproduces the earlier Python append (fixed 32 MiB
slices, the same native call) for comparison; --zr picks the zr binary.
Usage: python3 bench/bench_append_interrupt.py [--trials N] [--zr PATH] [--fixed-slices]"""
import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

from loaderx import utils
from loaderx.zrecord import DenseStore

RECORD = 4096
N = 16384  # 64 MiB per append

CHILD = r"""
import os, signal, sys, threading, time
signal.signal(signal.SIGINT, signal.default_int_handler)
import numpy as np
from loaderx.zrecord import DenseStore
path, codec, kind, dict_path = sys.argv[1:5]
x = np.load(sys.argv[5])
d = open(dict_path, "rb").read() if codec == "zstd_dict" else None
st = DenseStore.create(path, "uint8", (x.shape[1],), codec=codec, dict_bytes=d)
sent = []
def fire():
    sent.append(time.monotonic())
    os.kill(os.getpid(), signal.SIGINT)
threading.Timer(float(sys.argv[6]), fire).start()
from loaderx import _zr
def fixed(arr):  # the earlier append loop: 32 MiB slices whatever the codec
    per = max(1, (32 << 20) // arr.shape[1])
    for a in range(0, len(arr), per):
        _zr.zrs_append_dense(st._handle(), arr[a:a + per], len(arr[a:a + per]))
try:
    for _ in range(1000):
        fixed(x) if sys.argv[7] == "fixed" else st.append(x)
    print("finished")
except KeyboardInterrupt:
    print(time.monotonic() - sent[0])
"""


def data(kind, rng):
    if kind == "incompressible":
        return rng.integers(0, 256, size=(N, RECORD), dtype=np.uint8)
    words = np.frombuffer(b"the quick brown fox jumps over the lazy dog 0123456789 ", np.uint8)
    idx = (np.arange(N * RECORD) * 7 + rng.integers(0, 3, N * RECORD)) % len(words)
    return words[idx].reshape(N, RECORD)


def python_latency(tmp, codec, kind, npy, dict_path, delay, how):
    path = os.path.join(tmp, f"py-{codec}-{kind}")
    out = subprocess.run([sys.executable, "-c", CHILD, path, codec, kind, dict_path, npy,
                          str(delay), how], capture_output=True, text=True, timeout=600)
    shutil.rmtree(path, ignore_errors=True)
    if out.returncode != 0 or out.stdout.strip() == "finished":
        raise RuntimeError(out.stdout + out.stderr)
    return float(out.stdout.strip())


def zr_latency(argv, wait_for, delay):
    """SIGINT `zr argv` `delay` s after `wait_for` exists; seconds to exit."""
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    t0 = time.monotonic()
    while not os.path.exists(wait_for) and p.poll() is None and time.monotonic() - t0 < 300:
        time.sleep(0.01)
    time.sleep(delay)
    sent = time.monotonic()
    p.send_signal(signal.SIGINT)
    p.wait(timeout=600)
    took = time.monotonic() - sent
    err = p.stderr.read().decode()
    if p.returncode == 0:  # done before the signal: nothing to measure
        return None
    if p.returncode != 130:
        raise RuntimeError(f"{argv}: exit {p.returncode}: {err}")
    return took


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--zr", default=shutil.which("zr"))
    ap.add_argument("--fixed-slices", action="store_true")
    ap.add_argument("--no-zr", action="store_true")
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    tmp = tempfile.mkdtemp()
    try:
        rows = []
        for kind in ("incompressible", "compressible"):
            x = data(kind, rng)
            npy = os.path.join(tmp, f"{kind}.npy")
            np.save(npy, x)
            dict_path = os.path.join(tmp, f"{kind}.dict")
            with open(dict_path, "wb") as f:
                f.write(utils.train_dict([bytes(r) for r in x[:2000]], tier="fast"))
            src = os.path.join(tmp, f"src-{kind}")
            if a.zr and not a.no_zr:  # by that zr, so its own build can read it back
                subprocess.run([a.zr, "ingest", "-q", "--codec", "raw", npy, src], check=True)
            for codec in ("raw", "zstd", "zstd_dict"):
                how = "fixed" if a.fixed_slices else "timed"
                py = [python_latency(tmp, codec, kind, npy, dict_path, 0.5 + 0.1 * t, how)
                      for t in range(a.trials)]
                zi, zc = [], []
                if a.zr and not a.no_zr:
                    for t in range(a.trials):
                        dst = os.path.join(tmp, f"zi-{t}")
                        extra = ["--dict", dict_path] if codec == "zstd_dict" else []
                        zi.append(zr_latency([a.zr, "ingest", "-q", "--codec", codec, *extra,
                                              npy, dst], os.path.join(dst, "store.zr"),
                                             0.3 + 0.1 * t))
                        shutil.rmtree(dst, ignore_errors=True)
                        dst = os.path.join(tmp, f"zc-{t}")
                        zc.append(zr_latency([a.zr, "recode", "-q", src, dst, "--codec", codec,
                                              *extra], os.path.join(dst, "store.zr"),
                                             0.3 + 0.1 * t))
                        shutil.rmtree(dst, ignore_errors=True)
                rows.append((codec, kind, py, zi, zc))

                def worst(v):
                    v = [t for t in v if t is not None]
                    return f"{max(v) * 1e3:6.0f} ms" if v else "  (done before the signal)"

                print(f"{codec:9s} {kind:14s}  append max {worst(py)}"
                      + (f"   zr ingest max {worst(zi)}   zr recode max {worst(zc)}"
                         if zi else ""), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
