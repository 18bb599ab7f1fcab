"""DataLoader: alignment, shapes, determinism across workers, resume."""

import numpy as np
import pytest

from loaderx.dataloader import DataLoader
from loaderx.zrecord import DenseStore, RaggedStore
from loaderx.zsampler import Sampler

N = 96


def ragged_len(i):
    return i % 5 + 1


@pytest.fixture
def streams(store_dir):
    """value record i == i everywhere, label i == i, ragged record i of
    length ragged_len(i) filled with i."""
    values = np.repeat(np.arange(N, dtype=np.float32), 6).reshape(N, 2, 3)
    with DenseStore.create(store_dir / "value", values.dtype, values.shape[1:]) as s:
        s.append(values)
    with DenseStore.create(store_dir / "label", np.int64, (), codec="raw") as s:
        s.append(np.arange(N, dtype=np.int64))
    with RaggedStore.create(store_dir / "tok", np.int32) as s:
        s.append(np.full(ragged_len(i), i, dtype=np.int32) for i in range(N))
    opened = {"value": DenseStore.open(store_dir / "value"),
              "label": DenseStore.open(store_dir / "label"),
              "tok": RaggedStore.open(store_dir / "tok")}
    yield opened
    for s in opened.values():
        s.close()


def test_batches_aligned_and_shaped(streams):
    with DataLoader(streams, batch_size=8, seed=1, num_workers=2) as loader:
        for _ in range(30):
            batch = next(loader)
            assert list(batch) == ["value", "label", "tok"]
            v, lab, tok = batch["value"], batch["label"], batch["tok"]
            assert v.shape == (8, 2, 3) and v.dtype == np.float32
            assert lab.shape == (8,) and lab.dtype == np.int64
            assert isinstance(tok, list) and len(tok) == 8
            np.testing.assert_array_equal(lab, loader.last_indices)
            for j in range(8):
                assert (v[j] == lab[j]).all()
                assert tok[j].shape == (ragged_len(lab[j]),)
                assert tok[j].dtype == np.int32 and (tok[j] == lab[j]).all()


def test_indices_follow_the_sampler(streams):
    s = Sampler(N, 16, "cyclic", seed=4)
    with DataLoader(streams, batch_size=16, seed=4) as loader:
        for k in range(10):
            next(loader)
            np.testing.assert_array_equal(loader.last_indices, s.indices(k))


def collect(streams, num_workers, steps=12, **kw):
    out = []
    with DataLoader(streams, batch_size=8, seed=11, num_workers=num_workers, **kw) as loader:
        for _ in range(steps):
            b = next(loader)
            out.append((b["value"].copy(), b["label"].copy(), [t.copy() for t in b["tok"]]))
    return out


def assert_same_batches(a, b):
    assert len(a) == len(b)
    for (v1, l1, t1), (v2, l2, t2) in zip(a, b):
        np.testing.assert_array_equal(v1, v2)
        np.testing.assert_array_equal(l1, l2)
        assert len(t1) == len(t2)
        for x, y in zip(t1, t2):
            np.testing.assert_array_equal(x, y)


def test_same_batches_for_any_worker_count(streams):
    one = collect(streams, 1)
    assert_same_batches(one, collect(streams, 4))
    assert_same_batches(one, collect(streams, 3, prefetch=1))


def test_state_resume(streams):
    full = collect(streams, 2, steps=10)
    with DataLoader(streams, batch_size=8, seed=11, num_workers=2) as loader:
        for _ in range(6):
            next(loader)
        st = loader.state()
    fp = st.pop("fingerprint")
    assert st == {"seed": 11, "step": 6, "mode": "cyclic", "batch_size": 8,
                  "rank": 0, "world_size": 1}
    assert [(s["name"], s["length"]) for s in fp["streams"]] == [(k, 96) for k in streams]
    with DataLoader(streams, batch_size=st["batch_size"], seed=st["seed"], mode=st["mode"],
                    start_step=st["step"], num_workers=3) as resumed:
        assert resumed.step == 6
        rest = []
        for _ in range(4):
            b = next(resumed)
            rest.append((b["value"], b["label"], b["tok"]))
        assert resumed.step == 10
    assert_same_batches(full[6:], rest)


def test_iteration_and_transform(streams):
    seen = []

    def collate(batch):
        seen.append(1)
        return {"x": batch["value"].reshape(len(batch["label"]), -1), "y": batch["label"]}

    loader = DataLoader(streams, batch_size=4, transform=collate, mode="iid")
    for i, batch in enumerate(loader):
        assert set(batch) == {"x", "y"} and batch["x"].shape == (4, 6)
        if i >= 5:
            break
    # The transform runs on the loader's threads, ahead of the consumer:
    # at least the 6 consumed batches went through it.
    assert len(seen) >= 6
    loader.close()


def test_batch_arrays_own_their_memory(streams):
    loader = DataLoader(streams, batch_size=8, num_workers=1)
    batch = next(loader)
    loader.close()
    del loader
    # still valid after the loader is gone; and writable (the caller's)
    batch["value"][0] = -1
    assert (batch["value"][0] == -1).all()
    assert batch["label"].sum() >= 0 and len(batch["tok"]) == 8


def test_close_and_errors(streams, store_dir):
    loader = DataLoader(streams, batch_size=4)
    loader.close()
    loader.close()
    with pytest.raises(ValueError, match="closed"):
        next(loader)
    with pytest.raises(ValueError, match="non-empty"):
        DataLoader({})
    with pytest.raises(ValueError, match="batch_size"):
        DataLoader(streams, batch_size=N + 1)
    with DenseStore.create(store_dir / "short", np.int64, ()) as short:
        short.append(np.arange(5))
        with pytest.raises(ValueError, match="'short': 5"):
            DataLoader({"label": streams["label"], "short": short}, batch_size=2)


def test_closing_a_store_closes_its_loaders(streams):
    loader = DataLoader(streams, batch_size=4)
    next(loader)
    streams["tok"].close()
    assert loader.closed
    with pytest.raises(ValueError, match="closed") as e:
        next(loader)
    # the library's detail names the stream and the store that was closed
    assert "store '" in str(e.value) and "was closed while this loader read it" in str(e.value)
    with pytest.raises(ValueError, match="closed"):
        DataLoader(streams, batch_size=4)


def test_closed_store_is_a_closed_error_naming_the_stream(streams):
    from loaderx.errors import ClosedError
    streams["tok"].close()
    with pytest.raises(ClosedError, match=r"stream 'tok': store '.*' is closed"):
        DataLoader({"label": streams["label"], "tok": streams["tok"]}, batch_size=4)
    # still a ValueError for callers that caught that
    with pytest.raises(ValueError, match="'tok'"):
        DataLoader({"tok": streams["tok"]}, batch_size=4)


def test_pickling_a_loader_is_a_clear_type_error(streams):
    import copy
    import pickle
    with DataLoader(streams, batch_size=4) as loader:
        next(loader)
        for proto in range(pickle.HIGHEST_PROTOCOL + 1):
            with pytest.raises(TypeError, match=r"a DataLoader cannot be pickled; pickle its "
                                                r"read-only stores and its state\(\) and rebuild it"):
                pickle.dumps(loader, protocol=proto)
        with pytest.raises(TypeError, match="cannot be pickled"):
            copy.deepcopy(loader)
        # the recipe the message gives works: state() pickles
        state = pickle.loads(pickle.dumps(loader.state()))
        assert state["step"] == 1
