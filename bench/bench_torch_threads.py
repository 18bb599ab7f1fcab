"""Torch's intra-op threads against a loader transform thread: steps/s of a
small torch training-like loop over a DataLoader with a torch transform, at
torch's default thread count and at torch.set_num_threads(1).
Usage: python3 bench/bench_torch_threads.py [threads ...]   (runs each in a
fresh interpreter; prints one line per setting)."""
import os
import subprocess
import sys
import tempfile

CHILD = r"""
import sys, time, numpy as np, torch
from loaderx.zrecord import DenseStore
from loaderx.dataloader import DataLoader
nt = int(sys.argv[2])
if nt:
    torch.set_num_threads(nt)
st = DenseStore.open(sys.argv[1], readonly=True)
w = torch.randn(64, 64)
def tf(b):
    return torch.from_numpy(b["x"]).float()
with DataLoader({"x": st}, batch_size=64, num_workers=2, transform=tf) as L:
    for _ in range(50):
        next(L)
    t = time.perf_counter(); n = 1500
    for _ in range(n):
        x = next(L)
        (x @ w).relu().sum()
    dt = time.perf_counter() - t
print(f"torch threads {torch.get_num_threads()} ({'default' if nt == 0 else 'set'}): "
      f"{n / dt:,.0f} steps/s")
"""

if __name__ == "__main__":
    import numpy as np
    from loaderx.zrecord import DenseStore
    d = tempfile.mkdtemp()
    path = os.path.join(d, "x")
    with DenseStore.create(path, "float32", (64,)) as s:
        s.append(np.random.default_rng(0).random((20000, 64), dtype=np.float32))
    for nt in (sys.argv[1:] or ["0", "1"]):
        print(subprocess.run([sys.executable, "-c", CHILD, path, nt], capture_output=True,
                             text=True).stdout.strip(), flush=True)
