"""pad(): ragged records to one dense array in native code, to the batch
maximum or a fixed length, with a pad value, lengths or a mask; straight
from a loader's ragged stream. (Before: no helper; ragged batches were
lists.)"""

import numpy as np
import pytest

from loaderx.dataloader import DataLoader, pad
from loaderx.zrecord import RaggedStore


def reference(records, length, value):
    L = max(len(r) for r in records) if length is None else length
    out = np.full((len(records), L) + records[0].shape[1:], value, dtype=records[0].dtype)
    for i, r in enumerate(records):
        out[i, :min(len(r), L)] = r[:L]
    return out


@pytest.mark.parametrize("length", [None, 1, 7, 40])
@pytest.mark.parametrize("dtype,inner", [("int32", ()), ("float64", (3,)), ("uint8", (2, 2))])
def test_pad_matches_reference(length, dtype, inner):
    rng = np.random.default_rng(3)
    recs = [rng.integers(0, 100, size=(int(n),) + inner).astype(dtype)
            for n in rng.integers(0, 30, size=9)]
    out, lens = pad(recs, length=length, pad_value=-1 if dtype != "uint8" else 255)
    assert np.array_equal(out, reference(recs, length, -1 if dtype != "uint8" else 255))
    assert lens.dtype == np.int64 and lens.tolist() == [len(r) for r in recs]
    out2, mask = pad(recs, length=length, return_mask=True)
    assert mask.shape == out2.shape[:2]
    assert mask.sum() == sum(min(len(r), out2.shape[1]) for r in recs)


def test_pad_value_patterns_and_errors():
    recs = [np.array([1.5, 2.5]), np.array([3.5])]
    out, _ = pad(recs, pad_value=np.nan)
    assert np.isnan(out[1, 1]) and out[0].tolist() == [1.5, 2.5]
    with pytest.raises(ValueError, match="record 1"):
        pad([np.zeros(3, np.int32), np.zeros(3, np.int64)])
    with pytest.raises(ValueError, match="record 1"):
        pad([np.zeros((3, 2)), np.zeros((3, 4))])
    with pytest.raises(TypeError, match="record 1"):
        pad([np.zeros(3), np.zeros(6)[::2]])
    with pytest.raises(ValueError):
        pad([])


def test_pad_a_loader_batch(tmp_path):
    with RaggedStore.create(str(tmp_path / "tok"), "int32") as st:
        st.append([np.arange(i % 11 + 1, dtype=np.int32) for i in range(100)])
    with RaggedStore.open(str(tmp_path / "tok"), readonly=True) as st:
        with DataLoader({"tok": st}, batch_size=16, seed=2) as L:
            b = next(L)
            out, lens = pad(b["tok"])
            assert np.array_equal(out, reference(b["tok"], None, 0))
            assert lens.tolist() == [len(r) for r in b["tok"]]
