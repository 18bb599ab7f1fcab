"""Ctrl-C latency of long appends, per codec: time from SIGINT to the end of
an interrupted `append` (Python: KeyboardInterrupt caught; `zr ingest` and
`zr recode`: the process exit), on incompressible and compressible records.
Each case runs in its own process, interrupted once its appends are under
way. Usage: python3 bench/bench_append_interrupt.py [--trials N] [--zr PATH]"""
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
try:
    for _ in range(1000):
        st.append(x)
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


def python_latency(tmp, codec, kind, npy, dict_path, delay):
    path = os.path.join(tmp, f"py-{codec}-{kind}")
    out = subprocess.run([sys.executable, "-c", CHILD, path, codec, kind, dict_path, npy,
                          str(delay)], capture_output=True, text=True, timeout=600)
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
    if p.returncode != 130:
        raise RuntimeError(f"{argv}: exit {p.returncode}: {err}")
    return took


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--zr", default=shutil.which("zr"))
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
            with DenseStore.create(src, "uint8", (RECORD,), codec="raw") as st:
                for _ in range(4):
                    st.append(x)
            for codec in ("raw", "zstd", "zstd_dict"):
                py = [python_latency(tmp, codec, kind, npy, dict_path, 0.5 + 0.1 * t)
                      for t in range(a.trials)]
                zi, zc = [], []
                if a.zr:
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
                print(f"{codec:9s} {kind:14s}  append max {max(py) * 1e3:6.0f} ms"
                      + (f"   zr ingest max {max(zi) * 1e3:6.0f} ms   zr recode max "
                         f"{max(zc) * 1e3:6.0f} ms" if zi else ""), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
