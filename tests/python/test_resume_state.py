"""A resume cannot silently go wrong: the loader state carries what decides
the batches (each stream's name, length and store uuid, a mixture's sources,
weights and modes, flips, bucketing and pass options), and a resume against
anything else fails naming what changed. Continuing on grown data is asked
for explicitly (allow_grown=True) and follows the stated rule: the cycle in
flight finishes on the old length, then cycles draw from the new one. An
older state without a fingerprint loads with a warning."""

import json
import pickle
import warnings

import numpy as np
import pytest

from loaderx.dataloader import DataLoader, PassLoader, ResumeWarning
from loaderx.shards import Mixture
from loaderx.zrecord import DenseStore


def make(path, n, base=0, codec="raw"):
    st = DenseStore.create(path, "int64", (), codec=codec)
    st.append(np.arange(base, base + n, dtype=np.int64))
    return st


def take(loader, k):
    return [next(loader)["x"].copy() for _ in range(k)]


def test_state_is_json_and_names_the_data(tmp_path):
    st = make(tmp_path / "s", 1000)
    with DataLoader({"x": st}, batch_size=10, seed=3, num_workers=2) as dl:
        take(dl, 4)
        state = dl.state()
    assert state == json.loads(json.dumps(state)) == pickle.loads(pickle.dumps(state))
    assert state["step"] == 4 and state["seed"] == 3
    (entry,) = state["fingerprint"]["streams"]
    assert entry == {"name": "x", "length": 1000, "uuid": st.uuid}
    # state() still answers after close, and from a fresh dict each time
    state["fingerprint"]["streams"][0]["length"] = 5
    assert dl.state()["fingerprint"]["streams"][0]["length"] == 1000


def test_grown_store_is_refused_then_continued_by_the_rule(tmp_path):
    """The case of the report: a store grown from 1,000 to 1,100 records gave
    a different next batch and repeated half a cycle, with no warning."""
    st = make(tmp_path / "s", 1000)
    ref = DataLoader({"x": st}, batch_size=100, seed=1, num_workers=2)
    seen = take(ref, 5)
    state = ref.state()
    rest_of_cycle = take(ref, 5)  # steps 5..9: cycle 0 over 1,000 records
    ref.close()
    st.append(np.arange(1000, 1100, dtype=np.int64))

    with pytest.raises(ValueError) as ei:
        DataLoader.from_state({"x": st}, state)
    msg = str(ei.value)
    assert "1100 records now, 1000 in the state" in msg and "allow_grown" in msg, msg

    with pytest.warns(ResumeWarning, match="grown data"):
        dl = DataLoader.from_state({"x": st}, state, allow_grown=True)
    with dl:
        got = take(dl, 5)
        # the cycle in flight finishes on the old 1,000: no record repeats
        for a, b in zip(got, rest_of_cycle):
            np.testing.assert_array_equal(a, b)
        cycle0 = np.concatenate(seen + got)
        assert np.array_equal(np.sort(cycle0), np.arange(1000))
        # the next cycle draws from all 1,100, each at most once
        nxt = np.concatenate(take(dl, 11))
        assert len(np.unique(nxt)) == 1100 and nxt.max() == 1099
        later = dl.state()
    # a state saved after such a resume resumes exactly, without the flag
    with DataLoader.from_state({"x": st}, later) as again:
        np.testing.assert_array_equal(next(again)["x"], next(DataLoader.from_state(
            {"x": st}, later))["x"])


def test_other_data_is_named(tmp_path):
    a, b = make(tmp_path / "a", 300), make(tmp_path / "b", 300)
    other = make(tmp_path / "c", 300)  # same type and length, other records
    with DataLoader({"x": a, "y": b}, batch_size=10, seed=2) as dl:
        take(dl, 2)
        state = dl.state()
    with pytest.raises(ValueError, match=r"stream 1 \('y'\): uuid .* another store"):
        DataLoader.from_state({"x": a, "y": other}, state)
    with pytest.raises(ValueError, match="stream 0 is named 'x' in the state, 'z' now"):
        DataLoader.from_state({"z": a, "y": b}, state)
    with pytest.raises(ValueError, match="2 streams in the state, 1 now"):
        DataLoader.from_state({"x": a}, state)
    with pytest.raises(ValueError, match="batch_size: 10 in the state, 20 now"):
        DataLoader.from_state({"x": a, "y": b}, state, batch_size=20)
    # records deleted: a new uuid, and fewer records
    a.delete([0])
    b.delete([0])
    with pytest.raises(ValueError, match="records were deleted since"):
        DataLoader.from_state({"x": a, "y": b}, state, allow_grown=True)
    # the same checks through load_state_dict and DataLoader(**state)
    with DataLoader({"x": a, "y": b}, batch_size=10, seed=2) as dl:
        with pytest.raises(ValueError, match="uuid"):
            dl.load_state_dict(state)
    with pytest.raises(ValueError, match="uuid"):
        DataLoader({"x": a, "y": b}, **state)


def test_flips_are_in_the_state(tmp_path):
    img = DenseStore.create(tmp_path / "img", "uint8", (2, 4), codec="raw")
    img.append(np.arange(64 * 8, dtype=np.uint8).reshape(64, 2, 4) % 251)
    ref = DataLoader({"x": img}, batch_size=8, seed=4, flip={"x": 0.5})
    take(ref, 3)
    state = ref.state()
    want = next(ref)["x"]
    ref.close()
    assert state["flip"] == {"x": 0.5}
    # the state alone flips the same records (before: unflipped batches)
    with DataLoader.from_state({"x": img}, state) as dl:
        np.testing.assert_array_equal(next(dl)["x"], want)
    with pytest.raises(ValueError, match=r"flip: stream 'x' with p 0.5.* in the state, 0.7.* now"):
        DataLoader.from_state({"x": img}, state, flip={"x": 0.7})
    with pytest.raises(ValueError, match="flip: stream 'x' is flipped in the state, not now"):
        DataLoader.from_state({"x": img}, state, flip=None)
    with DataLoader({"x": img}, **state) as dl:  # the state's own flips, checked
        np.testing.assert_array_equal(next(dl)["x"], want)


