"""Ctrl-C latency of a loop blocked on slow batches: time from SIGINT to leaving
the `with DataLoader(...)` block, without and with a transform.
Usage: python3 bench/bench_interrupt.py"""
import os, signal, threading, time, numpy as np, tempfile
from loaderx.zrecord import DenseStore
from loaderx.dataloader import DataLoader
d = tempfile.mkdtemp()
with DenseStore.create(d + "/x", "float32", (1024,), codec="zstd") as st:
    st.append(np.random.default_rng(0).random((4000, 1024), dtype=np.float32))
st = DenseStore.open(d + "/x", readonly=True)
# a consumer waiting on batches slower than it: batch 4000 x 4 KiB zstd, one worker
for tf in (None, lambda b: b):
    lat = []
    for trial in range(10):
        sent = []
        try:
            with DataLoader({"x": st}, batch_size=2000, num_workers=1, prefetch=1, mode="iid",
                            transform=tf) as L:
                threading.Timer(0.05 + 0.01 * trial, lambda: (sent.append(time.monotonic()),
                                os.kill(os.getpid(), signal.SIGINT))).start()
                for b in L:
                    pass
        except KeyboardInterrupt:
            lat.append(time.monotonic() - sent[0])
    print("transform" if tf else "no transform", f"Ctrl-C to with-exit: median {np.median(lat)*1e3:.0f} ms, max {max(lat)*1e3:.0f} ms")
