"""BucketSampler: length-bucketed batches as a pure function of (seed,
step): each record at most once per cycle, same records per window as the
cyclic mode, far less padding; ranks split the global batch."""

import numpy as np
import pytest

from loaderx.zsampler import BucketSampler, Sampler


def efficiency(s, lengths, steps):
    real = padded = 0
    for k in range(steps):
        L = lengths[s.indices(k)]
        real += L.sum()
        padded += L.max() * len(L)
    return real / padded


def test_bucketed_batches_pad_far_less():
    rng = np.random.default_rng(0)
    lengths = rng.zipf(1.6, size=5000).clip(1, 4000)
    b = BucketSampler(lengths, 32, window=32, seed=1)
    c = Sampler(len(lengths), 32, "cyclic", seed=1)
    steps = len(lengths) // 32
    assert efficiency(b, lengths, steps) > 2 * efficiency(c, lengths, steps)
    seen = np.concatenate([b.indices(k) for k in range(steps)])
    assert len(set(seen.tolist())) == len(seen)  # at most once per cycle
    # a window holds exactly the cyclic mode's records of those steps
    win = np.concatenate([b.indices(k) for k in range(32)])
    ref = np.concatenate([c.indices(k) for k in range(32)])
    assert sorted(win.tolist()) == sorted(ref.tolist())
    # pure function of (seed, step)
    again = BucketSampler(lengths, 32, window=32, seed=1, step=17)
    assert np.array_equal(next(again), b.indices(17))
    assert not np.array_equal(BucketSampler(lengths, 32, window=32, seed=2).indices(17),
                              b.indices(17))


def test_ranks_split_the_global_batch():
    lengths = np.arange(1000) % 37
    one = BucketSampler(lengths, 20, window=4, seed=3)
    r0 = BucketSampler(lengths, 10, window=4, seed=3, rank=0, world_size=2)
    r1 = BucketSampler(lengths, 10, window=4, seed=3, rank=1, world_size=2)
    for k in range(10):
        assert np.array_equal(np.concatenate([r0.indices(k), r1.indices(k)]), one.indices(k))


def test_errors():
    with pytest.raises(ValueError):
        BucketSampler([], 4)
    with pytest.raises(ValueError):
        BucketSampler([1, 2, 3], 4)  # cyclic rule: batch <= length
    with pytest.raises(ValueError):
        BucketSampler([1, -2, 3], 1)


# ------------------------------------------------ the DataLoader's mode

def _ragged_tokens(path, lengths):
    """A ragged store whose record i is int32 [i, i, ...] of lengths[i]."""
    from loaderx.zrecord import RaggedStore
    with RaggedStore.create(str(path), "int32") as st:
        st.append([np.full(n, i, dtype=np.int32) for i, n in enumerate(lengths)])
    return RaggedStore.open(str(path), readonly=True)


def test_dataloader_bucket_mode_matches_the_sampler(tmp_path):
    """mode='bucket' yields BucketSampler's batches (any worker count),
    the records themselves, resumes from state(), and pads far less."""
    from loaderx.dataloader import DataLoader, pad
    rng = np.random.default_rng(5)
    lengths = rng.integers(16, 512, size=3000)
    st = _ragged_tokens(tmp_path / "t", lengths)
    ref = BucketSampler(lengths, 16, window=8, seed=4, rank=1, world_size=2)
    for workers in (1, 3):
        with DataLoader({"t": st}, batch_size=16, mode="bucket", lengths=lengths, window=8, seed=4,
                        rank=1, world_size=2, num_workers=workers) as dl:
            for k in range(40):
                batch = next(dl)["t"]
                idx = ref.indices(k)
                assert [int(r[0]) for r in batch] == idx.tolist()
                assert [len(r) for r in batch] == lengths[idx].tolist()
            state = dl.state()
    assert state["mode"] == "bucket" and state["window"] == 8 and state["step"] == 40
    with DataLoader.from_state({"t": st}, state, lengths=lengths) as dl:
        assert [int(r[0]) for r in next(dl)["t"]] == ref.indices(40).tolist()
        dl.load_state_dict({**state, "step": 3})
        assert [int(r[0]) for r in next(dl)["t"]] == ref.indices(3).tolist()
    # padding waste against the plain cyclic mode, over one cycle
    def waste(dl):
        real = padded = 0
        for _ in range(3000 // 64):
            arr, lens = pad(next(dl)["t"])
            real += int(lens.sum())
            padded += arr.size
        return 1 - real / padded
    with DataLoader({"t": st}, batch_size=64, mode="bucket", lengths=lengths) as b, \
            DataLoader({"t": st}, batch_size=64) as c:
        assert waste(b) < waste(c) / 4
    st.close()


def test_dataloader_bucket_mode_errors(tmp_path):
    from loaderx.dataloader import DataLoader
    lengths = np.arange(100) % 7 + 1
    st = _ragged_tokens(tmp_path / "t", lengths)
    with pytest.raises(ValueError, match="needs lengths="):
        DataLoader({"t": st}, batch_size=4, mode="bucket")
    with pytest.raises(ValueError, match="10 values for streams of 100 records"):
        DataLoader({"t": st}, batch_size=4, mode="bucket", lengths=lengths[:10])
    with pytest.raises(ValueError, match="only to mode='bucket'"):
        DataLoader({"t": st}, batch_size=4, lengths=lengths)
    with pytest.raises(ValueError, match=r"\[0, 2\*\*32\)"):
        DataLoader({"t": st}, batch_size=4, mode="bucket", lengths=-lengths)
    with pytest.raises(ValueError, match="1-D integer"):
        DataLoader({"t": st}, batch_size=4, mode="bucket", lengths=lengths.astype(float))
    with DataLoader({"t": st}, batch_size=4) as dl:
        with pytest.raises(ValueError, match="has no lengths"):
            dl.load_state_dict({"step": 0, "mode": "bucket", "window": 8})
    st.close()