def test_mixture_sources_weights_and_modes(tmp_path):
    big, small = make(tmp_path / "big", 400), make(tmp_path / "small", 100, base=1000)
    m = Mixture({"big": {"x": big}, "small": {"x": small}}, weights=[3, 1],
                modes=["cyclic", "iid"])
    with DataLoader(m, batch_size=8, seed=5) as dl:
        take(dl, 3)
        state = dl.state()
    with DataLoader.from_state(m, state) as dl:
        take(dl, 1)
    swapped = Mixture({"small": {"x": small}, "big": {"x": big}}, weights=[1, 3],
                      modes=["iid", "cyclic"])
    with pytest.raises(ValueError, match="sources are listed in another order"):
        DataLoader.from_state(swapped, state)
    reweighted = Mixture({"big": {"x": big}, "small": {"x": small}}, weights=[1, 1],
                         modes=["cyclic", "iid"])
    with pytest.raises(ValueError, match=r"mixture source 0: weight 3 in the state, 1 now"):
        DataLoader.from_state(reweighted, state)
    remoded = Mixture({"big": {"x": big}, "small": {"x": small}}, weights=[3, 1],
                      modes=["iid", "iid"])
    with pytest.raises(ValueError, match="mixture source 0: mode 'cyclic' in the state, 'iid'"):
        DataLoader.from_state(remoded, state)


def test_bucket_lengths_and_pass_options(tmp_path):
    st = make(tmp_path / "s", 200)
    lengths = np.arange(200) % 17
    with DataLoader({"x": st}, batch_size=10, mode="bucket", lengths=lengths, window=4) as dl:
        take(dl, 2)
        state = dl.state()
    assert state["mode"] == "bucket" and state["window"] == 4
    with DataLoader.from_state({"x": st}, state, lengths=lengths) as dl:
        take(dl, 1)
    with pytest.raises(ValueError, match="bucket lengths: the lengths of the first 200"):
        DataLoader.from_state({"x": st}, state, lengths=lengths[::-1].copy())
    p = PassLoader({"x": st}, batch_size=16, shuffle=True, seed=1, epoch=2)
    it = iter(p)
    next(it)
    ps = it.state()
    p.close()
    assert ps["fingerprint"]["pass"] == {"shuffle": True, "drop_last": False, "epoch": 2}


def test_older_state_loads_with_a_warning(tmp_path):
    st = make(tmp_path / "s", 300)
    ref = DataLoader({"x": st}, batch_size=10, seed=8)
    take(ref, 7)
    want = next(ref)["x"]
    ref.close()
    old = {"seed": 8, "step": 7, "mode": "cyclic", "batch_size": 10, "rank": 0, "world_size": 1}
    with pytest.warns(ResumeWarning, match=r"no fingerprint \(saved by an older version\)"):
        dl = DataLoader.from_state({"x": st}, old)
    with dl:
        np.testing.assert_array_equal(next(dl)["x"], want)
    # its options are still checked
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResumeWarning)
        with pytest.raises(ValueError, match="seed: 8 in the state, 9 now"):
            DataLoader.from_state({"x": st}, old, seed=9)


def test_store_uuid(tmp_path):
    st = make(tmp_path / "s", 10)
    u = st.uuid
    assert isinstance(u, str) and len(u) == 36 and u[14] == "4"
    assert st.info()["uuid"] == u
    st.append(np.arange(5, dtype=np.int64))
    st.compact()
    assert st.uuid == u
    st.delete([0])
    assert st.uuid != u
    ro = DenseStore.open(tmp_path / "s", readonly=True)
    assert ro.uuid == st.uuid
    ro.close()


def test_mixture_resume_keeps_the_loaders_mode(tmp_path):
    # Sources without a mode of their own draw by the loader's mode; the
    # state must carry that mode (not the loader's own in-order walk), so a
    # resume gives them the same one and continues with the same batch.
    big, small = make(tmp_path / "big", 400), make(tmp_path / "small", 100, base=1000)
    m = Mixture({"big": {"x": big}, "small": {"x": small}}, weights=[3, 1])
    with DataLoader(m, batch_size=8, seed=5, mode="iid") as dl:
        take(dl, 3)
        state = dl.state()
        want = [next(dl)["x"] for _ in range(2)]
    assert state["mode"] == "iid"
    with DataLoader.from_state(m, state) as dl:
        for w in want:
            np.testing.assert_array_equal(next(dl)["x"], w)
    with DataLoader(m, batch_size=8, seed=5, mode="iid") as dl:
        take(dl, 1)
        dl.load_state_dict(state)
        np.testing.assert_array_equal(next(dl)["x"], want[0])
    with DataLoader(m, batch_size=8, seed=5, mode="cyclic") as dl:
        with pytest.raises(ValueError, match="mode: 'iid' in the state, 'cyclic' now"):
            dl.load_state_dict(state)
    with pytest.raises(ValueError, match="mode 'iid' in the state, 'cyclic' now"):
        DataLoader.from_state(m, dict(state, mode="cyclic"))
