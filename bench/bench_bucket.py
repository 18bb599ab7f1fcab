"""Token efficiency (real tokens / padded tokens of batches padded to their
longest record) of length-bucketed batches against plain cyclic ones, on the
tokenized linux-doc-6.1 corpus (bench/prepare.py makes it).
Usage: python3 bench/bench_bucket.py [batch_size] [window]"""
import sys

import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import prepare  # noqa: E402
from loaderx.zsampler import BucketSampler, Sampler  # noqa: E402


def efficiency(sampler, lengths, steps):
    real = padded = 0
    for s in range(steps):
        L = lengths[sampler.indices(s)]
        real += int(L.sum())
        padded += int(L.max()) * len(L)
    return real / padded


if __name__ == "__main__":
    batch = int(sys.argv[1]) if len(sys.argv) > 1 else 64
    window = int(sys.argv[2]) if len(sys.argv) > 2 else 64
    _, lengths = prepare.load()
    steps = len(lengths) // batch  # one cycle
    cyc = efficiency(Sampler(len(lengths), batch, "cyclic", seed=0), lengths, steps)
    buc = efficiency(BucketSampler(lengths, batch, window=window, seed=0), lengths, steps)
    print(f"{len(lengths)} paragraphs, batch {batch}, one cycle ({steps} steps): token efficiency "
          f"cyclic {cyc:.1%}, bucketed (window {window}) {buc:.1%}")
