"""The dictionary step of the cross-language test, Python's side.

`dict.py make DIR` writes DIR/src, a dense uint8 store of 3,000 text-like
records of 2 KiB (6 MB, past the 4 MiB sample of the 'fast' tier, so the
sample rule has to thin it); `dict.py train DIR` reads its records back and
writes DIR/python, the dictionary loaderx.utils.train_dict makes of them as
a list. C (`zr train-dict`), Lua and Go write theirs beside it; run.sh
compares the files byte for byte.
"""
import sys
from pathlib import Path

import numpy as np

from loaderx.utils import train_dict
from loaderx.zrecord import DenseStore

N, SIZE = 3000, 2048
WORDS = [b"record", b"store", b"gather", b"codec", b"shard", b"rank", b"epoch", b"step"]


def record(i):
    line = b" ".join(WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(i % 5 + 3))
    text = (line + b" %d\n" % (i % 97)) * (SIZE // 8)
    return np.frombuffer(text[:SIZE], dtype=np.uint8)


def main():
    what, out = sys.argv[1], Path(sys.argv[2])
    if what == "make":
        out.mkdir(parents=True, exist_ok=True)
        with DenseStore.create(out / "src", np.uint8, (SIZE,), codec="zstd") as s:
            s.append(np.stack([record(i) for i in range(N)]))
        return
    with DenseStore.open(out / "src", readonly=True) as s:
        records = [s[i] for i in range(len(s))]
    (out / "python").write_bytes(train_dict(records, tier="fast"))


if __name__ == "__main__":
    main()
