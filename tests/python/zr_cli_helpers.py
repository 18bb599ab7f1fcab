"""Helpers shared by the test_zr_cli*.py suites: run the installed `zr`,
parse its --json lines, drive it through a pseudo-terminal, interrupt it,
and the real data they use (Fashion-MNIST's IDX files, a folder of the
machine's copyright files)."""

import glob
import gzip
import json
import os
import pty
import select
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

ZR = shutil.which("zr")
needs_zr = pytest.mark.skipif(ZR is None, reason="the zr tool is not on PATH (install first)")

FASHION = "/usr/share/datasets/fashion-mnist"
needs_fashion = pytest.mark.skipif(
    not os.path.exists(os.path.join(FASHION, "train-images-idx3-ubyte.gz")),
    reason="Debian's dataset-fashion-mnist is not installed")

# Exit statuses, as `zr --help` documents them.
OK, FAILED, USAGE, OPEN, NOT_FOUND, INTERRUPTED = 0, 1, 2, 3, 4, 130


def committed_length(store):
    """The committed length in `store`/meta.zr, readable while a writer
    holds the store: the length of the whole header copy with the higher
    sequence (docs/FORMAT.md, meta.zr); 0 when there is none yet."""
    try:
        with open(os.path.join(store, "meta.zr"), "rb") as f:
            m = f.read(128)
    except OSError:
        return 0
    best = None
    for place in (0, 1):
        c = m[64 * place:64 * place + 64]
        if len(c) < 64 or c[28:32] != b"ZRM2":
            continue
        h = 0x811C9DC5
        for b in c[:60]:
            h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
        seq = int.from_bytes(c[32:40], "little")
        if h == int.from_bytes(c[60:64], "little") and seq % 2 == place:
            if best is None or seq > best[0]:
                best = (seq, int.from_bytes(c[0:8], "little"))
    return best[1] if best else 0


def zr(*args, timeout=300, input=None):
    return subprocess.run([ZR, *map(str, args)], capture_output=True, timeout=timeout,
                          input=input)


def zr_json(*args):
    """Run zr with --json; return (result, [one dict per output line])."""
    res = zr(*args, "--json")
    lines = [json.loads(line) for line in res.stdout.decode().splitlines() if line.strip()]
    return res, lines


def fashion(name):
    """Fashion-MNIST's own IDX file `name` as numpy decodes it."""
    raw = gzip.open(os.path.join(FASHION, name)).read()
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def copyright_folder(dst, limit=None, max_size=None):
    """A folder of real text files: /usr/share/doc/*/copyright, one file per
    package, named by the package (at most `limit` files, each at most
    `max_size` bytes). Returns {name: bytes}."""
    os.makedirs(dst, exist_ok=True)
    out = {}
    for path in sorted(glob.glob("/usr/share/doc/*/copyright")):
        if not os.path.isfile(path) or os.path.getsize(path) == 0:
            continue
        if max_size and os.path.getsize(path) > max_size:
            continue
        name = os.path.basename(os.path.dirname(path))
        with open(path, "rb") as f:
            data = f.read()
        with open(os.path.join(dst, name), "wb") as f:
            f.write(data)
        out[name] = data
        if limit and len(out) >= limit:
            break
    if not out:
        pytest.skip("no /usr/share/doc/*/copyright files on this machine")
    return out


def run_in_pty(args, timeout=120):
    """Run zr with stdout and stderr on a pseudo-terminal; return (status,
    everything it wrote)."""
    pid, fd = pty.fork()
    if pid == 0:  # child
        try:
            os.execv(ZR, [ZR, *map(str, args)])
        finally:
            os._exit(127)
    chunks, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        r, _, _ = select.select([fd], [], [], 0.5)
        if r:
            try:
                data = os.read(fd, 65536)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
        else:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                os.close(fd)
                return os.waitstatus_to_exitcode(status), b"".join(chunks)
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), b"".join(chunks)


def start_zr(args):
    """Popen zr with piped output, returned once the native tool runs.

    The `zr` a pip install puts on PATH is a Python console script that
    execs the native tool (same pid). A signal timed from Popen alone would
    land in the interpreter's start-up, not in the command under test, so
    this waits (up to 30 s) until /proc/PID/exe is no longer the
    interpreter, or the process has ended. Elsewhere than Linux it returns
    at once."""
    p = subprocess.Popen([ZR, *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    interpreter = os.path.realpath(sys.executable)
    with open(ZR, "rb") as f:
        script = f.read(2) == b"#!"
    deadline = time.monotonic() + 30
    while script and os.path.exists("/proc/self/exe") and time.monotonic() < deadline:
        try:
            exe = os.readlink("/proc/%d/exe" % p.pid)
        except OSError:  # ended (or not yet visible)
            if p.poll() is not None:
                break
            exe = ""
        if exe and os.path.realpath(exe) != interpreter:
            break
        time.sleep(0.002)
    return p


def interrupt_after(args, seconds, sig=signal.SIGINT, timeout=120):
    """Start zr, send `sig` `seconds` after the native tool runs, return
    (returncode, stderr, seconds from the signal to the exit)."""
    p = start_zr(args)
    time.sleep(seconds)
    t0 = time.monotonic()
    p.send_signal(sig)
    _, err = p.communicate(timeout=timeout)
    return p.returncode, err.decode(), time.monotonic() - t0
